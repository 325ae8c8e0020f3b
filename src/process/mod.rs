//! Spawning and supervising child processes: own process group, signal forwarding, timeouts
//! (SIGTERM to the group, then SIGKILL), exit status as code or signal, environment hygiene.
