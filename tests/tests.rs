//! The integration tests: one binary, one module per area, real processes and real sockets on
//! 127.0.0.1. Shared helpers live in `util`.

mod util;

mod api;
mod config;
mod daemon;
mod emulator;
mod import;
mod outbox;
mod reliability;
mod roundtrip;
mod run;
mod schedule;
mod sync;
mod watch;
