//! Integration tests for `config`: `heartbeat-agent config check` on good and broken files,
//! exit codes, messages with file:line:col, and secrets that never reach the output.

use std::path::{Path, PathBuf};

use crate::util::Home;

mod environment;
mod hostile;
mod permissions;
mod reading;
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
            "{}: cannot read the configuration file: it is a directory, not a regular file",
            dir.display()
        )),
        "{}",
        checked.stderr
    );
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
