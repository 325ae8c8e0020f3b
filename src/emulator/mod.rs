//! A local emulator of the monitoring API and its ping host, for tests, the demo and users who
//! want to try a config without an account.
