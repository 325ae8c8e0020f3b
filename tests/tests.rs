//! The integration tests: one binary, one module per area, real processes and real sockets on
//! 127.0.0.1. Shared helpers live in `util`.

mod util;

mod api;
mod cluster;
mod config;
mod daemon;
mod demo;
mod emulator;
mod history;
mod import;
mod net;
mod outbox;
mod packaging;
mod reliability;
mod roundtrip;
mod run;
mod schedule;
mod status;
mod sync;
mod watch;
