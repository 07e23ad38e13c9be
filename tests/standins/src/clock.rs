//! The stand-ins' notion of now: the wall clock, or a clock the test moves. The Argo CD
//! controller stand-in stamps every status it writes with it, and a test hands the same clock
//! to the function (as its injected `Clock`), so a rollout is scripted second by second and no
//! test waits on the wall clock for it.

use std::sync::Mutex;
use std::time::Duration;

use time::OffsetDateTime;

/// Now, from the wall clock or from the test.
#[derive(Debug)]
pub struct SimClock {
    /// `None`: the wall clock.
    at: Mutex<Option<OffsetDateTime>>,
}

impl SimClock {
    /// The wall clock: what benches and examples run against.
    pub fn wall() -> Self {
        Self {
            at: Mutex::new(None),
        }
    }

    /// A clock that moves only when the test moves it, from `start`.
    pub fn at(start: OffsetDateTime) -> Self {
        Self {
            at: Mutex::new(Some(start)),
        }
    }

    /// A test clock four minutes behind the wall clock, 600 ms into a second. Behind, because
    /// the EKS token the function signs with it must stay inside the window the STS stand-in
    /// accepts (at most 5 minutes ahead, 15 behind) while a scenario moves it minutes forward;
    /// into a second, so a write never falls on the whole second Argo CD's times are written
    /// in, as a real write rarely does.
    pub fn scripted() -> Self {
        let behind = OffsetDateTime::now_utc() - Duration::from_secs(4 * 60);
        let start = behind.replace_nanosecond(600_000_000).unwrap_or(behind);
        Self::at(start)
    }

    pub fn now(&self) -> OffsetDateTime {
        (*crate::faults::lock(&self.at)).unwrap_or_else(OffsetDateTime::now_utc)
    }

    /// Whether the test moves this clock.
    pub fn is_scripted(&self) -> bool {
        crate::faults::lock(&self.at).is_some()
    }

    /// Moves a scripted clock to `t` (never backwards); the wall clock is not moved.
    pub fn set(&self, t: OffsetDateTime) {
        let mut at = crate::faults::lock(&self.at);
        if let Some(now) = at.as_mut() {
            *now = (*now).max(t);
        }
    }

    pub fn advance(&self, by: Duration) {
        self.set(self.now() + by);
    }
}
