//! The outbox under hostile local conditions (issue 18 item 4): a full disk is reported truly,
//! a FIFO where an entry should be never blocks anyone, and many pending pings cost an idle
//! daemon next to nothing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use heartbeat_agent::ping::outbox::PingContext;

use crate::util::daemon::Daemon;
use crate::util::outbox::{Behaviour, PingHost};
use crate::util::{self, wait_exit};

use super::{assert_no_secret, ping, text, token, Env};

/// Runs `script` as root of a new user and mount namespace (`unshare -rm`, which an
/// unprivileged user may do here and root always may), with a 64 KiB tmpfs mounted on the
/// state directory and filled up, so the agent meets a full disk. `AGENT` and `STATE` are set.
fn on_a_full_disk(env: &Env, script: &str) -> std::process::Output {
    let state = env.state();
    std::fs::create_dir_all(&state).expect("state dir");
    let setup = format!(
        "set -u\nmount -t tmpfs -o size=64k,mode=0700 tmpfs \"$STATE\"\n\
         dd if=/dev/zero of=\"$STATE/fill\" bs=4096 2>/dev/null\n{script}"
    );
    let out = Command::new("unshare")
        .args(["-rm", "sh", "-c", &setup])
        .env("AGENT", crate::util::bin())
        .env("STATE", &state)
        .env("HOME", env.home.root())
        .stdin(Stdio::null())
        .output()
        .expect("unshare runs (util-linux)");
    assert_no_secret(&out);
    out
}

#[test]
fn a_full_disk_is_reported_truly_and_never_gets_in_the_way_of_the_job() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Drop);
    let url = host.url(&token("full"));
    // Completely full: the ping cannot be kept, and the log says so (and why); the command's
    // output and status pass through.
    let out = on_a_full_disk(
        &env,
        &format!(
            "\"$AGENT\" --state-dir \"$STATE\" run --ping-url '{url}' --ping-timeout 300ms \
             -- sh -c 'echo job-output; exit 0'\necho \"status=$?\"\n\
             \"$AGENT\" --state-dir \"$STATE\" outbox list\n"
        ),
    );
    let all = text(&out);
    assert!(all.contains("job-output"), "{all}");
    assert!(all.contains("status=0"), "{all}");
    assert!(all.contains("not kept"), "{all}");
    assert!(all.contains("No space left on device"), "{all}");
    assert!(
        !all.contains("kept in the outbox for a later retry"),
        "{all}"
    );
    // Two free pages: the fresh entry takes one, so the failed attempts cannot be recorded in
    // a new file; the entry as first written is kept all the same, and the log says kept.
    let out = on_a_full_disk(
        &env,
        &format!(
            "rm -f \"$STATE/fill\"\ndd if=/dev/zero of=\"$STATE/fill\" bs=4096 count=14 2>/dev/null\n\
             \"$AGENT\" --state-dir \"$STATE\" run --ping-url '{url}' --ping-timeout 300ms -- true\n\
             echo \"status=$?\"\nrm -f \"$STATE/fill\"\n\
             \"$AGENT\" --state-dir \"$STATE\" outbox list --json\n"
        ),
    );
    let all = text(&out);
    assert!(all.contains("status=0"), "{all}");
    assert!(all.contains("kept in the outbox"), "{all}");
    assert!(!all.contains("not kept"), "{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = &stdout[stdout
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in:\n{all}"))..];
    let listed: serde_json::Value = serde_json::from_str(json).expect("JSON");
    assert_eq!(listed["entries"].as_array().map(Vec::len), Some(1), "{all}");
}

#[test]
fn a_fifo_in_the_outbox_never_blocks_run_flush_or_the_daemon() {
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(200));
    let outbox = env.outbox();
    super::store(&outbox, &host.url(&token("queued")));
    let dir = outbox.dir().to_owned();
    for name in ["0123456789abcdef.ping", "stats.json", ".lock"] {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    }
    // `.lock` a FIFO: set aside with a warning naming it and made anew, never waited on; the
    // FIFO entry is set aside, the real one delivered.
    let mut flush = env
        .cmd(&["outbox", "flush"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("flush");
    let status = wait_exit(&mut flush, Duration::from_secs(10)).expect("flush does not block");
    let out = flush.wait_with_output().expect("output");
    assert_eq!(status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("was set aside"), "{}", text(&out));
    assert!(text(&out).contains("outbox/.lock"), "{}", text(&out));
    assert!(dir.join(".lock").metadata().expect("a new lock").is_file());
    assert_eq!(host.count(&token("queued")), 1);
    assert!(dir.join("failed/0123456789abcdef.ping.corrupt").exists());
    let mut run = env
        .cmd(&["run", "--ping-url", &host.url(&token("run")), "--", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let status = wait_exit(&mut run, Duration::from_secs(10)).expect("run does not block");
    assert_eq!(status.code(), Some(0));
    assert_eq!(host.count(&token("run")), 1);
}

/// CPU seconds (user + system) a process used so far, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / per_second
}

#[test]
fn a_thousand_pending_pings_cost_an_idle_daemon_next_to_nothing() {
    // On a tmpfs where there is one (fsync is free there): storing 1000 entries durably on
    // this machine's disk takes half a minute, and the cost measured is the daemon's, not the
    // setup's.
    let shm = std::path::Path::new("/dev/shm");
    let state = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("state dir");
    let env = Env::new();
    let host = PingHost::start(Behaviour::Status(200));
    let outbox = heartbeat_agent::ping::outbox::Outbox::new(
        state.path(),
        2000,
        &heartbeat_agent::persist::Failures::default(),
    );
    let started = Instant::now();
    for i in 0..1000 {
        // As a `run` leaves them when the host said 503 with an hour's Retry-After.
        outbox
            .store(
                &ping(&host.url(&token(&format!("idle{i}")))),
                &PingContext::default(),
                1,
                Some(Duration::from_secs(3600)),
                "HTTP 503",
            )
            .expect("store");
    }
    eprintln!("1000 entries stored in {:?}", started.elapsed());
    let config = env.write_config("[[jobs]]\nname = \"elsewhere\"\nschedule = \"@daily\"\n");
    let daemon = Daemon::on(&env.home)
        .arg("--state-dir")
        .arg(state.path())
        .config(&config)
        .text_log()
        .start();
    // The first look reads every entry once; then the daemon idles.
    std::thread::sleep(Duration::from_secs(2));
    let before = cpu_seconds(daemon.pid());
    let window = Duration::from_secs(5);
    std::thread::sleep(window);
    let used = cpu_seconds(daemon.pid()) - before;
    daemon.kill();
    eprintln!("idle daemon with 1000 pending pings: {used:.2} CPU s in {window:?}");
    // Before: 77 % of a core (3.9 s in 5 s). A tenth of that would still be far too much;
    // the bound leaves room for a loaded test machine.
    assert!(used < 0.25, "{used:.2} CPU seconds in {window:?}");
    assert_eq!(host.paths().len(), 0, "nothing sent before the Retry-After");
    assert!(util::wait_until(
        Duration::from_secs(1),
        Duration::from_millis(50),
        || { outbox.depth().expect("depth") == 1000 }
    ));
}

/// A state directory that is a link to another user's directory is not followed by `run`: the
/// job runs, the ping goes out, nothing is written there, and the log says why.
#[test]
fn run_does_not_follow_a_state_dir_linked_to_another_users_directory() {
    let env = Env::new();
    let elsewhere = tempfile::tempdir().expect("dir");
    // As root the directory is given to nobody; as another user, root's `/` stands for it.
    let target = if nix::unistd::geteuid().is_root() {
        nix::unistd::chown(
            elsewhere.path(),
            Some(nix::unistd::Uid::from_raw(65534)),
            None,
        )
        .expect("chown");
        elsewhere.path().to_owned()
    } else {
        std::path::PathBuf::from("/")
    };
    std::os::unix::fs::symlink(&target, env.state()).expect("symlink");
    let host = PingHost::start(Behaviour::Status(200));
    let out = env.output(&[
        "run",
        "--ping-url",
        &host.url(&token("linked")),
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("linked")), 1, "the ping still goes out");
    assert!(text(&out).contains("it is not followed"), "{}", text(&out));
    assert!(
        !target.join("outbox").exists(),
        "nothing written through the link"
    );
}
