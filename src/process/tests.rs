//! Unit tests of spawning and supervision with real `sh`.

use super::*;
use crate::run_end::ProcessEnd;
use nix::sys::signal::Signal;
use tokio::sync::mpsc;

fn sh(script: &str) -> CommandSpec {
    CommandSpec::from_argv(&["sh", "-c", script]).expect("non-empty argv")
}

fn no_limits() -> Limits {
    Limits {
        timeout: None,
        kill_after: Duration::from_secs(1),
    }
}

async fn run(spec: CommandSpec, limits: Limits) -> ChildOutcome {
    let (_tx, rx) = mpsc::unbounded_channel();
    spawn(&spec).expect("spawn").supervise(limits, rx).await
}

#[tokio::test]
async fn exit_code_and_signal_are_kept_apart() {
    let out = run(sh("exit 3"), no_limits()).await;
    assert_eq!(out.end, RunEnd::Ended(ProcessEnd::Exited(3)));
    assert_eq!(out.end.exit_status(), 3);
    let out = run(sh("kill -9 $$"), no_limits()).await;
    assert!(
        matches!(
            out.end,
            RunEnd::Ended(ProcessEnd::Signaled { signal: 9, .. })
        ),
        "{:?}",
        out.end
    );
    assert_eq!(out.end.exit_status(), 137);
}

#[tokio::test]
async fn spawn_errors_are_classified() {
    let spec = CommandSpec::from_argv(&["/nonexistent/prog-xyz"]).expect("argv");
    let err = spawn(&spec).expect_err("no such program");
    assert!(matches!(err, SpawnError::NotFound { .. }));
    assert_eq!(RunEnd::from(&err).exit_status(), 127);
    let spec = CommandSpec::from_argv(&["/"]).expect("argv");
    let err = spawn(&spec).expect_err("a directory");
    assert!(matches!(err, SpawnError::CannotExecute { .. }));
    assert_eq!(RunEnd::from(&err).exit_status(), 126);
    assert!(CommandSpec::from_argv::<&str>(&[]).is_none());
    assert!(CommandSpec::from_argv(&[""]).is_none());
}

#[tokio::test]
async fn timeout_terms_then_kills() {
    let limits = Limits {
        timeout: Some(Duration::from_millis(100)),
        kill_after: Duration::from_millis(200),
    };
    let out = run(sh("sleep 5"), limits).await;
    assert!(
        matches!(out.end, RunEnd::TimedOut { killed: false, .. }),
        "{:?}",
        out.end
    );
    assert_eq!(out.end.exit_status(), 124);
    let out = run(sh("trap '' TERM; sleep 5"), limits).await;
    assert!(out.end.killed());
    assert_eq!(out.end.exit_status(), 137);
}

#[tokio::test]
async fn capture_keeps_the_tail_and_env_is_clean() {
    // One stream only: the order of bytes read from two pipes is the reader's, not the child's.
    let mut spec =
        sh("printf 'x%.0s' $(seq 1 5000) >&2; echo \"[${HOME:-none}][$HEARTBEAT_AGENT_JOB]\" >&2");
    spec.io = Io::Capture { tail_bytes: 20 };
    spec.env_set
        .push(("HEARTBEAT_AGENT_JOB".into(), "j1".into()));
    spec.env_remove.push("HOME".into());
    let out = run(spec, no_limits()).await;
    let tail = out.tail.expect("captured");
    let text = tail.text();
    assert!(text.ends_with("[none][j1]\n"), "{text:?}");
    assert_eq!(text.len(), 20);
    assert!(tail.dropped() > 0);
}

#[tokio::test]
async fn stop_and_forward_reach_the_group() {
    let (tx, rx) = mpsc::unbounded_channel();
    let running = spawn(&sh("trap 'exit 7' USR1; sleep 5 & wait")).expect("spawn");
    tokio::time::sleep(Duration::from_millis(100)).await;
    tx.send(ChildControl::Forward(Signal::SIGUSR1))
        .expect("send");
    let out = running.supervise(no_limits(), rx).await;
    assert_eq!(out.end, RunEnd::Ended(ProcessEnd::Exited(7)));

    let (tx, rx) = mpsc::unbounded_channel();
    let running = spawn(&sh("sleep 5")).expect("spawn");
    tx.send(ChildControl::Stop {
        grace: Duration::from_millis(500),
    })
    .expect("send");
    let out = running.supervise(no_limits(), rx).await;
    assert!(out.end.stopped(), "{:?}", out.end);
    assert_eq!(out.end.exit_status(), 128 + 15);
}

#[tokio::test]
async fn capture_does_not_wait_for_a_background_process_holding_the_pipe() {
    let mut spec = sh("sleep 3 & echo done");
    spec.io = Io::Capture { tail_bytes: 100 };
    let started = std::time::Instant::now();
    let out = run(spec, no_limits()).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.tail.expect("captured").text(), "done\n");
}

#[tokio::test]
async fn a_child_starts_as_std_would_start_it() {
    // Its own group, no blocked and no ignored signal (the agent ignores SIGPIPE), stdin at its
    // end, the working directory asked for, a program without `/` found in the agent's PATH.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut spec = sh("echo \"pgid=$(ps -o pgid= $$ | tr -d ' ') pid=$$\"; \
         grep -E '^Sig(Blk|Ign)' /proc/$$/status | tr -s '\\t' ' '; \
         cat; echo \"stdin-ended cwd=$(pwd)\"");
    spec.io = Io::Capture { tail_bytes: 1000 };
    spec.working_dir = Some(dir.path().to_owned());
    let out = run(spec, no_limits()).await;
    assert_eq!(out.end, RunEnd::Ended(ProcessEnd::Exited(0)));
    let text = out.tail.expect("captured").text();
    let mut lines = text.lines();
    let ids = lines.next().expect("ids");
    let (pgid, pid) = ids.split_once(' ').expect("two fields");
    assert_eq!(
        pgid.trim_start_matches("pgid="),
        pid.trim_start_matches("pid="),
        "{text}"
    );
    assert_eq!(lines.next(), Some("SigBlk: 0000000000000000"), "{text}");
    // glibc's posix_spawn leaves its two internal signals (32, 33) ignored; SIGPIPE is not.
    let ignored = lines
        .next()
        .and_then(|l| l.strip_prefix("SigIgn: "))
        .expect("SigIgn");
    let ignored = u64::from_str_radix(ignored, 16).expect("hex");
    assert_eq!(ignored & !(0b11 << 31), 0, "{text}");
    let cwd = dir.path().canonicalize().expect("canonical");
    assert_eq!(
        lines.next(),
        Some(format!("stdin-ended cwd={}", cwd.display()).as_str()),
        "{text}"
    );
}

#[tokio::test]
async fn a_path_set_in_the_jobs_env_finds_its_program() {
    // std's rule: a program without `/` is looked up in the PATH the child gets.
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("only-here-xyz");
    std::fs::write(&script, "#!/bin/sh\necho found \"$PATH\"\n").expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let mut spec = CommandSpec::from_argv(&["only-here-xyz"]).expect("argv");
    spec.io = Io::Capture { tail_bytes: 1000 };
    spec.env_set.push(("PATH".into(), path.clone().into()));
    let out = run(spec, no_limits()).await;
    assert_eq!(out.end, RunEnd::Ended(ProcessEnd::Exited(0)));
    let text = out.tail.expect("captured").text();
    assert_eq!(text, format!("found {path}\n"));
    // Without it, the agent's own PATH is searched, and the program is not there.
    let spec = CommandSpec::from_argv(&["only-here-xyz"]).expect("argv");
    let err = spawn(&spec).expect_err("not in the agent's PATH");
    assert!(matches!(err, SpawnError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn a_child_is_waited_for_by_sigchld_where_there_is_no_pidfd() {
    let mut running = spawn(&sh("sleep 0.2; exit 5")).expect("spawn");
    running.child.watch_sigchld_only().expect("SIGCHLD stream");
    let out = running
        .supervise(no_limits(), mpsc::unbounded_channel().1)
        .await;
    assert_eq!(out.end, RunEnd::Ended(ProcessEnd::Exited(5)));
}
