//! The launcher with a real helper process and real children.

use std::time::Duration;

use super::*;
use crate::process::{Limits, Outcome, ProcessEnd};

fn captured(argv: &[&str]) -> CommandSpec {
    let mut spec = CommandSpec::from_argv(argv).expect("non-empty argv");
    spec.io = Io::Capture { tail_bytes: 4096 };
    spec
}

async fn finish(running: Running) -> Outcome {
    let (_control, rx) = tokio::sync::mpsc::unbounded_channel();
    let limits = Limits {
        timeout: Some(Duration::from_secs(20)),
        kill_after: Duration::from_secs(1),
    };
    running.supervise(limits, rx).await
}

fn output(outcome: &Outcome) -> String {
    let tail = outcome.tail.as_ref().expect("captured");
    String::from_utf8_lossy(&tail.contents()).into_owned()
}

#[tokio::test]
async fn a_launched_child_runs_in_its_own_group_with_the_environment_asked_for() {
    let launcher = Launcher::start().expect("helper");
    let mut spec = captured(&[
        "sh",
        "-c",
        "echo \"$X:${HOME-unset}:$(cut -d' ' -f5 /proc/$$/stat)\"; exit 3",
    ]);
    spec.env_set.push(("X".into(), "x value".into()));
    spec.env_remove.push("HOME".into());
    let running = launcher
        .spawn(&spec)
        .await
        .expect("taken")
        .expect("started");
    let pid = running.pid();
    let outcome = finish(running).await;
    assert_eq!(outcome.end, ProcessEnd::Exited(3));
    assert_eq!(outcome.not_started, None);
    assert_eq!(output(&outcome).trim(), format!("x value:unset:{pid}"));
}

/// The nice value (field 19) of `/proc/PID/stat`.
fn nice_of(pid: u32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = stat.rsplit_once(')').expect("comm").1;
    after_name
        .split_whitespace()
        .nth(16)
        .expect("nice")
        .parse()
        .expect("number")
}

#[tokio::test]
async fn the_helper_runs_above_the_daemon_and_its_children_at_the_default_priority() {
    let launcher = Launcher::start().expect("helper");
    let ours = nice_of(std::process::id());
    let spec = captured(&["sh", "-c", "cut -d' ' -f19 /proc/$$/stat"]);
    let outcome = finish(
        launcher
            .spawn(&spec)
            .await
            .expect("taken")
            .expect("started"),
    )
    .await;
    assert_eq!(
        output(&outcome).trim(),
        ours.max(0).to_string(),
        "the job's nice value"
    );
    // Raising needs root (or CAP_SYS_NICE), and only happens from a nice value <= 0.
    if nix::unistd::geteuid().is_root() && ours <= 0 {
        let expected = (ours - 5).max(-20);
        assert_eq!(
            nice_of(launcher.helper_pid()),
            expected,
            "the helper's nice value"
        );
    }
}

#[tokio::test]
async fn many_children_at_once_each_get_their_own_status_and_output() {
    let launcher = Launcher::start().expect("helper");
    let mut runs = Vec::new();
    for i in 0..40 {
        let spec = captured(&["sh", "-c", &format!("echo run {i}; exit {}", i % 7)]);
        let running = launcher
            .spawn(&spec)
            .await
            .expect("taken")
            .expect("started");
        runs.push(tokio::spawn(finish(running)));
    }
    for (i, run) in runs.into_iter().enumerate() {
        let outcome = run.await.expect("joined");
        assert_eq!(outcome.end, ProcessEnd::Exited(i as i32 % 7));
        assert_eq!(output(&outcome), format!("run {i}\n"));
    }
}

#[tokio::test]
async fn a_program_missing_from_path_is_not_found_before_anything_is_forked() {
    let launcher = Launcher::start().expect("helper");
    let spec = captured(&["heartbeat-agent-no-such-program-x1"]);
    let err = launcher
        .spawn(&spec)
        .await
        .expect("taken")
        .expect_err("missing");
    assert_eq!(
        err.to_string(),
        "heartbeat-agent-no-such-program-x1: command not found"
    );
}

#[tokio::test]
async fn failures_after_the_fork_are_reported_as_not_started() {
    let launcher = Launcher::start().expect("helper");
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "echo hi\n").expect("write");
    let spec = captured(&[plain.to_str().expect("utf-8")]);
    let outcome = finish(launcher.spawn(&spec).await.expect("taken").expect("forked")).await;
    assert_eq!(outcome.end, ProcessEnd::Exited(127));
    let reason = outcome.not_started.expect("not started");
    assert!(reason.contains("cannot execute"), "{reason}");

    let mut spec = captured(&["true"]);
    spec.working_dir = Some(dir.path().join("gone"));
    let outcome = finish(launcher.spawn(&spec).await.expect("taken").expect("forked")).await;
    let reason = outcome.not_started.expect("not started");
    assert_eq!(
        reason,
        "true: cannot start: cannot change to the working directory: No such file or directory (os error 2)"
    );
}

#[tokio::test]
async fn without_its_helper_the_launcher_declines_and_inherited_runs_do_not_use_it() {
    let launcher = Launcher::start().expect("helper");
    let spec = captured(&["true"]);
    let first = launcher
        .spawn(&spec)
        .await
        .expect("taken")
        .expect("started");
    assert_eq!(finish(first).await.end, ProcessEnd::Exited(0));
    let inherit = CommandSpec::from_argv(&["true"]).expect("argv");
    assert!(
        launcher.spawn(&inherit).await.is_none(),
        "only captured runs"
    );

    let helper = Pid::from_raw(launcher.helper_pid() as i32);
    nix::sys::signal::kill(helper, nix::sys::signal::Signal::SIGKILL).expect("kill helper");
    let _ = nix::sys::wait::waitpid(helper, None);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match launcher.spawn(&spec).await {
            None => break,
            Some(_) => assert!(std::time::Instant::now() < deadline, "still taken"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn programs_are_looked_up_as_execvp_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let tool = bin.join("tool");
    std::fs::write(&tool, "#!/bin/sh\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::join_paths(["/nonexistent", bin.to_str().expect("utf-8")]).expect("join");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let denied = resolve(OsStr::new("tool"), Some(&path), None).expect_err("not executable");
    assert_eq!(denied.raw_os_error(), Some(libc::EACCES));
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(
        resolve(OsStr::new("tool"), Some(&path), None).expect("found"),
        tool
    );
    let missing = resolve(OsStr::new("nope"), Some(&path), None).expect_err("missing");
    assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
    // A relative PATH entry is taken from the child's working directory.
    let found = resolve(
        OsStr::new("tool"),
        Some(OsStr::new("bin")),
        Some(dir.path()),
    );
    assert_eq!(found.expect("found"), tool);
    // With a slash, the program is used as given.
    let given = resolve(OsStr::new("./x"), Some(&path), None).expect("as given");
    assert_eq!(given, PathBuf::from("./x"));
}
