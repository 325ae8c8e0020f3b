//! Build script: hand lld the order of the functions `heartbeat-agent run` and the daemon
//! execute, so each path's code sits together at the start of `.text`.
//!
//! The binary is linked as rustc links it on Linux: position-independent (PIE), with full RELRO
//! and BIND_NOW (`tests/packaging.rs` checks all three on the built binary). This script adds no
//! linker script and changes nothing of the data's layout.
//!
//! **packed relative relocations** (`-z pack-relative-relocs`, `DT_RELR`): a PIE holds about
//! 40,000 relative relocations (vtables, panic locations, string tables in `.data.rel.ro`),
//! which the loader reads at every start: 970 KB as `.rela.dyn`, about 20 KB packed. Only with
//! rustc's own lld and when this machine's glibc reads them (2.36 and later: the binary then
//! needs that glibc, as dpkg's `libc6 (>= 2.36)` dependency says), not when cross-compiling.
//!
//! **function order**: `packaging/link/run.order` lists the functions `run` executes,
//! `packaging/link/daemon.order` those the daemon executes once started and then those of its
//! start-up (both written by `scripts/link-order.sh`, one step of the release in
//! docs/packaging.md). lld places them at the start of `.text` in the order [`link_order`]
//! composes, so each path maps a few windows of code instead of half the binary (the kernel
//! maps 64 KiB around every first touch of a page). Only with rustc's own lld (the default
//! linker of x86_64-unknown-linux-gnu since Rust 1.90) and no linker configured;
//! `HEARTBEAT_AGENT_LINK_ORDER=0` turns it off. The lists are a hint, never a requirement: a
//! name that is gone (a rename, a `Cargo.lock` or toolchain change) is skipped by the linker
//! without a warning, and `scripts/check-link-order.sh` only reports how much of them is left.

use std::collections::HashSet;
use std::path::Path;

const ORDER_FILE: &str = "packaging/link/run.order";
const DAEMON_ORDER_FILE: &str = "packaging/link/daemon.order";
/// The line of `daemon.order` after which its start-up functions are listed.
const START_UP_MARKER: &str = "# start-up";

fn main() {
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_LINK_ORDER");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-changed={DAEMON_ORDER_FILE}");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    let rust_lld = links_with_rust_lld();
    if rust_lld && var("TARGET") == var("HOST") && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    if var("HEARTBEAT_AGENT_LINK_ORDER") != "0" && rust_lld {
        let root = Path::new(&var("CARGO_MANIFEST_DIR")).to_owned();
        let read = |file: &str| std::fs::read_to_string(root.join(file)).unwrap_or_default();
        let (run, daemon) = (read(ORDER_FILE), read(DAEMON_ORDER_FILE));
        let order = link_order(&run, &daemon);
        if !order.is_empty() {
            let path = Path::new(&var("OUT_DIR")).join("link.order");
            std::fs::write(&path, order.join("\n") + "\n").expect("OUT_DIR is writable");
            println!(
                "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
                path.display()
            );
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        }
    }
}

/// The order of functions handed to lld, in four groups: `run`'s functions that the daemon
/// never executes, in reverse; then `run`'s that it does (at start-up or after), in `run`'s
/// order; then the daemon's own steady path, then its own start-up. `run`'s list starts with
/// an http `run`, so reversing the first group puts that run's own functions at its end, next
/// to the start of the second: an http `run` executes one contiguous block, and so does the
/// daemon (the second to fourth groups). Split without the reversal, an http `run`'s code was
/// two blocks and its peak 0.1-0.2 MiB higher; with the first group judged by the steady path
/// alone, `run`'s functions the daemon's start-up shares (clap's styling, the config's parser)
/// sat in the first group and the daemon kept a 232 KiB window of it resident.
fn link_order<'a>(run: &'a str, daemon: &'a str) -> Vec<&'a str> {
    let names = |lines: &[&'a str]| -> Vec<&'a str> {
        lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect()
    };
    let daemon: Vec<&str> = daemon.lines().collect();
    let marker = daemon
        .iter()
        .position(|l| l.trim() == START_UP_MARKER)
        .unwrap_or(daemon.len());
    let run: Vec<&str> = run.lines().collect();
    let (run, steady, start) = (
        names(&run),
        names(&daemon[..marker]),
        names(&daemon[marker..]),
    );
    let in_daemon: HashSet<&str> = steady.iter().chain(&start).copied().collect();
    let in_run: HashSet<&str> = run.iter().copied().collect();
    let mut seen = HashSet::new();
    let groups = [
        run.iter()
            .rev()
            .filter(|n| !in_daemon.contains(*n))
            .collect::<Vec<_>>(),
        run.iter().filter(|n| in_daemon.contains(*n)).collect(),
        steady.iter().filter(|n| !in_run.contains(*n)).collect(),
        start.iter().collect(),
    ];
    groups
        .into_iter()
        .flatten()
        .copied()
        .filter(|n| seen.insert(*n))
        .collect()
}

/// Whether this machine's glibc, which the binary is linked against and will run with, reads
/// packed relative relocations (`DT_RELR`, glibc 2.36 and later; `getconf GNU_LIBC_VERSION`).
fn glibc_has_relr() -> bool {
    let Ok(out) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    (major, minor) >= (2, 36)
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
