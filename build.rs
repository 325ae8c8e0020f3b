//! Build script: link the `heartbeat-agent` executable for a cheap start on Linux/glibc.
//!
//! `heartbeat-agent run` starts once per cron job, so what the kernel and the loader do before
//! and around `main` matters (see BENCHMARKS.md, "run wrapper overhead"):
//!
//! - **non-PIE**: a position-independent executable makes the dynamic loader apply about a
//!   megabyte of relocations (`.rela.dyn`, `.data.rel.ro`) at every start. A non-PIE one needs
//!   none. Shared libraries, the stack and the heap keep their address randomization; only the
//!   executable's own image sits at a fixed address. `HEARTBEAT_AGENT_PIE=1` keeps PIE.
//! - **function order**: `packaging/link/run.order` (written by `scripts/link-order.sh`) lists
//!   the functions `run` executes; lld places them together at the start of `.text`, so the
//!   kernel maps a few windows of code instead of half the binary. Only with rustc's own lld
//!   (the default linker of x86_64-unknown-linux-gnu since Rust 1.90) and no linker configured;
//!   `HEARTBEAT_AGENT_LINK_ORDER=0` turns it off. A stale entry is ignored by the linker.

use std::path::Path;

const ORDER_FILE: &str = "packaging/link/run.order";

fn main() {
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_PIE");
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_LINK_ORDER");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if var("HEARTBEAT_AGENT_PIE") != "1" {
        // Only the binaries: the library, tests and proc-macros are linked as before.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    if var("HEARTBEAT_AGENT_LINK_ORDER") != "0" && links_with_rust_lld() {
        let order = Path::new(&var("CARGO_MANIFEST_DIR")).join(ORDER_FILE);
        if order.is_file() {
            println!(
                "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                order.display()
            );
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// Whether the final link uses rustc's self-contained lld: x86_64-unknown-linux-gnu with rustc
/// 1.90 or later, and no linker chosen by configuration or flags.
fn links_with_rust_lld() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu" || !var("RUSTC_LINKER").is_empty() {
        return false;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if ["linker", "link-self-contained", "fuse-ld"]
        .iter()
        .any(|f| flags.contains(f))
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let Ok(out) = std::process::Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}
