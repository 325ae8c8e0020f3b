//! The typed client of the monitoring API (`../shared/spec/monitoring-api.md`): every operation,
//! typed errors, retries and the shared rate limiter.
