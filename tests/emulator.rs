//! Integration tests for `emulator`.
