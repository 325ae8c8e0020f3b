//! Integration tests for `config`: `heartbeat-agent config check` on good and broken files,
//! exit codes, messages with file:line:col, and secrets that never reach the output.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::util::Home;

mod start_fail;

/// The result of one `config check`.
struct Checked {
    code: i32,
    stdout: String,
    stderr: String,
}

fn config_check(home: &Home, args: &[&str]) -> Checked {
    let output = home
        .agent()
        .args(args)
        .output()
        .expect("the agent binary runs");
    Checked {
        code: output
            .status
            .code()
            .expect("config check exits normally, not by a signal"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Writes `text` as config.toml in a fresh home and runs `config check --config` on it.
fn check_text(text: &str) -> (Home, PathBuf, Checked) {
    let home = Home::new();
    let path = home.write_config(text);
    let path_arg = path.to_str().expect("utf-8 temp path");
    let checked = config_check(&home, &["config", "check", "--config", path_arg]);
    (home, path, checked)
}

/// Asserts exit 78 and that stderr holds exactly `expected` (after `path:`) as one line.
fn assert_problem(text: &str, expected: &str) {
    let (_dir, path, checked) = check_text(text);
    assert_eq!(checked.code, 78, "stderr: {}", checked.stderr);
    let line = format!("{}:{expected}", path.display());
    assert!(
        checked.stderr.lines().any(|l| l == line),
        "expected line\n{line}\nin stderr:\n{}",
        checked.stderr
    );
    assert!(checked.stdout.is_empty(), "stdout: {}", checked.stdout);
}

const JOB: &str = "[[jobs]]\nname = \"backup\"\nschedule = \"0 3 * * *\"\n";

#[test]
fn example_config_is_valid() {
    let home = Home::new();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/example.toml");
    let checked = config_check(
        &home,
        &[
            "config",
            "check",
            "--config",
            example.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(checked.code, 0, "stderr: {}", checked.stderr);
    assert!(
        checked.stdout.contains("valid, 10 jobs"),
        "{}",
        checked.stdout
    );
    assert!(
        !checked.stdout.contains("your-ping-token"),
        "{}",
        checked.stdout
    );
}

#[test]
fn valid_config_shows_jobs_with_redacted_targets() {
    let text =
        "[[jobs]]\nname = \"backup\"\nschedule = \"0 3 * * *\"\ntimezone = \"Europe/Berlin\"\n\
                command = [\"true\"]\nping_url = \"https://ping.example.com/tok-SECRET-123\"\n\
                [[jobs]]\nname = \"report\"\nschedule = \"@daily\"\n";
    let (_dir, path, checked) = check_text(text);
    assert_eq!(checked.code, 0, "stderr: {}", checked.stderr);
    assert!(checked
        .stdout
        .starts_with(&format!("{}: valid, 2 jobs\n", path.display())));
    assert!(
        checked.stdout.contains("job \"backup\"\n"),
        "{}",
        checked.stdout
    );
    assert!(checked
        .stdout
        .contains("  schedule: 0 3 * * * (Europe/Berlin)\n"));
    let redacted = heartbeat_agent::redact::url("https://ping.example.com/tok-SECRET-123");
    assert!(
        checked
            .stdout
            .contains(&format!("  ping:     {redacted}\n")),
        "{}",
        checked.stdout
    );
    assert!(checked
        .stdout
        .contains("  ping:     none (warning: nothing will be pinged)\n"));
    assert!(
        checked.stderr.contains(&format!(
            "heartbeat-agent: warning: {}:7:1: job \"report\": no `ping_url` or `check_id`: \
             nothing will be pinged",
            path.display()
        )),
        "{}",
        checked.stderr
    );
    for output in [&checked.stdout, &checked.stderr] {
        assert!(!output.contains("tok-SECRET-123"), "{output}");
    }
}

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

#[test]
fn syntax_error_exits_78_with_line_and_column() {
    assert_problem(
        "[agent]\ntimezone = UTC\n",
        "2:12: invalid TOML: invalid string, expected `\"`, `'`; hint: fix the TOML syntax at \
         this place (strings need quotes, tables [brackets])",
    );
}

#[test]
fn unknown_key_suggests_the_closest() {
    assert_problem(
        &format!("{JOB}comand = [\"true\"]\n"),
        "4:1: job \"backup\": key `comand`: unknown key; hint: did you mean `command`?",
    );
}

#[test]
fn wrong_type_says_what_was_expected() {
    assert_problem(
        &format!("{JOB}success_exit_codes = 0\n"),
        "4:22: job \"backup\": key `success_exit_codes`: invalid type: integer `0`, expected an \
         array; hint: for example: success_exit_codes = [0, 3]",
    );
}

#[test]
fn bare_number_duration_suggests_a_unit() {
    assert_problem(
        &format!("{JOB}timeout = 90\n"),
        "4:11: job \"backup\": key `timeout`: duration \"90\" has no unit: write \"90s\", \"90m\", \
         \"90h\" or \"90d\"; hint: durations are quoted strings with a unit, for example: \
         timeout = \"5m\"",
    );
}

#[test]
fn bad_timezone_is_named() {
    assert_problem(
        "[agent]\ntimezone = \"America/New_Yrok\"\n",
        "2:12: [agent]: key `timezone`: unknown time zone \"America/New_Yrok\"; hint: did you \
         mean \"America/New_York\"?",
    );
}

#[test]
fn duplicate_names_name_both_lines() {
    assert_problem(
        &format!("{JOB}\n{JOB}"),
        "6:8: job \"backup\": key `name`: duplicate job name \"backup\": the first job with this \
         name is at line 2, this one at line 6; hint: job names must be unique; rename one of them",
    );
}

#[test]
fn command_and_shell_together_are_rejected() {
    assert_problem(
        &format!("{JOB}shell = \"true\"\ncommand = [\"true\"]\n"),
        "5:1: job \"backup\": key `command`: a job does exactly one of `command`, `shell` or \
         `watch`, but this one has both `shell` and `command`; hint: keep one; a job with none \
         is external (run elsewhere, for example by cron through `heartbeat-agent run --job NAME`)",
    );
}

#[test]
fn ping_url_and_check_id_together_are_rejected() {
    let text =
        format!("{JOB}ping_url = \"https://ping.example.com/tok-SECRET-9\"\ncheck_id = \"c\"\n");
    assert_problem(
        &text,
        "5:12: job \"backup\": key `check_id`: set either `ping_url` or `check_id`, not both; \
         hint: keep `ping_url` for any heartbeat service, or `check_id` to ping the check whose \
         URL sync learns",
    );
    let (_dir, _path, checked) = check_text(&text);
    assert!(
        !checked.stderr.contains("tok-SECRET-9"),
        "{}",
        checked.stderr
    );
}

#[test]
fn bad_ping_url_is_rejected_without_showing_it() {
    let text = format!("{JOB}ping_url = \"ping.example.com/tok-SECRET-7\"\n");
    assert_problem(
        &text,
        "4:12: job \"backup\": key `ping_url`: not a valid URL: relative URL without a base; \
         hint: write a full URL, for example: ping_url = \"https://ping.example.com/TOKEN\"",
    );
    let (_dir, _path, checked) = check_text(&text);
    assert!(
        !checked.stderr.contains("tok-SECRET-7"),
        "{}",
        checked.stderr
    );
}

#[test]
fn every_problem_is_listed_one_per_line() {
    let text = format!("[agent]\nshutdown_timeout = 5\n{JOB}colour = 1\ntimezone = \"Nowhere\"\n");
    let (_dir, path, checked) = check_text(&text);
    assert_eq!(checked.code, 78);
    let shown = path.display().to_string();
    let lines: Vec<&str> = checked.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", checked.stderr);
    for (line, place) in lines.iter().zip(["2:20", "6:1", "7:12"]) {
        assert!(line.starts_with(&format!("{shown}:{place}: ")), "{line}");
    }
    assert_eq!(
        lines[3],
        format!("heartbeat-agent: configuration {shown} is invalid: 3 problems")
    );
}

#[test]
fn missing_file_names_the_path_and_how_to_create_it() {
    let home = Home::new();
    let missing = home.path("nope.toml");
    let checked = config_check(
        &home,
        &[
            "config",
            "check",
            "--config",
            missing.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(checked.code, 78);
    assert!(
        checked.stderr.starts_with(&format!(
            "{}: configuration file not found; create it (see config/example.toml and \
             docs/config.md), or name another with --config FILE or $HEARTBEAT_AGENT_CONFIG\n",
            missing.display()
        )),
        "{}",
        checked.stderr
    );
}

#[test]
fn unreadable_file_names_the_path_and_the_os_error() {
    let home = Home::new();
    // A directory cannot be read as a file, even by root (who ignores chmod 000).
    let dir = home.path("config.toml");
    std::fs::create_dir(&dir).expect("mkdir");
    let checked = config_check(
        &home,
        &[
            "config",
            "check",
            "--config",
            dir.to_str().expect("utf-8 path"),
        ],
    );
    assert_eq!(checked.code, 78);
    assert!(
        checked.stderr.starts_with(&format!(
            "{}: cannot read the configuration file: Is a directory",
            dir.display()
        )),
        "{}",
        checked.stderr
    );
}

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

#[test]
fn arbitrary_bytes_never_panic() {
    let inputs: [&[u8]; 6] = [
        b"\xff\xfe\x00garbage",
        b"[[jobs]]\n[[jobs]]\nname = [1, {a = 2}]\n",
        b"jobs = [1, \"x\", {name = 3}]\n",
        b"[jobs.watch]\n[agent.timezone]\nx = 1\n",
        b"[[jobs]]\nname=\"a\"\nschedule=\"x\"\n[jobs.watch]\n[jobs.watch.kind]\n",
        b"[defaults]\nenv = { \"\" = \"x\", \"A=B\" = \"y\" }\noutput_tail = -1\n",
    ];
    for input in inputs {
        let home = Home::new();
        let path = home.path("c.toml");
        std::fs::write(&path, input).expect("write");
        let checked = config_check(
            &home,
            &[
                "config",
                "check",
                "--config",
                path.to_str().expect("utf-8 path"),
            ],
        );
        assert_eq!(
            checked.code,
            78,
            "{:?}: {}",
            String::from_utf8_lossy(input),
            checked.stderr
        );
        assert!(!checked.stderr.contains("panicked"), "{}", checked.stderr);
        assert!(
            checked.stderr.starts_with(&path.display().to_string()),
            "{}",
            checked.stderr
        );
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
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    let warning = checked
        .stderr
        .lines()
        .find(|l| l.contains("no API key source is found"))
        .unwrap_or_else(|| panic!("no warning in {:?}", checked.stderr));
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

#[test]
fn retry_keys_are_checked_with_their_place() {
    assert_problem(
        &format!("{JOB}retries = -2\n"),
        "4:11: job \"backup\": key `retries`: retries = -2 is negative: it counts the attempts \
         after the first; hint: 0 (the default) runs each fire once; for example: retries = 3",
    );
    assert_problem(
        &format!("[defaults]\nretry_delay_max = \"30s\"\n\n{JOB}retry_delay = \"1m\"\n"),
        "7:15: job \"backup\": key `retry_delay`: retry_delay 1m is longer than retry_delay_max \
         30s: the first wait would already be over its cap; hint: make retry_delay at most \
         retry_delay_max, or raise retry_delay_max",
    );
    // Valid, but a worst-case run longer than the schedule's period: a warning, exit 0.
    let (_dir, path, checked) = check_text(
        "[[jobs]]\nname = \"often\"\nschedule = \"*/5 * * * *\"\ncommand = [\"true\"]\n\
         ping_url = \"http://127.0.0.1:9/t\"\ntimeout = \"2m\"\nretries = 2\n",
    );
    assert_eq!(checked.code, 0, "stderr: {}", checked.stderr);
    assert!(
        checked.stdout.contains(
            "  retries:  2 (waits from 10s doubling up to 5m; a run takes at most 6m30s)\n"
        ),
        "{}",
        checked.stdout
    );
    assert!(
        checked.stderr.contains(&format!(
            "heartbeat-agent: warning: {}:7:11: job \"often\": key `retries`: with retries = 2 \
             a run can take up to 6m30s (3 attempts × timeout 2m + waits up to 30s), longer \
             than the 5m between fires of schedule \"*/5 * * * *\"",
            path.display()
        )),
        "{}",
        checked.stderr
    );
    // Without a timeout only the waits are bounded, and the report says so.
    let (_dir, _path, checked) = check_text(
        "[[jobs]]\nname = \"daily\"\nschedule = \"0 3 * * *\"\ncommand = [\"true\"]\n\
         ping_url = \"http://127.0.0.1:9/t\"\nretries = 2\n",
    );
    assert_eq!(checked.code, 0, "stderr: {}", checked.stderr);
    assert!(
        checked.stdout.contains(
            "  retries:  2 (waits from 10s doubling up to 5m; the waits add up to 30s; no timeout \
             bounds the attempts)\n"
        ),
        "{}",
        checked.stdout
    );
}
