//! Integration tests for `schedule`.
