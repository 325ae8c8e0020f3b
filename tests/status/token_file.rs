//! `--token-file` of `trigger`, `pause` and `resume`: with `--url` and no config at all, the
//! endpoint's token comes from a file and the daemon does the work (and checks the request);
//! without a token the refusal says how to pass one; a wrong token is refused by the daemon and
//! changes nothing; a token file that cannot serve is refused before anything is sent (exit 2,
//! naming the file).

use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use std::time::Duration;

use super::{listen_with_token, StatusHome, TOKEN};
use crate::util::emulator::{token_for, Background};
use crate::util::{self, Home};

fn activated(emulator: &Background) -> bool {
    let check = emulator.heartbeat_check("c1").expect("the check exists");
    check["activated"] != serde_json::Value::Bool(false)
}

/// Runs the agent in `caller` (no config file) with `args`; asserts the exit code; its stderr.
fn expect(caller: &Home, args: &[&str], code: i32) -> String {
    let output: Output = caller
        .agent()
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run the agent");
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{args:?}: {err}");
    err
}

/// A file in `caller` holding `text`, mode 0600.
fn token_file(caller: &Home, name: &str, text: &str) -> String {
    let path = caller.path(name);
    std::fs::write(&path, text).expect("write the token file");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path.display().to_string()
}

#[test]
fn with_url_and_token_file_pause_resume_and_trigger_need_no_config() {
    let emulator = Background::with_checks(&[("c1", &token_for("c1"))]);
    let home = Home::new();
    let marker = home.path("ran");
    let jobs = format!(
        "[[jobs]]\nname = \"backup\"\nschedule = \"0 0 1 1 *\"\ncheck_id = \"c1\"\n\
         shell = \"echo x >> {}\"\n[jobs.check]\nperiod = \"1d\"\ngrace = \"1h\"\n",
        marker.display()
    );
    home.write(Some(&emulator), &listen_with_token(&home), &jobs);
    let _daemon = home.daemon(emulator.api_key());
    let url = home.socket().display().to_string();
    let caller = Home::new();
    assert!(!caller.config_path().exists());
    let good = token_file(&caller, "token", &format!("{TOKEN}\n"));
    let wrong = token_file(&caller, "wrong", "not-the-token\n");
    let empty = token_file(&caller, "empty", "\n");
    let missing = caller.path("missing").display().to_string();
    let with = |command: &[&'static str], file: &str| -> Vec<String> {
        let mut args: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        args.extend([
            "--url".to_owned(),
            url.clone(),
            "--token-file".to_owned(),
            file.to_owned(),
        ]);
        args
    };
    let run = |args: &[String], code: i32| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        expect(&caller, &args, code)
    };

    // Without a token: the daemon's 401, and how to pass one.
    let err = expect(
        &caller,
        &["pause", "backup", "--for", "1h", "--url", &url],
        1,
    );
    assert!(err.contains("pass --token-file"), "{err}");
    let err = expect(&caller, &["trigger", "backup", "--url", &url], 1);
    assert!(err.contains("pass --token-file"), "{err}");
    // A token file that cannot serve: refused before anything is sent, naming the file.
    let err = run(&with(&["pause", "backup"], &empty), 2);
    assert!(
        err.contains(&format!("--token-file: {empty} holds no token")),
        "{err}"
    );
    let err = run(&with(&["trigger", "backup"], &missing), 2);
    assert!(
        err.contains(&format!("--token-file: cannot read {missing}")),
        "{err}"
    );
    // A wrong token: the daemon refuses it.
    let err = run(&with(&["pause", "backup"], &wrong), 1);
    assert!(err.contains("HTTP 401"), "{err}");
    // A request the daemon's config refuses: exit 2, nothing changed.
    let err = run(&with(&["pause", "nosuch"], &good), 2);
    assert!(err.contains("nosuch"), "{err}");
    assert!(
        activated(&emulator),
        "a refused pause deactivated the check"
    );
    assert!(!err.contains(TOKEN), "the token is never printed: {err}");

    let err = run(&with(&["pause", "backup", "--for", "1h"], &good), 0);
    assert!(err.contains("job \"backup\" paused"), "{err}");
    util::eventually(Duration::from_secs(10), "c1 deactivated", || {
        (!activated(&emulator)).then_some(()).ok_or("still active")
    });
    let err = run(&with(&["resume", "backup"], &good), 0);
    assert!(err.contains("job \"backup\" resumed"), "{err}");
    util::eventually(Duration::from_secs(10), "c1 re-activated", || {
        activated(&emulator)
            .then_some(())
            .ok_or("still deactivated")
    });
    let err = run(&with(&["trigger", "backup"], &good), 0);
    assert!(err.contains("started"), "{err}");
    util::eventually(Duration::from_secs(10), "the triggered run", || {
        marker.exists().then_some(()).ok_or("no run yet")
    });
}
