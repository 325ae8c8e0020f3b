//! Integration tests for `run`.
