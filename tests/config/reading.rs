//! Which file `config check` reads and what is said when a file cannot be read: the file as a
//! positional argument (or `--config`), the shipped example said to be the example once, and a
//! missing or unreadable file named in one line that says what to do, never called "invalid".

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use crate::util::{self, Home};

use super::{config_check, JOB};

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/example.toml")
        .to_str()
        .expect("utf-8 path")
        .to_owned()
}

#[test]
fn config_check_takes_the_file_as_an_argument_and_says_the_example_is_one_once() {
    let home = Home::new();
    let example = example();
    for args in [
        &["config", "check", &example][..],
        &["config", "check", "--config", &example][..],
        &["--config", &example, "config", "check", &example][..],
    ] {
        let checked = config_check(&home, args);
        assert_eq!(checked.code, 0, "{args:?}: {}", checked.stderr);
        assert!(checked.stdout.contains("valid, 10 jobs"), "{args:?}");
        assert_eq!(
            checked.stderr,
            format!(
                "heartbeat-agent: note: {example} is the shipped example: its checks, URLs and \
                 paths are placeholders; copy it, edit it and check the copy\n"
            ),
            "{args:?}"
        );
    }
    // A copy that was edited is checked as any config: its problems are warned about again.
    let copy = home.write_config(&format!(
        "{}\n# edited\n",
        std::fs::read_to_string(&example).expect("read example")
    ));
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let checked = config_check(&home, &["config", "check", copy.to_str().expect("utf-8")]);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(!checked.stderr.contains("note:"), "{}", checked.stderr);
    assert!(checked.stderr.contains("warning:"), "{}", checked.stderr);
    // Two different files: a usage error naming both.
    let checked = config_check(
        &home,
        &["config", "check", &example, "--config", "/elsewhere.toml"],
    );
    assert_eq!(checked.code, 2, "{}", checked.stderr);
    assert!(
        checked.stderr.contains("two files given") && checked.stderr.contains("/elsewhere.toml"),
        "{}",
        checked.stderr
    );
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_missing_config_is_one_line_not_an_invalid_one() {
    let home = Home::new();
    let missing = home.path("nope.toml");
    let missing = missing.to_str().expect("utf-8");
    let first = format!(
        "{missing}: configuration file not found; create it (see config/example.toml and \
         docs/config.md), or name another with --config FILE or $HEARTBEAT_AGENT_CONFIG"
    );
    let checked = config_check(&home, &["config", "check", missing]);
    assert_eq!(checked.code, 78);
    assert_eq!(checked.stderr, format!("{first}\n"));
    let paused = home
        .agent()
        .args(["--config", missing, "pause", "backup", "--for", "5m"])
        .output()
        .expect("pause runs");
    assert_eq!(paused.status.code(), Some(78));
    assert_eq!(
        stderr(&paused),
        format!("{first}\nheartbeat-agent: nothing was changed\n")
    );
}

/// A config only root can read (mode 600, owned by root), checked by another user: `nobody`
/// when the tests run as root (through `setpriv`), else this user after a chmod 000.
#[test]
fn an_unreadable_config_says_permission_denied_and_how_to_get_in() {
    let root = nix::unistd::geteuid().is_root();
    if root
        && !util::require(
            util::runs("setpriv", &["--help"]),
            "setpriv",
            "install util-linux (bash scripts/test-tools.sh)",
        )
    {
        return;
    }
    let home = Home::new();
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, JOB).expect("write config");
    std::fs::set_permissions(
        &path,
        std::fs::Permissions::from_mode(if root { 0o600 } else { 0o000 }),
    )
    .expect("chmod");
    let shown = path.to_str().expect("utf-8");
    for args in [
        &["config", "check", shown][..],
        &["--config", shown, "pause", "backup", "--for", "5m"][..],
    ] {
        let mut cmd = if root {
            home.agent_via(&[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ])
        } else {
            home.agent()
        };
        let out = cmd.args(args).output().expect("the agent runs");
        assert_eq!(out.status.code(), Some(78), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or_default();
        assert_eq!(
            first,
            format!(
                "{shown}: cannot read the configuration file: Permission denied (os error 13); \
                 run as a member of group heartbeat-agent or with sudo (the packaged file is \
                 mode 640, group heartbeat-agent)"
            ),
            "{args:?}"
        );
        assert!(!err.contains("invalid"), "{args:?}: {err}");
    }
}
