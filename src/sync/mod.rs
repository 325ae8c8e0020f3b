//! Keeping each bound heartbeat check's definition (period, grace, alerting) true to the config
//! and the job's schedule through `PUT /v1/checks/heartbeat/{id}`.

pub mod period;
