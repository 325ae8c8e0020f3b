//! The local status endpoint: JSON status, Prometheus metrics, liveness and readiness.
