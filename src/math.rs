//! The binary's two libm functions, `pow` and `exp2`, defined in-process so that `libm.so.6` is
//! not loaded at all.
//!
//! Only two calls in the whole binary reach libm: `exp2` (the sync pacing rate,
//! `sync::pace`) and `pow` (tokio's multi-thread scheduler, an average of poll times). Loading
//! libm for them costs every process, `run -- true` included, 304 KiB of resident memory on
//! glibc 2.36 (240 KiB of its code, where the loader runs the IFUNC resolvers of libm's own
//! variants, and 64 KiB of data; docs/dev/profiles/profile-memory.md) and the loader's work at
//! every start. Measured on an http `run -- true`, interleaved, median of 21: peak RSS
//! 4.75 -> 4.52 MiB. With both symbols defined here the linker (`--as-needed`, rustc's default on
//! Linux) drops `libm.so.6` from the binary's `NEEDED` list; the test `packaging::the_binary_does_not_load_libm` keeps it dropped.
//!
//! The bodies are the `libm` crate's (rust-lang's port of musl's libm, the functions Rust's own
//! targets without a system libm use): within 1 ULP like glibc's, which is more than a backoff
//! rate and a moving average need. Only on Linux with glibc, where the saving was measured;
//! elsewhere the system's libm stays.

/// `pow(x, y)`: x raised to the power y, for every caller in the binary (C ABI).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// `exp2(x)`: 2 raised to the power x, for every caller in the binary (C ABI).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[no_mangle]
pub extern "C" fn exp2(x: f64) -> f64 {
    libm::exp2(x)
}
