//! `start_url`, `fail_url` and `fail_body` in `config check`: each bad value named with
//! file:line:col and a hint, the URLs never shown (they carry tokens).

use super::{assert_problem, check_text, JOB};

/// The token in every URL below: it must never reach the output.
const SECRET: &str = "sf-SECRET-TOKEN-31";

#[test]
fn bad_start_and_fail_urls_are_named_without_showing_them() {
    let cases = [
        (
            format!("start_url = \"hc.example/{SECRET}\"\n"),
            "4:13: job \"backup\": key `start_url`: not a valid URL: relative URL without a base; \
             hint: write a full URL, for example: start_url = \"https://hc-ping.com/UUID/start\"",
        ),
        (
            format!("fail_url = \"ftp://hc.example/{SECRET}\"\n"),
            "4:12: job \"backup\": key `fail_url`: URL has scheme \"ftp\"; expected http or https; \
             hint: write a full URL, for example: fail_url = \"https://hc-ping.com/UUID/{exit_code}\"",
        ),
        (
            format!("fail_url = \"https://hc.example/{SECRET}/{{code}}\"\n"),
            "4:12: job \"backup\": key `fail_url`: unknown placeholder \"{code}\" in the URL; \
             hint: the placeholders are {exit_code}, filled in with the run's exit status, and \
             {run_id}, the run's id",
        ),
    ];
    for (line, expected) in cases {
        let text = format!("{JOB}{line}");
        assert_problem(&text, expected);
        let (_home, _path, checked) = check_text(&text);
        assert!(!checked.stderr.contains(SECRET), "{}", checked.stderr);
    }
}

#[test]
fn bad_fail_body_is_named() {
    let url = format!("fail_url = \"https://hc.example/{SECRET}/{{exit_code}}\"\n");
    assert_problem(
        &format!("{JOB}{url}fail_body = \"stdout\"\n"),
        "5:13: job \"backup\": key `fail_body`: unknown fail_body \"stdout\": expected \
         \"output_tail\" or \"json\"; hint: fail_body = \"output_tail\" sends the run's last \
         output with the fail ping, \"json\" a JSON summary for a chat or generic webhook; leave \
         it out for none",
    );
    assert_problem(
        &format!("{JOB}{url}output_tail = \"1MiB\"\nfail_body = \"output_tail\"\n"),
        "6:13: job \"backup\": key `fail_body`: fail_body sends the output tail, at most 100 \
         KiB, but output_tail is 1048576 bytes; hint: lower output_tail to at most \"100KiB\"",
    );
}

#[test]
fn a_valid_job_shows_its_start_and_fail_targets_redacted() {
    let text = format!(
        "{JOB}command = [\"true\"]\nstart_url = \"https://hc.example/{SECRET}/start\"\n\
         fail_url = \"https://hc.example/{SECRET}/{{exit_code}}\"\nfail_body = \"output_tail\"\n"
    );
    let (_home, _path, checked) = check_text(&text);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(
        checked.stdout.contains("  start:    https://hc.example/…#"),
        "{}",
        checked.stdout
    );
    assert!(
        checked
            .stdout
            .contains(" (POST, the last output as body)\n"),
        "{}",
        checked.stdout
    );
    let all = format!("{}{}", checked.stdout, checked.stderr);
    assert!(!all.contains(SECRET), "{all}");
}

#[test]
fn a_run_id_where_it_cannot_be_filled_or_an_unknown_placeholder_is_refused_with_its_place() {
    let cases = [
        (
            format!("ping_url = \"http://{{run_id}}.example/{SECRET}\"\n"),
            "4:12: job \"backup\": key `ping_url`: {run_id} is in the URL's host or port: \
             filled in, the run's id would send the ping elsewhere; hint: put {run_id} in the \
             URL's path or query only, for example: https://hc-ping.com/UUID?rid={run_id}",
        ),
        (
            format!("start_url = \"http://127.0.0.1:80{{run_id}}/{SECRET}\"\n"),
            "4:13: job \"backup\": key `start_url`: {run_id} is in the URL's host or port: \
             filled in, the run's id would send the ping elsewhere; hint: put {run_id} in the \
             URL's path or query only, for example: https://hc-ping.com/UUID?rid={run_id}",
        ),
        (
            format!("fail_url = \"https://hc.example/{SECRET}#{{run_id}}\"\n"),
            "4:12: job \"backup\": key `fail_url`: {run_id} is in the URL's fragment: \
             filled in, the run's id would send the ping elsewhere; hint: put {run_id} in the \
             URL's path or query only, for example: https://hc-ping.com/UUID?rid={run_id}",
        ),
        (
            format!("ping_url = \"https://hc.example/{SECRET}/{{exit_code}}\"\n"),
            "4:12: job \"backup\": key `ping_url`: unknown placeholder \"{exit_code}\" in the \
             URL; hint: the only placeholder here is {run_id}, filled in with the run's id \
             ({exit_code} is only for fail_url)",
        ),
        (
            format!("start_url = \"https://hc.example/{SECRET}/start?rid={{rid}}\"\n"),
            "4:13: job \"backup\": key `start_url`: unknown placeholder \"{rid}\" in the URL; \
             hint: the only placeholder here is {run_id}, filled in with the run's id \
             ({exit_code} is only for fail_url)",
        ),
    ];
    for (line, expected) in cases {
        let text = format!("{JOB}{line}");
        assert_problem(&text, expected);
        let (_home, _path, checked) = check_text(&text);
        assert!(!checked.stderr.contains(SECRET), "{}", checked.stderr);
    }
    // In the path and the query (healthchecks' `?rid=`) it is accepted.
    let (_home, _path, checked) = check_text(&format!(
        "{JOB}command = [\"true\"]\nping_url = \"https://hc.example/{SECRET}/{{run_id}}\"\n\
         start_url = \"https://hc.example/{SECRET}/start?rid={{run_id}}\"\n\
         fail_url = \"https://hc.example/{SECRET}/{{exit_code}}?rid={{run_id}}\"\n"
    ));
    assert_eq!(checked.code, 0, "{}", checked.stderr);
}
