//! `run` against hostile input: a configuration file that is a FIFO or far too large (the
//! command still runs, at once, with a warning naming the file and the limit), a `--timeout`
//! of zero (refused like every command-line mistake, exit 2, nothing runs) and `{exit_code}`
//! in a fail URL's port (refused, exit 2: nothing is sent to another port).

use std::time::{Duration, Instant};

use super::{output, stderr, Env};
use crate::util::http::{FakeServer, Mode};

/// `run --config CONFIG -- touch ran` finishes within 5 s (a thread bounds the wait, so a run
/// that blocks fails the test instead of hanging it): its output, and whether `ran` exists.
fn run_on_config(env: &Env, config: &std::path::Path) -> (std::process::Output, bool) {
    let marker = env.path("ran");
    let mut cmd = env.run(&[
        "--ping-url",
        "http://127.0.0.1:9/tok-unused",
        "--",
        "touch",
        marker.to_str().expect("utf-8"),
    ]);
    cmd.env("HEARTBEAT_AGENT_CONFIG", config);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(output(cmd)));
    let started = Instant::now();
    let out = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("run returned within 5 s");
    assert!(started.elapsed() < Duration::from_secs(5));
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    (out, ran)
}

#[test]
fn a_fifo_or_a_huge_config_is_a_warning_and_the_command_runs() {
    let env = Env::new();
    let fifo = env.path("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let (out, ran) = run_on_config(&env, &fifo);
    assert!(ran, "the command did not run: {}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "{}: cannot read the configuration file: it is a FIFO, not a regular file; make it \
             a regular file of at most 8 MiB",
            fifo.display()
        )),
        "{}",
        stderr(&out)
    );

    // 200 MB: refused from its size, not read.
    let huge = env.path("huge.toml");
    let file = std::fs::File::create(&huge).expect("create");
    file.set_len(200 * 1024 * 1024).expect("a 200 MB file");
    let (out, ran) = run_on_config(&env, &huge);
    assert!(ran, "the command did not run: {}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("it is 209715200 bytes, more than the 8388608 a configuration file may hold"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_zero_timeout_is_a_usage_error() {
    let env = Env::new();
    let marker = env.path("ran");
    for zero in ["0s", "0m", "0d"] {
        let out = output(env.run(&[
            "--timeout",
            zero,
            "--",
            "touch",
            marker.to_str().expect("utf-8"),
        ]));
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "\"{zero}\" is zero, which would stop the command at once; leave --timeout out \
                 for no timeout"
            )),
            "{}",
            stderr(&out)
        );
        assert!(!marker.exists(), "the command ran with --timeout {zero}");
    }
}

#[test]
fn exit_code_in_a_fail_urls_port_is_a_usage_error_and_nothing_is_sent() {
    let env = Env::new();
    // The server's port without its last digit, then `{exit_code}`: a command that exits with
    // that digit would send the fail ping to the server's port (a port ending in 0 would need
    // a command that succeeds: another server is taken).
    let (server, port) = std::iter::repeat_with(|| {
        let server = FakeServer::start(Mode::Status(200));
        let port = server
            .url("")
            .rsplit(':')
            .next()
            .expect("a port")
            .to_owned();
        (server, port)
    })
    .find(|(_, port)| !port.ends_with('0'))
    .expect("a port not ending in 0");
    let (head, digit) = port.split_at(port.len() - 1);
    let fail = format!("http://127.0.0.1:{head}{{exit_code}}/fail-tok-123");
    let out = output(env.run(&[
        "--ping-url",
        "http://127.0.0.1:9/tok-unused",
        "--fail-url",
        &fail,
        "--",
        "sh",
        "-c",
        &format!("exit {digit}"),
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("{exit_code} is in its host or port; it may only be in the path or query"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("fail-tok-123"), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}
