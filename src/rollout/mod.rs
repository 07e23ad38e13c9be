//! Following a write until it is live: [`message`], the check the sweep queue brings back
//! with a delay, and when the next is due; [`judge`], whether the write is live, failed,
//! superseded or out of time, from the Application alone, with what each outcome records and
//! reports (pure); [`status`], the commit status set on the commit an image was built from;
//! [`follow`], the run of it: the first check sent after a write, and each check the queue
//! brings back read, judged and carried out, over what it borrows of the warm container;
//! [`alarms`], whether the CloudWatch alarms an Application names stayed out of `ALARM` for
//! the window after the write went live (pure), read by [`watched`]; [`downstreams`], the
//! Applications promoted from a verified rollout, found and woken.

pub mod alarms;
pub mod downstreams;
pub mod follow;
pub mod judge;
pub mod message;
pub mod status;
pub mod watched;
