//! `run` on a terminal: the command's group gets the foreground and gives it back, as under a
//! job-control shell. The agent runs as a session leader on a fresh pty.

use std::io::Write;
use std::time::Duration;

use super::Env;
use crate::util;

/// Starts the agent as a session leader whose controlling terminal is a new pty, as a login
/// shell's job would be; returns the child and the master side.
fn spawn_on_pty(env: &Env, args: &[&str]) -> (std::process::Child, std::fs::File) {
    util::spawn_on_pty(env.run(args))
}

/// Collects what the pty's master side shows until `done` holds for it (5 s at most); `on_line`
/// may type into the terminal once the first line arrived.
fn pty_output(master: &mut std::fs::File, type_after_first_line: &[u8], done: &str) -> String {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut reader = master.try_clone().expect("dup master");
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let mut typed = type_after_first_line.is_empty();
    let shown = util::receive_until(&rx, Duration::from_secs(5), |chunk: Vec<u8>| {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if !typed && seen.contains('\n') {
            master.write_all(type_after_first_line).expect("type");
            typed = true;
        }
        seen.contains(done)
    });
    assert!(shown, "no {done:?} on the terminal: {seen:?}");
    seen
}

/// Asserts the line starting with `tag` shows two equal numbers: a process group and the
/// terminal's foreground group.
fn assert_foreground(seen: &str, tag: &str) {
    let line = seen
        .lines()
        .find_map(|l| l.strip_prefix(tag))
        .unwrap_or_else(|| panic!("no {tag} line: {seen:?}"));
    let groups: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(groups.len(), 2, "{seen:?}");
    assert_eq!(
        groups[0], groups[1],
        "{tag} group is not in the foreground: {seen:?}"
    );
}

/// Prints `TAG pgrp tpgid` of the shell running it.
const SHOW_GROUPS: &str = "cut -d' ' -f5,8 /proc/$$/stat";

#[test]
fn interactive_command_gets_the_terminal_foreground() {
    let env = Env::new();
    // A background group reading the terminal would be stopped by SIGTTIN.
    let script = format!("printf 'child '; {SHOW_GROUPS}; read line; echo got:$line");
    let (mut child, mut master) = spawn_on_pty(&env, &["--", "sh", "-c", &script]);
    let seen = pty_output(&mut master, b"hello\n", "got:hello");
    assert_eq!(child.wait().expect("wait").code(), Some(0), "{seen}");
    assert_foreground(&seen, "child ");
}

#[test]
fn terminal_foreground_is_given_back_after_the_run() {
    let env = Env::new();
    // The outer agent hands the terminal to the shell's group; the inner one, run by that
    // shell, must hand it back to the shell when its command ends.
    let script = format!(
        "{} run -- true; printf 'after '; {SHOW_GROUPS}; echo end",
        crate::util::bin().display()
    );
    let (mut child, mut master) = spawn_on_pty(&env, &["--", "sh", "-c", &script]);
    let seen = pty_output(&mut master, b"", "end");
    assert_eq!(child.wait().expect("wait").code(), Some(0), "{seen}");
    assert_foreground(&seen, "after ");
}
