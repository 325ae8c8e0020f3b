//! `fail_body = "json"` under `run --job`: the fail ping is a `POST` (or `fail_method`) of
//! `application/json` that a chat or generic webhook takes, here a loopback receiver; its
//! `fail_headers` come from the config, a file and an environment variable, reach the
//! receiver and are never printed nor seen by the command; bad values are refused with
//! file:line:col.

use serde_json::Value;

use super::{output, stderr, Env};
use crate::util::http::{FakeServer, Mode};

/// The webhook's token, in its URL.
const TOKEN: &str = "hook-TOKEN-8e8e8e8e";
/// The header values: secrets that must never be printed.
const FROM_FILE: &str = "Bearer file-secret-1a2b3c4d";
const FROM_ENV: &str = "env-secret-5e6f7a8b";
/// The environment variable holding `FROM_ENV`.
const VAR: &str = "HOOK_SECRET_FOR_TEST";

/// Writes job "backup" whose failures go to `hook` as JSON, with `extra` keys; returns the
/// config's path.
fn write_job(env: &Env, hook: &FakeServer, extra: &str) -> String {
    let header_file = env.path("hook-token");
    std::fs::write(&header_file, format!("{FROM_FILE}\n")).expect("write the header file");
    let path = env.path("config.toml");
    std::fs::write(
        &path,
        format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\n\
             fail_url = \"{url}\"\nfail_body = \"json\"\noutput_tail = 40\n{extra}\
             fail_headers = {{ Authorization = {{ file = \"{file}\" }}, X-Hook-Token = {{ env = \"{VAR}\" }}, X-Plain = \"plain-value\" }}\n",
            url = hook.url(&format!("/{TOKEN}/fail?rid={{run_id}}")),
            file = header_file.display(),
        ),
    )
    .expect("write the config");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn a_failed_run_posts_its_json_summary_with_the_configured_headers() {
    let env = Env::new();
    let hook = FakeServer::start(Mode::Status(200));
    let config = write_job(&env, &hook, "");
    let seen_env = env.path("child-env");
    let script = format!(
        "env > '{}'; echo \"a line with the key $SECRET in it\"; echo the-last-line; exit 3",
        seen_env.display()
    );
    let mut run = env.run(&[
        "--config", &config, "--job", "backup", "-v", "--", "sh", "-c", &script,
    ]);
    run.env(VAR, FROM_ENV).env("SECRET", FROM_ENV);
    let out = output(run);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    for secret in [FROM_FILE, FROM_ENV, TOKEN] {
        let shown = printed.replacen(&format!("a line with the key {FROM_ENV} in it"), "", 1);
        assert!(!shown.contains(secret), "{secret} printed: {printed}");
    }
    let child_env = std::fs::read_to_string(&seen_env).expect("the command wrote its env");
    assert!(
        !child_env.contains(VAR),
        "the command must not see {VAR}: {child_env}"
    );
    let requests = hook.wait_for(1, std::time::Duration::from_secs(5));
    let ping = &requests[0];
    assert_eq!(ping.method, "POST");
    assert_eq!(ping.header("content-type"), Some("application/json"));
    assert_eq!(ping.header("authorization"), Some(FROM_FILE));
    assert_eq!(ping.header("x-hook-token"), Some(FROM_ENV));
    assert_eq!(ping.header("x-plain"), Some("plain-value"));
    let doc: Value = serde_json::from_slice(&ping.body).expect("the body is JSON");
    let run_id = doc["run_id"].as_str().expect("run_id");
    assert_eq!(ping.target, format!("/{TOKEN}/fail?rid={run_id}"));
    assert_eq!(doc["job"], "backup");
    assert_eq!(doc["exit_code"], 3);
    assert_eq!(doc["signal"], Value::Null);
    assert_eq!(doc["outcome"], "failed");
    assert!(doc["host"].as_str().is_some_and(|h| !h.is_empty()), "{doc}");
    let duration = doc["duration_seconds"].as_f64().expect("a number");
    assert!((0.0..10.0).contains(&duration), "{doc}");
    // The last 40 bytes of the output, the secret the command printed scrubbed.
    let tail = doc["output_tail"].as_str().expect("output_tail");
    assert!(tail.ends_with("in it\nthe-last-line\n"), "{doc}");
    assert!(!ping.text().contains(FROM_ENV), "{doc}");
    let text = doc["text"].as_str().expect("text");
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.starts_with("heartbeat-agent: job \"backup\" failed on ")
            && text.contains("exited with code 3")
            && text.contains(run_id),
        "{text}"
    );
    let fields: Vec<&str> = doc
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(fields.len(), 9, "{fields:?}");
}

#[test]
fn fail_method_put_is_used_and_a_killed_run_has_a_null_exit_code() {
    let env = Env::new();
    let hook = FakeServer::start(Mode::Status(200));
    let config = write_job(&env, &hook, "fail_method = \"PUT\"\n");
    let mut run = env.run(&[
        "--config",
        &config,
        "--job",
        "backup",
        "--",
        "sh",
        "-c",
        "kill -9 $$",
    ]);
    run.env(VAR, FROM_ENV);
    let out = output(run);
    assert_eq!(out.status.code(), Some(137), "{}", stderr(&out));
    let requests = hook.wait_for(1, std::time::Duration::from_secs(5));
    assert_eq!(requests[0].method, "PUT");
    let doc: Value = serde_json::from_slice(&requests[0].body).expect("JSON");
    assert_eq!(
        (doc["exit_code"].clone(), doc["signal"].clone()),
        (Value::Null, Value::from(9))
    );
    assert_eq!(doc["outcome"], "signaled");
}

#[test]
fn bad_fail_methods_and_headers_are_refused_with_their_place() {
    let env = Env::new();
    let hook = FakeServer::start(Mode::Status(200));
    let cases = [
        (
            "fail_method = \"DELETE\"\n",
            "7:15: job \"backup\": key `fail_method`: unknown fail_method \"DELETE\": expected \
             \"GET\", \"POST\" or \"PUT\"; hint: a webhook usually takes \"POST\"",
        ),
        (
            "fail_method = \"GET\"\n",
            "7:15: job \"backup\": key `fail_method`: fail_method \"GET\" cannot carry the body \
             fail_body asks for; hint: use \"POST\" or \"PUT\", or remove fail_body",
        ),
    ];
    for (extra, expected) in cases {
        let config = write_job(&env, &hook, extra);
        let mut check = env.home.agent();
        check
            .args(["config", "check", "--config", &config])
            .env(VAR, FROM_ENV);
        let out = output(check);
        assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
        assert!(
            stderr(&out)
                .lines()
                .any(|l| l == format!("{config}:{expected}")),
            "{}",
            stderr(&out)
        );
    }
    // The header table: a number, a table with neither file nor env, an invalid name, an
    // unset variable; never a value in the messages.
    let path = env.path("headers.toml");
    std::fs::write(
        &path,
        format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\nfail_url = \"{url}\"\n\
             [jobs.fail_headers]\nX-Number = 5\nX-Table = {{ path = \"/x\" }}\n\"Bad Name\" = \"v\"\n\
             X-Unset = {{ env = \"{VAR}_UNSET\" }}\nX-Good = \"{FROM_FILE}\"\n",
            url = hook.url(&format!("/{TOKEN}/fail")),
        ),
    )
    .expect("write");
    let config = path.to_str().expect("utf-8");
    let mut check = env.home.agent();
    check.args(["config", "check", "--config", config]);
    let out = output(check);
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let said = stderr(&out);
    for expected in [
        "6:12: job \"backup\": key `fail_headers.X-Number`: a fail_headers value is a string, \
         { file = \"PATH\" } or { env = \"VAR\" }",
        "7:11: job \"backup\": key `fail_headers.X-Table`: a fail_headers value is a string, \
         { file = \"PATH\" } or { env = \"VAR\" }",
        "8:14: job \"backup\": key `fail_headers.Bad Name`: \"Bad Name\" is not a valid HTTP \
         header name",
        &format!("9:11: job \"backup\": key `fail_headers.X-Unset`: names ${VAR}_UNSET, which is not set (or empty)"),
    ] {
        assert!(
            said.lines().any(|l| l.starts_with(&format!("{config}:{expected}"))),
            "{expected}\nin:\n{said}"
        );
    }
    assert!(!said.contains(FROM_FILE) && !said.contains(TOKEN), "{said}");
}
