//! `run --ping-url-file FILE`: the ping URL read from a file stays out of the process list
//! that every local user can read; a file that cannot be used (a FIFO, too large, missing, not
//! a URL) is a warning naming the file, never its content, and the command still runs with its
//! exit status passed through.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use super::{output, ping_url, stderr, Env, TOKEN};
use crate::util::http::{FakeServer, Mode};
use crate::util::wait_exit;

/// Writes `text` into `name` in the test's home with `mode`; returns its path as text.
fn url_file(env: &Env, name: &str, text: &str, mode: u32) -> String {
    let path = env.path(name);
    std::fs::write(&path, text).expect("write the file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path.to_str().expect("utf-8 path").to_owned()
}

/// The command line of `run` as another user sees it in `ps`: the command saves its parent's.
const SAVE_PARENT_ARGV: &str = "tr '\\0' ' ' < /proc/$PPID/cmdline > argv";

#[test]
fn the_ping_url_file_keeps_the_token_out_of_the_process_list() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let file = url_file(&env, "ping-url", &format!("{}\n", ping_url(&server)), 0o600);
    let out = output(env.run(&["--ping-url-file", &file, "--", "sh", "-c", SAVE_PARENT_ARGV]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let argv = std::fs::read_to_string(env.path("argv")).expect("argv saved");
    assert!(argv.contains("--ping-url-file"), "{argv}");
    assert!(
        !argv.contains(TOKEN),
        "the token is in the process list: {argv}"
    );
    let pings = server.requests();
    assert_eq!(pings.len(), 1, "{pings:?}");
    assert_eq!(pings[0].target, format!("/{TOKEN}"));

    // What the file avoids: --ping-url puts the token where everyone can read it.
    let url = ping_url(&server);
    let out = output(env.run(&["--ping-url", &url, "--", "sh", "-c", SAVE_PARENT_ARGV]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let argv = std::fs::read_to_string(env.path("argv")).expect("argv saved");
    assert!(argv.contains(TOKEN), "{argv}");

    // Both at once is an argument error: nothing runs.
    let out = output(env.run(&[
        "--ping-url",
        &url,
        "--ping-url-file",
        &file,
        "--",
        "touch",
        "x",
    ]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    assert!(!env.path("x").exists());
}

#[test]
fn an_unusable_ping_url_file_is_a_warning_and_the_command_still_runs() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let fifo = env.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let large = format!("{}{}", ping_url(&server), "x".repeat(17_000));
    let cases = [
        (
            fifo.to_str().expect("utf-8").to_owned(),
            "it is a FIFO, not a regular file",
        ),
        (
            url_file(&env, "large", &large, 0o600),
            "more than the 16384 a key or token file may hold",
        ),
        (
            env.path("missing").display().to_string(),
            "cannot read it: No such file",
        ),
        (
            url_file(&env, "ftp", &format!("ftp://h/{TOKEN}"), 0o600),
            "not used: ",
        ),
        (url_file(&env, "empty", "\n", 0o600), "it is empty"),
    ];
    for (file, why) in cases {
        let marker = env.path("ran");
        let _ = std::fs::remove_file(&marker);
        let script = format!("touch {}; exit 3", marker.display());
        let mut child = env
            .run(&["--ping-url-file", &file, "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start run");
        // Bounded: a reader that blocked on the FIFO would fail here instead of hanging.
        let status = wait_exit(&mut child, Duration::from_secs(10)).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("run hung on {file}")
        });
        let out = child.wait_with_output().expect("output");
        let err = stderr(&out);
        assert_eq!(status.code(), Some(3), "{file}: {err}");
        assert!(marker.exists(), "{file}: the command did not run");
        let expected = format!("--ping-url-file {file} not used: ");
        assert!(
            err.contains(&expected) && err.contains(why),
            "{file}: {err}"
        );
        assert!(err.contains("nothing will be pinged"), "{err}");
        assert!(!err.contains(TOKEN), "{err}");
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[test]
fn a_ping_url_file_others_can_read_is_used_with_a_warning() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let file = url_file(&env, "ping-url", &ping_url(&server), 0o644);
    let out = output(env.run(&["--ping-url-file", &file, "--", "true"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expected = format!(
        "ping URL file {file} is readable by group/others; chmod 600 it: it holds the check's \
         ping token"
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    assert!(!stderr(&out).contains(TOKEN));
    assert_eq!(server.requests().len(), 1);
}
