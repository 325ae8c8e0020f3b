//! The long-running supervisor: one task per job, reload on SIGHUP, orderly shutdown, systemd
//! notification.

pub mod notify;
