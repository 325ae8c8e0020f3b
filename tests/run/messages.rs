//! What `run` says to a newcomer: a command given without `--` gets one line saying to put
//! `--` before it (not clap's tip, which would run `-c`), an unquoted schedule gets one line
//! saying to quote it, and a good run is silent unless asked (`-v`, `--log-level info`), when
//! it says what it pinged.

use super::{output, ping_url, stderr, Env, TOKEN};
use crate::util::http::{FakeServer, Mode};

#[test]
fn a_command_without_dashes_is_told_in_one_line_to_put_dashes_before_it() {
    let env = Env::new();
    for (args, shown) in [
        (&["sh", "-c", "exit 3"][..], "-- sh -c 'exit 3'"),
        (&["--timeout", "5s", "touch", "ran"][..], "-- touch ran"),
    ] {
        let out = output(env.run(args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("heartbeat-agent: run: put `--` before the command: "),
            "{err}"
        );
        assert!(err.contains(shown), "{args:?}: {err}");
        assert!(!err.contains("tip"), "{err}");
        assert!(!env.path("ran").exists(), "{args:?} ran the command");
    }
    // An unknown option before a command: named, with the same pointer, and nothing runs.
    let out = output(env.run(&["--bogus", "touch", "ran"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unexpected option `--bogus`") && err.contains("go after `--`"),
        "{err}"
    );
    assert!(!env.path("ran").exists());
}

#[test]
fn an_unquoted_schedule_is_told_to_quote_the_expression() {
    let env = Env::new();
    let out = output({
        let mut cmd = env.home.agent();
        cmd.args(["schedule", "0", "3", "*", "*", "*"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "schedule: quote the expression, as in `heartbeat-agent schedule '0 3 * * *'`"
        ),
        "{err}"
    );
}

#[test]
fn a_good_run_is_silent_by_default_and_says_what_it_pinged_when_asked() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let url = ping_url(&server);
    let quiet = output(env.run(&["--ping-url", &url, "--", "true"]));
    assert_eq!(quiet.status.code(), Some(0));
    assert!(quiet.stderr.is_empty(), "{}", stderr(&quiet));
    for flag in [&["-v"][..], &["--log-level", "info"][..]] {
        let mut args = flag.to_vec();
        args.extend(["--ping-url", &url, "--", "true"]);
        let out = output(env.run(&args));
        assert_eq!(out.status.code(), Some(0), "{flag:?}");
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.contains("pinged http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("{flag:?}: no pinged line in {err:?}"));
        assert!(line.contains(" (HTTP 200, "), "{line}");
        assert!(line.contains(" ms)"), "{line}");
        assert!(!err.contains(TOKEN), "{err}");
    }
    assert_eq!(server.requests().len(), 3);
}
