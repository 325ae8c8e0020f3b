//! Integration tests for `config`.
