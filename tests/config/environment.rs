//! What `config check` takes from the environment: `--config` over `$HEARTBEAT_AGENT_CONFIG`,
//! systemd's `$CONFIGURATION_DIRECTORY` for the default file, `TZ` as the default time zone,
//! and where a bound job's API key may come from.

use crate::util::Home;

use super::{check_text, config_check, JOB};

#[test]
fn config_option_is_global_and_env_is_the_fallback() {
    let (home, path, _) = check_text(JOB);
    let path_arg = path.to_str().expect("utf-8 path");
    let before = config_check(&home, &["--config", path_arg, "config", "check"]);
    assert_eq!(before.code, 0, "{}", before.stderr);
    let from_env = home
        .agent()
        .args(["config", "check"])
        .env("HEARTBEAT_AGENT_CONFIG", &path)
        .output()
        .expect("the agent binary runs");
    assert_eq!(from_env.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&from_env.stdout).contains("valid, 1 job"));
}

/// The line of a valid config's `config check` that warns that no API key source is found.
fn key_warning(checked: &super::Checked) -> &str {
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    checked
        .stderr
        .lines()
        .find(|l| l.contains("no API key source is found"))
        .unwrap_or_else(|| panic!("no warning in {:?}", checked.stderr))
}

/// A job bound to a check needs the API (to learn its ping URL, to sync): `config check` warns,
/// naming the file, the job and every place a key may come from, when none is found; it stays
/// valid (exit 0). With a key in the environment or a readable key file there is no warning,
/// and the key itself is never printed.
#[test]
fn bound_job_without_an_api_key_source_is_a_warning() {
    let text = "[api]\nbase_url = \"http://127.0.0.1:1\"\n\n\
                [[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
                check_id = \"c-backup\"\n\n\
                [[jobs]]\nname = \"report\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
                check_id = \"c-report\"\n";
    let (home, path, checked) = check_text(text);
    let warning = key_warning(&checked);
    assert!(
        warning.starts_with("heartbeat-agent: warning: "),
        "{warning}"
    );
    assert!(
        warning.contains(&format!(
            "{}: job \"backup\" (check c-backup) and 1 more",
            path.display()
        )),
        "{warning}"
    );
    for hint in [
        "api_key_file",
        "api_key_env",
        "HEARTBEAT_AGENT_API_KEY",
        "credential `api-key`",
        // The credential first, and the packaged unit's file: a key file of root's own (the
        // credential's) is one the service's user cannot read.
        "under systemd give the service the credential `api-key` (the packaged unit loads \
         /etc/heartbeat-agent/api-key;",
        "`api_key_file` naming a file the daemon's user can read",
    ] {
        assert!(warning.contains(hint), "{hint}: {warning}");
    }

    // A key in the environment: no warning, and the key is nowhere in the output.
    let path_arg = path.to_str().expect("utf-8 temp path");
    let key = "hb-key-SECRET-0123";
    let output = home
        .agent()
        .args(["config", "check", "--config", path_arg])
        .env("HEARTBEAT_AGENT_API_KEY", key)
        .output()
        .expect("runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("API key"), "{stderr}");
    assert!(!stdout.contains(key) && !stderr.contains(key));

    // A configured source that fails says why, with the same advice.
    let (_home, _path, checked) = check_text(&text.replacen(
        "[api]\n",
        "[api]\napi_key_env = \"HEARTBEAT_AGENT_TEST_UNSET_KEY_VAR\"\n",
        1,
    ));
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(
        checked.stderr.contains("bound to a check, but `api_key_env` names $HEARTBEAT_AGENT_TEST_UNSET_KEY_VAR, which is not set"),
        "{}",
        checked.stderr
    );

    // No job bound to a check: nothing to warn about.
    let (_home, _path, checked) =
        check_text("[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n");
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(!checked.stderr.contains("API key"), "{}", checked.stderr);
}

/// A job with `create = true` needs the key to create its check: with no key source configured
/// and none found (the systemd credential is seen only by the service), the config stays valid
/// and the warning lists the job beside the `check_id` ones; a configured source that fails is
/// still an error at `check.create` (tests/data/bad-configs/create-without-api-key.toml).
#[test]
fn a_job_creating_its_check_is_listed_in_the_api_key_warning() {
    let text = "[api]\nbase_url = \"http://127.0.0.1:1\"\n\n\
                [[jobs]]\nname = \"made\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
                [jobs.check]\ncreate = true\n\n\
                [[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
                check_id = \"c-backup\"\n";
    let (_home, path, checked) = check_text(text);
    let warning = key_warning(&checked);
    assert!(
        warning.contains(&format!(
            "{}: job \"made\" (check to be created: create = true) and 1 more bound to a check",
            path.display()
        )),
        "{warning}"
    );
    assert!(warning.contains("have its check created"), "{warning}");
    // Only the job that creates its check.
    let (_home, _path, checked) = check_text(&text.replace("check_id = \"c-backup\"\n", ""));
    let warning = key_warning(&checked);
    assert!(
        warning.contains("job \"made\" (check to be created: create = true) bound to a check, but"),
        "{warning}"
    );
}

/// `[agent] timezone` unset: jobs follow the zone `TZ` names (as under cron and supercronic),
/// else UTC; the key, and a job's own `timezone`, win over `TZ`; a `TZ` that names no zone is a
/// warning with the file, and UTC is used.
#[test]
fn tz_is_the_default_time_zone_when_agent_timezone_is_unset() {
    let jobs = "[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\n\
                [[jobs]]\nname = \"b\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
                timezone = \"Asia/Tokyo\"\n";
    let home = Home::new();
    let check = |text: &str, tz: Option<&str>| {
        let path = home.write_config(text);
        let mut cmd = home.agent();
        cmd.args(["config", "check", "--config"]).arg(&path);
        if let Some(tz) = tz {
            cmd.env("TZ", tz);
        }
        let out = cmd.output().expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (out, _) = check(jobs, None);
    assert!(
        out.contains("job \"a\"\n  does:     command true\n  schedule: @daily (UTC)\n"),
        "{out}"
    );
    let (out, _) = check(jobs, Some("Europe/Berlin"));
    assert!(
        out.contains("  schedule: @daily (Europe/Berlin)\n"),
        "{out}"
    );
    assert!(
        out.contains("  schedule: @daily (Asia/Tokyo)\n"),
        "a job's own zone wins: {out}"
    );
    let (out, _) = check(
        &format!("[agent]\ntimezone = \"UTC\"\n\n{jobs}"),
        Some("Europe/Berlin"),
    );
    assert!(
        out.contains("job \"a\"\n  does:     command true\n  schedule: @daily (UTC)\n"),
        "[agent] wins: {out}"
    );
    let (out, err) = check(jobs, Some("CET-1CEST"));
    assert!(
        out.contains("job \"a\"\n  does:     command true\n  schedule: @daily (UTC)\n"),
        "{out}"
    );
    let path = home.config_path();
    assert!(
        err.contains(&format!(
            "heartbeat-agent: warning: {}: [agent]: key `timezone`: TZ=\"CET-1CEST\" in the \
             environment is not an IANA time zone name",
            path.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("set [agent] timezone, or fix or unset TZ; UTC is used meanwhile"),
        "{err}"
    );
}

/// Without `--config` or `$HEARTBEAT_AGENT_CONFIG`, the file is `config.toml` in systemd's
/// `$CONFIGURATION_DIRECTORY`; the tests point it into their home, so none of them (run as root)
/// reads the machine's /etc/heartbeat-agent.
#[test]
fn configuration_directory_names_the_default_file_and_tests_never_read_etc() {
    let home = Home::new();
    let missing = config_check(&home, &["config", "check"]);
    assert_eq!(missing.code, 78, "{}", missing.stderr);
    let expected = home.path("etc").join("config.toml");
    assert!(
        missing.stderr.contains(&expected.display().to_string()),
        "{}",
        missing.stderr
    );
    assert!(
        !missing.stderr.contains("/etc/heartbeat-agent"),
        "{}",
        missing.stderr
    );
    std::fs::create_dir(home.path("etc")).expect("mkdir");
    std::fs::write(
        &expected,
        "[[jobs]]\nname = \"a\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n",
    )
    .expect("write");
    let found = config_check(&home, &["config", "check"]);
    assert_eq!(found.code, 0, "{}", found.stderr);
    assert!(
        found
            .stdout
            .starts_with(&format!("{}: valid, 1 job", expected.display())),
        "{}",
        found.stdout
    );
}
