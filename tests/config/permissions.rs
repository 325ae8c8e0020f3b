//! Secrets in files other local users can read: `config check` warns about a readable key file,
//! config file or token file (or an inline token in a readable config), stays valid, and never
//! shows the secret.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::util::Home;

use super::{check_text, config_check, Checked, JOB};

#[test]
fn key_file_readable_by_others_warns_and_the_key_never_shows() {
    let home = Home::new();
    let key = home.path("api-key");
    std::fs::write(&key, "sk_live_NEVER_SHOWN\n").expect("write key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let text = format!(
        "[api]\napi_key_file = \"{}\"\n{JOB}check_id = \"c\"\n",
        key.display()
    );
    let (_dir, path, checked) = check_text(&text);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(
        checked.stderr.contains(&format!(
            "heartbeat-agent: warning: {}:2:16: [api]: key `api_key_file`: api key file {} is \
             readable by group/others; chmod 600 it",
            path.display(),
            key.display()
        )),
        "{}",
        checked.stderr
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (_dir, _path, private) = check_text(&text);
    assert_eq!(private.code, 0);
    assert!(!private.stderr.contains("chmod 600"), "{}", private.stderr);
    for output in [
        &checked.stdout,
        &checked.stderr,
        &private.stdout,
        &private.stderr,
    ] {
        assert!(!output.contains("NEVER_SHOWN"), "{output}");
    }
}

/// Runs `config check` on the config at `path` after a chmod to `mode`.
fn check_with_mode(home: &Home, path: &Path, mode: u32) -> Checked {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let path = path.to_str().expect("utf-8 path");
    config_check(home, &["config", "check", "--config", path])
}

#[test]
fn a_config_holding_secrets_others_can_read_warns_and_stays_valid() {
    let url = "https://ping.example.com/tok-CONFIG-SECRET";
    let home = Home::new();
    let path = home.write_config(&format!("{JOB}ping_url = \"{url}\"\n"));
    let warning = format!(
        "heartbeat-agent: warning: {}:4:12: config file {} is readable by group/others; it \
         holds secrets (`ping_url`): chmod 600 it, or 640 with group heartbeat-agent",
        path.display(),
        path.display()
    );
    for mode in [0o644, 0o604] {
        let checked = check_with_mode(&home, &path, mode);
        assert_eq!(checked.code, 0, "{}", checked.stderr);
        assert!(
            checked.stdout.contains("valid, 1 job"),
            "{}",
            checked.stdout
        );
        assert!(
            checked.stderr.contains(&warning),
            "{mode:o}: {}",
            checked.stderr
        );
        assert!(
            !checked.stderr.contains("tok-CONFIG-SECRET"),
            "{}",
            checked.stderr
        );
    }
    // Private, or readable by the group this process runs as (the file's, here): quiet.
    for mode in [0o600, 0o640, 0o400] {
        let checked = check_with_mode(&home, &path, mode);
        assert_eq!(checked.code, 0, "{}", checked.stderr);
        assert!(
            !checked.stderr.contains("config file"),
            "{mode:o}: {}",
            checked.stderr
        );
    }
    // Without secrets (a check id instead of a URL) the mode is nobody's business.
    let path = home.write_config(&format!("{JOB}check_id = \"c1\"\n"));
    let checked = check_with_mode(&home, &path, 0o644);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    // (The job bound to a check without an API key has its own warning; not this one.)
    assert!(
        !checked.stderr.contains("config file"),
        "{}",
        checked.stderr
    );
}

#[test]
fn a_token_file_or_inline_token_others_can_read_warns() {
    let home = Home::new();
    let token = home.path("status-token");
    std::fs::write(&token, "tok-FILE-SECRET\n").expect("write token");
    let path = home.write_config(&format!(
        "[status]\ntoken_file = \"{}\"\n\n{JOB}check_id = \"c1\"\n",
        token.display()
    ));
    let warning = format!(
        "heartbeat-agent: warning: {}:2:14: [status]: key `token_file`: token file {} is \
         readable by group/others; chmod 600 it (or 640 with group heartbeat-agent)",
        path.display(),
        token.display()
    );
    for (mode, warns) in [(0o644, true), (0o604, true), (0o600, false), (0o640, false)] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let checked = check_with_mode(&home, &path, 0o644);
        assert_eq!(checked.code, 0, "{}", checked.stderr);
        assert_eq!(
            checked.stderr.contains(&warning),
            warns,
            "{mode:o}: {}",
            checked.stderr
        );
        assert!(
            !checked.stderr.contains("tok-FILE-SECRET"),
            "{}",
            checked.stderr
        );
        assert!(
            !checked.stderr.contains("config file"),
            "{}",
            checked.stderr
        );
    }

    let path = home.write_config(&format!(
        "[status]\ntoken = \"tok-INLINE-SECRET\"\n\n{JOB}check_id = \"c1\"\n"
    ));
    let checked = check_with_mode(&home, &path, 0o644);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(
        checked
            .stderr
            .contains("it holds secrets ([status] `token`)"),
        "{}",
        checked.stderr
    );
    assert!(
        !checked.stderr.contains("tok-INLINE-SECRET"),
        "{}",
        checked.stderr
    );
}
