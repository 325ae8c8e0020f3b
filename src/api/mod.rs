//! The typed client of the monitoring API (docs/api.md, "The contract"): every operation, typed
//! errors, retries and the shared rate limiter.
//!
//! - [`model`]: requests, responses and the error body, shared with the emulator.
//! - [`ApiClient`]: one async method per operation.
//! - [`ApiError`]: what went wrong, never with the key or a ping token in it.
//! - [`limits`]: no redirect to another origin, no `Referer`, answers of at most 16 MiB.
//! - [`retry`]: which failures may be repeated; the retry loop and its
//!   [`crate::net::RetryPolicy`] are [`crate::net::retry`]'s, shared with pings.
//! - [`RateLimiter`]: at most N requests in any sliding window, one per process.

pub(crate) mod client;
pub(crate) mod error;
pub(crate) mod limits;
pub mod model;
pub(crate) mod operation;
pub(crate) mod ratelimit;
pub(crate) mod retry;

pub use client::{ApiClient, ApiClientConfig, ACCOUNT_HEADER};
pub use error::{ApiError, RequestLabel};
pub use operation::Operation;
pub use ratelimit::{Priority, Quota, RateLimitStats, RateLimiter};
