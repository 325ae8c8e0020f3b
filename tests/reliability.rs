//! The reliability and security suite (issue 9): broken configs, secrets never shown, random
//! input never panics, faults against a running daemon, a full disk and `kill -9`. See
//! RELIABILITY.md for the promise each test proves and the last figures.

mod corpus;
