//! Following a write until it is live: [`message`], the check the sweep queue brings back
//! with a delay, and when the next is due; [`judge`], whether the write is live, failed,
//! superseded or out of time, from the Application alone, with what each outcome records and
//! reports (pure); [`status`], the commit status set on the commit an image was built from.

pub mod alarms;
pub mod judge;
pub mod message;
pub mod status;
pub mod watched;
