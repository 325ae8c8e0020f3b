//! `run`'s signals: every signal meant for the command reaches its group and none kills the
//! wrapper; as an orphan-inheriting process (PID 1, a child subreaper) it reaps orphans while
//! the command runs.

use std::os::unix::process::CommandExt;

use nix::sys::signal::Signal;

use super::*;

/// The signals a command may be sent through the wrapper without stopping it (SIGTERM, SIGINT,
/// SIGHUP and SIGQUIT also reach it: `sigterm_to_the_wrapper_reaches_the_command`).
const TOLD: [(Signal, &str); 9] = [
    (Signal::SIGUSR1, "USR1"),
    (Signal::SIGUSR2, "USR2"),
    (Signal::SIGALRM, "ALRM"),
    (Signal::SIGVTALRM, "VTALRM"),
    (Signal::SIGPROF, "PROF"),
    (Signal::SIGWINCH, "WINCH"),
    (Signal::SIGURG, "URG"),
    (Signal::SIGIO, "IO"),
    (Signal::SIGPWR, "PWR"),
];

#[test]
fn every_signal_for_the_command_reaches_it_and_the_wrapper_stays() {
    let env = Env::new();
    // The command traps each signal, writes its name, and exits 4 on `exit` appearing.
    let traps: String = TOLD
        .iter()
        .map(|(_, name)| format!("trap 'echo {name} >> got' {name}; "))
        .collect();
    let script =
        format!("{traps}echo ready > ready; while [ ! -e stop ]; do sleep 0.05; done; exit 4");
    let mut child = env.start(&["--", "sh", "-c", &script], "ready");
    let got = env.path("got");
    for (i, (told, name)) in TOLD.iter().enumerate() {
        signal(&child, *told);
        eventually(
            Duration::from_secs(5),
            &format!("the command to get {name}"),
            || {
                let text = std::fs::read_to_string(&got).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                if lines.len() > i && lines[i] == *name {
                    Ok(())
                } else {
                    Err(format!("{lines:?}; wrapper: {:?}", child.try_wait()))
                }
            },
        );
    }
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the wrapper ended"
    );
    std::fs::write(env.path("stop"), "").expect("stop file");
    let status = crate::util::wait_exit(&mut child, Duration::from_secs(5)).expect("wrapper ends");
    assert_eq!(
        status.code(),
        Some(4),
        "the command's own status passes through"
    );
}

#[test]
fn a_signal_after_the_command_ended_does_not_stop_the_ping() {
    // The ping host answers only after a while; a SIGUSR1 meanwhile must not abandon the ping.
    let env = Env::new();
    let server = FakeServer::start(Mode::Slow(800));
    let url = ping_url(&server);
    let mut child = env.start(
        &["--ping-url", &url, "--", "sh", "-c", "echo done > done"],
        "done",
    );
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, Signal::SIGUSR1);
    let status = crate::util::wait_exit(&mut child, Duration::from_secs(10)).expect("wrapper ends");
    assert_eq!(status.code(), Some(0));
    assert_eq!(server.requests().len(), 1, "the ping was delivered");
}

/// The zombie children of `parent`.
fn zombies_of(parent: u32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = &stat[stat.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().take(2).collect();
            (fields == ["Z", &*parent.to_string()]).then_some(pid)
        })
        .collect()
}

#[test]
fn as_a_subreaper_orphans_are_reaped_while_the_command_runs() {
    // A child subreaper inherits orphans as a container's PID 1 does, without a namespace.
    let env = Env::new();
    // `( sleep 0.3 & )` leaves an orphan that exits while the command still runs for seconds.
    let script =
        "( sleep 0.3 & ); echo ready > ready; while [ ! -e stop ]; do sleep 0.05; done; exit 3";
    let mut cmd = env.run(&["--", "sh", "-c", script]);
    // SAFETY: prctl is a single system call, safe between fork and exec.
    unsafe {
        cmd.pre_exec(|| nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from));
    }
    let mut child = cmd.stdin(Stdio::null()).spawn().expect("spawn agent");
    eventually(Duration::from_secs(5), "the command to start", || {
        exists(&env.path("ready"))
    });
    // The orphan exits after 0.3 s; it must be reaped at once, not when the command ends.
    std::thread::sleep(Duration::from_millis(400));
    let wrapper = child.id();
    let zombies =
        crate::util::poll(
            Duration::from_secs(2),
            Duration::from_millis(50),
            || match zombies_of(wrapper) {
                found if found.is_empty() => Ok(()),
                found => Err(found),
            },
        );
    assert!(
        zombies.is_ok(),
        "orphans left as zombies while the command runs: {zombies:?}"
    );
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the command still runs"
    );
    std::fs::write(env.path("stop"), "").expect("stop file");
    let status = crate::util::wait_exit(&mut child, Duration::from_secs(5)).expect("wrapper ends");
    assert_eq!(
        status.code(),
        Some(3),
        "the command's status is not stolen by the reaper"
    );
}
