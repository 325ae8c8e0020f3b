//! Integration tests for `run`: the real binary, real `sh`, a real HTTP server on 127.0.0.1.
//! What the `run` modules share: [`Env`] (a home; `run` in it, waited for or started in the
//! background until its command is ready), [`signal`] to the wrapper, and [`IGNORES_SIGTERM`].

use std::io::Write;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{eventually, exists, Home};

mod fail_json;
mod hostile_config;
mod job;
mod messages;
mod ping_failures;
mod ping_url_file;
mod retries;
mod run_id;
mod signals;
mod start_fail;
mod terminal;
mod timeout;
use crate::util::http::{FakeServer, Mode};

const TOKEN: &str = "tok-9f8e7d6c5b4a";

struct Env {
    home: Home,
}

impl Env {
    fn new() -> Env {
        Env { home: Home::new() }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.home.path(name)
    }

    /// `heartbeat-agent run ARGS...` with a clean environment.
    fn run(&self, args: &[&str]) -> Command {
        let mut cmd = self.home.agent();
        cmd.arg("run").args(args).current_dir(self.home.root());
        cmd
    }

    /// `run ARGS...` started in the background (stdin from /dev/null), returned once its
    /// command has written the file `ready` in the home (it runs there); panics after 5 s.
    fn start(&self, args: &[&str], ready: &str) -> Child {
        let child = self
            .run(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn agent");
        let ready = self.path(ready);
        eventually(Duration::from_secs(5), "the command to be ready", || {
            exists(&ready)
        });
        child
    }
}

/// Sends `signal` to `run` (the wrapper) started as `child`.
fn signal(child: &Child, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, signal).expect("signal the wrapper");
}

/// `--timeout 300ms --kill-after 300ms` around a command that ignores SIGTERM: `run` kills its
/// group with SIGKILL and exits 137.
const IGNORES_SIGTERM: [&str; 8] = [
    "--timeout",
    "300ms",
    "--kill-after",
    "300ms",
    "--",
    "sh",
    "-c",
    "trap '' TERM; while :; do sleep 0.1; done",
];

fn output(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("run the agent")
}

/// `run FLAG URL -- touch ran`, which must be refused as a usage error (exit 2) before its
/// command runs; returns what it printed on stderr.
fn refused_usage(env: &Env, flag: &str, url: &str) -> String {
    let marker = env.path("ran");
    let out = output(env.run(&[flag, url, "--", "touch", marker.to_str().expect("utf-8")]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!marker.exists(), "a usage error runs nothing");
    stderr(&out)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ping_url(server: &FakeServer) -> String {
    server.url(&format!("/{TOKEN}"))
}

#[test]
fn success_pings_exactly_once_with_agent_headers() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let out = output(env.run(&["--ping-url", &url, "--source", "web-7", "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let ping = &requests[0];
    assert_eq!(
        (ping.method.as_str(), ping.target.as_str()),
        ("GET", &*format!("/{TOKEN}"))
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        ping.header("user-agent"),
        Some(&*format!("heartbeat-agent/{version}"))
    );
    assert_eq!(ping.header("origin"), Some("web-7"));
    assert!(
        out.stderr.is_empty(),
        "a good run is silent: {}",
        stderr(&out)
    );
}

#[test]
fn origin_defaults_to_the_host_name_and_post_is_available() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(204));
    let url = ping_url(&server);
    let out = output(env.run(&["--ping-url", &url, "--ping-method", "post", "--", "true"]));
    assert_eq!(out.status.code(), Some(0));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].header("content-length"), Some("0"));
    let host = nix::unistd::gethostname().expect("hostname");
    assert_eq!(requests[0].header("origin"), host.to_str());
}

#[test]
fn failing_command_is_not_pinged_and_its_status_passes_through() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let out = output(env.run(&["--ping-url", &url, "--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(server.requests().is_empty());
}

#[test]
fn success_codes_count_as_success() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let args = [
        "--ping-url",
        &url,
        "--success-codes",
        "0,3",
        "--",
        "sh",
        "-c",
        "exit 3",
    ];
    let out = output(env.run(&args));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn fail_and_start_urls_are_pinged_when_given() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let (ok, fail, start) = (server.url("/ok"), server.url("/fail"), server.url("/start"));
    let common = [
        "--ping-url",
        &ok,
        "--fail-url",
        &fail,
        "--start-url",
        &start,
    ];
    let out = output(env.run(&[&common[..], &["--", "sh", "-c", "exit 1"]].concat()));
    assert_eq!(out.status.code(), Some(1));
    let out = output(env.run(&[&common[..], &["--", "true"]].concat()));
    assert_eq!(out.status.code(), Some(0));
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.target).collect();
    assert_eq!(paths, ["/start", "/fail", "/start", "/ok"]);
}

#[test]
fn killed_by_signal_is_128_plus_n() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let out = output(env.run(&["--ping-url", &url, "--", "sh", "-c", "kill -9 $$"]));
    assert_eq!(out.status.code(), Some(137));
    assert!(server.requests().is_empty());
}

#[test]
fn not_found_is_127_and_not_executable_is_126() {
    let env = Env::new();
    let out = output(env.run(&["--", "no-such-command-hb"]));
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(
        stderr(&out),
        "heartbeat-agent: no-such-command-hb: command not found\n"
    );

    let script = env.path("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    let out = output(env.run(&["--", script.to_str().expect("utf8")]));
    assert_eq!(out.status.code(), Some(126));
    let err = stderr(&out);
    assert!(
        err.starts_with("heartbeat-agent: ") && err.contains("cannot execute"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn sigterm_to_the_wrapper_reaches_the_command() {
    let env = Env::new();
    let script = "trap 'echo got-term > marker; exit 5' TERM; echo ready > ready; \
                  while :; do sleep 0.05; done";
    let mut child = env.start(&["--", "sh", "-c", script], "ready");
    signal(&child, nix::sys::signal::Signal::SIGTERM);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(5));
    let marker = std::fs::read_to_string(env.path("marker")).expect("marker written");
    assert_eq!(marker, "got-term\n");
}

#[test]
fn broken_config_with_job_still_runs_the_command() {
    let env = Env::new();
    let config = env.path("config.toml");
    std::fs::write(&config, "[[jobs]\nname = \n").expect("write config");
    let out = output(env.run(&[
        "--config",
        config.to_str().expect("utf8"),
        "--job",
        "backup",
        "--",
        "sh",
        "-c",
        "echo ran; exit 6",
    ]));
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(out.stdout, b"ran\n");
    let err = stderr(&out);
    assert!(err.contains(config.to_str().expect("utf8")), "{err}");
    assert!(err.contains("running the command anyway"), "{err}");
}

#[test]
fn job_without_config_and_command_is_a_config_error() {
    let env = Env::new();
    let out = output(env.run(&["--config", "/nonexistent/hb.toml", "--job", "backup"]));
    assert_eq!(out.status.code(), Some(78));
    assert!(
        stderr(&out).contains("job \"backup\" has none to run"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_is_passed_through_byte_exact() {
    let env = Env::new();
    let script = r"printf '\000\001\377bin\r\nno-newline'; printf '\377err\000' >&2";
    let out = output(env.run(&["--", "sh", "-c", script]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"\x00\x01\xffbin\r\nno-newline");
    assert_eq!(out.stderr, b"\xfferr\x00");
}

#[test]
fn stdin_reaches_the_command() {
    let env = Env::new();
    let mut child = env
        .run(&["--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let input = b"line one\n\x00\xfe binary tail";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, input);
}

#[test]
fn child_environment_loses_the_agent_secrets() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let mut cmd = env.run(&["--job", "nightly", "--", "env"]);
    cmd.env("HEARTBEAT_AGENT_API_KEY", "sk-secret-1")
        .env("HEARTBEAT_AGENT_PING_URL", ping_url(&server))
        .env("NOTIFY_SOCKET", "/run/systemd/notify")
        .env("WATCHDOG_USEC", "1000000")
        .env("WATCHDOG_PID", "1")
        .env("HB_TEST_KEPT", "yes");
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = String::from_utf8_lossy(&out.stdout);
    for gone in [
        "HEARTBEAT_AGENT_API_KEY",
        "HEARTBEAT_AGENT_PING_URL",
        "NOTIFY_SOCKET",
        "WATCHDOG_",
    ] {
        assert!(!seen.contains(gone), "{gone} leaked into the child: {seen}");
    }
    assert!(seen.contains("HEARTBEAT_AGENT_JOB=nightly\n"), "{seen}");
    assert!(seen.contains("HB_TEST_KEPT=yes\n"));
    // The ping came from the environment variable.
    assert_eq!(server.requests().len(), 1);
}

/// `run --job` with a config that names its secrets' variables (`[api] api_key_env`,
/// `[cluster] password_env`): the command never sees them.
#[test]
fn child_environment_loses_the_configs_secret_variables() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let config = env.home.write_config(&format!(
        "[api]\napi_key_env = \"HB_TEST_API_KEY_VAR\"\n\n\
         [cluster]\nendpoints = [\"http://127.0.0.1:9\"]\nuser = \"agent\"\n\
         password_env = \"HB_TEST_ETCD_PASSWORD_VAR\"\n\n\
         [[jobs]]\nname = \"nightly\"\nschedule = \"0 3 * * *\"\nping_url = \"{}\"\n",
        ping_url(&server)
    ));
    let config = config.to_str().expect("utf-8");
    let mut cmd = env.run(&["--config", config, "--job", "nightly", "--", "env"]);
    cmd.env("HB_TEST_API_KEY_VAR", "sk-api-key-4242")
        .env("HB_TEST_ETCD_PASSWORD_VAR", "etcd-pw-4242")
        .env("HB_TEST_KEPT", "yes");
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let seen = String::from_utf8_lossy(&out.stdout);
    // The values whole, under any name: a bare "4242" also matched a run id by chance
    // (HEARTBEAT_AGENT_RUN_ID=02b1b8f0-e600-4242-...).
    for gone in [
        "HB_TEST_API_KEY_VAR",
        "HB_TEST_ETCD_PASSWORD_VAR",
        "sk-api-key-4242",
        "etcd-pw-4242",
    ] {
        assert!(!seen.contains(gone), "{gone} leaked into the child: {seen}");
    }
    assert!(seen.contains("HB_TEST_KEPT=yes\n"), "{seen}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn invalid_env_ping_url_is_a_warning_only() {
    let env = Env::new();
    let mut cmd = env.run(&["--", "sh", "-c", "exit 0"]);
    cmd.env("HEARTBEAT_AGENT_PING_URL", format!("ftp://h/{TOKEN}"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("HEARTBEAT_AGENT_PING_URL not used"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");
}

#[test]
fn debug_logs_never_show_the_token() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(503));
    let url = ping_url(&server);
    let out = output(env.run(&[
        "--log-level",
        "trace",
        "--ping-url",
        &url,
        "--ping-timeout",
        "1s",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(err.contains("127.0.0.1"), "{err}");
    assert!(!err.contains(TOKEN), "token leaked: {err}");
}

/// Bad arguments: exit 2, a message naming the problem, and the command never runs.
#[test]
fn bad_arguments_exit_2_without_running_anything() {
    let env = Env::new();
    let cases: [(&[&str], &str); 5] = [
        (&["touch", "ran"], "put `--` before the command"),
        (&["--"], "no command given"),
        (&["--", "", "ran"], "empty command"),
        (
            &[
                "--ping-url",
                &format!("http//no-scheme/{TOKEN}"),
                "--",
                "touch",
                "ran",
            ],
            "invalid --ping-url",
        ),
        (
            &["--bogus", "--", "touch", "ran"],
            "unexpected argument '--bogus'",
        ),
    ];
    for (args, message) in cases {
        let out = output(env.run(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(!err.contains(TOKEN), "{args:?}: {err}");
        assert!(!env.path("ran").exists(), "{args:?} ran the command");
    }
    let out = output(env.run(&["--timeout", "30", "--", "true"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("\"30s\""), "{}", stderr(&out));
}

/// Durations beyond ten years on the command line are a usage error before anything runs (they
/// used to abort the wrapper after the command started, leaving it unsupervised).
#[test]
fn absurd_durations_exit_2_without_running_anything() {
    let env = Env::new();
    for (flag, value) in [
        ("--timeout", "18446744073709551615s"),
        ("--kill-after", "10000000000d"),
        ("--ping-timeout", "18446744073709551615s"),
    ] {
        let out = output(env.run(&[flag, value, "--", "touch", "ran"]));
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = stderr(&out);
        let expected = format!(
            "duration \"{value}\" is longer than the longest allowed (3650d): give at most \"3650d\""
        );
        assert!(
            err.contains(&expected) && err.contains(flag),
            "{flag}: {err}"
        );
        assert!(!env.path("ran").exists(), "{flag} ran the command");
    }
}

#[test]
fn lock_refuses_a_second_concurrent_run() {
    let env = Env::new();
    let state = env.path("state");
    let state = state.to_str().expect("utf8");
    let hold = "touch started; while [ ! -e release ]; do sleep 0.02; done";
    let lock = ["--lock", "--state-dir", state, "--job", "j", "--"];
    let mut first = env.start(&[&lock[..], &["sh", "-c", hold]].concat(), "started");
    let started = Instant::now();
    let second = output(env.run(&[&lock[..], &["touch", "second"]].concat()));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(second.status.code(), Some(1));
    assert!(
        stderr(&second).contains("job \"j\" is still running"),
        "{}",
        stderr(&second)
    );
    assert!(!env.path("second").exists());
    std::fs::write(env.path("release"), "").expect("release");
    assert_eq!(first.wait().expect("wait").code(), Some(0));
    // Once the first is done, the lock is free again.
    let third = output(env.run(&[&lock[..], &["true"]].concat()));
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
}

#[test]
fn unusable_state_dir_runs_without_the_lock() {
    let env = Env::new();
    let not_a_dir = env.path("file");
    std::fs::write(&not_a_dir, "").expect("write");
    let args = [
        "--lock",
        "--state-dir",
        not_a_dir.to_str().expect("utf8"),
        "--",
        "sh",
        "-c",
        "exit 9",
    ];
    let out = output(env.run(&args));
    assert_eq!(out.status.code(), Some(9));
    assert!(
        stderr(&out).contains("running without --lock"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn ignored_signals_stay_ignored_for_the_command() {
    let env = Env::new();
    let agent = crate::util::bin();
    // `trap '' INT` makes the outer shell start the agent with SIGINT ignored; the command
    // must inherit that and survive a SIGINT to its group.
    let script = format!(
        "trap '' INT; HOME={home} {agent} run -- sh -c 'kill -INT $$; echo survived'",
        home = env.home.root().display(),
        agent = agent.display()
    );
    let out = output({
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"survived\n");
}
