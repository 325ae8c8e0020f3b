//! Integration tests for `api`.
