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
//!   the functions `run` executes, `packaging/link/daemon.order` those the daemon executes once
//!   started and then those of its start-up. lld places them at the start of `.text` in the
//!   order [`link_order`] composes, so each path maps a few windows of code instead of half the
//!   binary (the kernel maps 64 KiB around every first touch of a page). Only with rustc's own
//!   lld (the default linker of x86_64-unknown-linux-gnu since Rust 1.90) and no linker
//!   configured; `HEARTBEAT_AGENT_LINK_ORDER=0` turns it off. A stale entry is ignored by the
//!   linker.
//! - **data order**: `packaging/link/data.order` (same script) lists the input sections of
//!   `.rodata` and `.data.rel.ro` that `run`, then the running daemon, then its start-up read;
//!   a linker script ([`data_order_script`]) places them first, so an http `run` maps 7 windows
//!   of read-only data instead of 18. Release builds also write lld's map
//!   (`OUT_DIR/heartbeat-agent.map`), which the script reads to name the section at an address.

use std::collections::HashSet;
use std::path::Path;

const ORDER_FILE: &str = "packaging/link/run.order";
const DAEMON_ORDER_FILE: &str = "packaging/link/daemon.order";
const DATA_ORDER_FILE: &str = "packaging/link/data.order";
/// The line of `daemon.order` after which its start-up functions are listed.
const START_UP_MARKER: &str = "# start-up";

fn main() {
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_PIE");
    println!("cargo:rerun-if-env-changed=HEARTBEAT_AGENT_LINK_ORDER");
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-changed={DAEMON_ORDER_FILE}");
    println!("cargo:rerun-if-changed={DATA_ORDER_FILE}");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if var("HEARTBEAT_AGENT_PIE") != "1" {
        // Only the binaries: the library, tests and proc-macros are linked as before.
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    if var("HEARTBEAT_AGENT_LINK_ORDER") != "0" && links_with_rust_lld() {
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
        let script = data_order_script(&read(DATA_ORDER_FILE));
        let path = Path::new(&var("OUT_DIR")).join("data-order.ld");
        std::fs::write(&path, script).expect("OUT_DIR is writable");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", path.display());
        if var("PROFILE") == "release" {
            // scripts/link-order.sh reads which input section holds each data address here.
            let map = Path::new(&var("OUT_DIR")).join("heartbeat-agent.map");
            println!("cargo:rustc-link-arg-bins=-Wl,-Map={}", map.display());
        }
    }
}

/// The order of functions handed to lld, in three groups: `run`'s functions that the running
/// daemon does not execute, in reverse; then `run`'s that it does, in `run`'s order; then the
/// daemon's steady path alone, then its start-up. `run`'s list starts with an http `run`, so
/// reversing the first group puts that run's own functions at its end, next to the start of
/// the second: an http `run` executes one contiguous block, and so does the running daemon
/// (the second and third groups). Split without the reversal, an http `run`'s code was two
/// blocks and its peak 0.1-0.2 MiB higher.
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
    let in_steady: HashSet<&str> = steady.iter().copied().collect();
    let in_run: HashSet<&str> = run.iter().copied().collect();
    let mut seen = HashSet::new();
    let groups = [
        run.iter()
            .rev()
            .filter(|n| !in_steady.contains(*n))
            .collect::<Vec<_>>(),
        run.iter().filter(|n| in_steady.contains(*n)).collect(),
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

/// A linker script that places the data sections `data.order` lists (`# run`, `# steady`,
/// `# start-up`; a section name and its size per line) first in `.rodata` and `.data.rel.ro`,
/// in that order, leaving the rest of the layout to lld's defaults (`OVERWRITE_SECTIONS`).
/// The merged constants, which every path reads, come first; the merged strings after the
/// small sections of `run` and the steady path; then the large ones, then the start-up's. The
/// listed sections are unnamed constants
/// (`.rodata..Lanon.<hash>.<n>`), jump tables and vtables, which carry no symbol for
/// `--symbol-ordering-file`; a name that is gone matches nothing.
fn data_order_script(list: &str) -> String {
    // (group, name, size) in the list's order: the order of first touch.
    let mut sections: Vec<(&str, &str, u64)> = Vec::new();
    let mut group = "";
    for line in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(title) = line.strip_prefix("# ") {
            if ["run", "steady", "start-up"].contains(&title) {
                group = title;
            }
        } else if !line.starts_with('#') && !group.is_empty() && !line.contains('"') {
            let mut words = line.split(' ');
            if let (Some(name), Some(Ok(size))) = (words.next(), words.next().map(str::parse)) {
                sections.push((group, name, size));
            }
        }
    }
    // One rule per section keeps the list's order (a rule with several names places them in
    // the objects' order). Large tables (ring's precomputed points, 24-151 KB) would push
    // the small constants that follow into further windows: they go after the strings.
    let rules = |prefix: &str, groups: &[&str], large: bool| -> String {
        sections
            .iter()
            .filter(|(g, n, size)| {
                groups.contains(g) && n.starts_with(prefix) && (*size >= LARGE_SECTION) == large
            })
            .map(|(_, n, _)| format!("    *(\"{n}\")\n"))
            .collect()
    };
    let mut script = String::from("OVERWRITE_SECTIONS\n{\n  .rodata : {\n");
    script += "    *(.rodata.cst16) *(.rodata.cst32) *(.rodata.cst8) *(.rodata.cst4)\n";
    // The compiler's own unnamed `.rodata` (a few bytes every path reads), not the C objects'.
    script += "    *.rcgu.o(.rodata)\n";
    script += &rules(".rodata.", &["run", "steady"], false);
    script += "    *(.rodata.str1.1)\n";
    script += &rules(".rodata.", &["run", "steady"], true);
    script += &rules(".rodata.", &["start-up"], false);
    script += &rules(".rodata.", &["start-up"], true);
    script += "    *(.rodata .rodata.*)\n  }\n  .data.rel.ro : {\n";
    script += &rules(".data.rel.ro.", &["run", "steady", "start-up"], false);
    script += &rules(".data.rel.ro.", &["run", "steady", "start-up"], true);
    script += "    *(.data.rel.ro .data.rel.ro.*)\n  }\n}\n";
    script
}

/// The size from which a listed data section is placed after the small ones (bytes).
const LARGE_SECTION: u64 = 8 * 1024;

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
