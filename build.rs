//! Build script: link the `heartbeat-agent` executable as non-PIE on Linux/glibc.
//!
//! A position-independent executable makes the dynamic loader apply about a megabyte of
//! relocations (`.rela.dyn`, `.data.rel.ro`) at every start, before `main`: a fixed cost of
//! milliseconds and megabytes for `heartbeat-agent run`, which starts once per cron job. A
//! non-PIE executable needs none of it (see BENCHMARKS.md, "run wrapper overhead"). Shared
//! libraries and the stack and heap keep their address randomization; only the executable's own
//! image sits at a fixed address. Set `HEARTBEAT_AGENT_PIE=1` at build time to keep PIE.

fn main() {
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let keep_pie = std::env::var("HEARTBEAT_AGENT_PIE").is_ok_and(|v| v == "1");
    if os == "linux" && env == "gnu" && !keep_pie {
        // Only the binaries: the library, tests and proc-macros are linked as before.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
