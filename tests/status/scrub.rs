//! One scrubber for every place text the agent does not write goes: a secret (the API key, a
//! ping URL and its token) in a job's output and in an API error body appears neither in the
//! daemon's log nor in `/status`.

use std::time::Duration;

use super::{job, status_doc, StatusHome};
use crate::util::daemon::Daemon;
use crate::util::http::{FakeServer, Mode};
use crate::util::Home;

const KEY: &str = "sk_scrub_KEY_1234";
const TOKEN: &str = "tok-SCRUB-url-4242";
const PING_URL: &str = "http://127.0.0.1:1/tok-SCRUB-url-4242";
/// What the hostile or careless API answers to everything: its error message quotes the key,
/// the ping URL and the token.
const ANSWER: &str = r#"{"statusCode": 422, "error": "Unprocessable Entity", "message": "check rejected: pingUrl http://127.0.0.1:1/tok-SCRUB-url-4242 (token tok-SCRUB-url-4242) for key sk_scrub_KEY_1234", "attributes": {"key": "sk_scrub_KEY_1234"}}"#;

#[test]
fn a_secret_in_job_output_or_an_api_error_reaches_neither_the_log_nor_status() {
    let api = FakeServer::start(Mode::Json(422, ANSWER));
    let home = Home::new();
    let jobs = format!(
        "[[jobs]]\nname = \"echoer\"\nschedule = \"*/1 * * * * *\"\n\
         shell = \"echo key=$SCRUB_KEY url={PING_URL} token={TOKEN}; echo done\"\n\
         env = {{ SCRUB_KEY = \"{KEY}\" }}\nping_url = \"{PING_URL}\"\n\n\
         [[jobs]]\nname = \"bound\"\nschedule = \"@daily\"\ncommand = [\"true\"]\n\
         check_id = \"c1\"\n"
    );
    let status = format!("listen = \"{}\"", home.socket().display());
    home.write(None, &status, &jobs);
    // `[api]` at the server that quotes the secrets back.
    let config = std::fs::read_to_string(home.config_path()).expect("config");
    let api_section = format!(
        "[api]\nbase_url = \"{}\"\napi_key_env = \"EMULATOR_KEY\"\n\n[status]",
        api.url("")
    );
    home.write_config(&config.replacen("[status]", &api_section, 1));
    let daemon = home.daemon(KEY);
    let endpoint = home.endpoint();
    let doc = daemon.until(
        "a run of echoer, a failed sync and a failed remote view of bound",
        Duration::from_secs(20),
        || {
            let doc = status_doc(&endpoint, true);
            let ran = job(&doc, "echoer")["last_run"]["output_tail"]
                .as_str()
                .is_some_and(|t| t.contains("done"));
            let synced = job(&doc, "bound")["sync"]["last_error"].is_string();
            (ran && synced).then_some(doc)
        },
    );
    // The log has had time to take the output lines and the failed update.
    let log = daemon.until(
        "the output and the sync failure logged",
        Duration::from_secs(10),
        || {
            let log = daemon.text();
            (log.contains("\"done\"") && log.contains("check update failed")).then_some(log)
        },
    );
    let shown = doc.to_string();
    for (place, text) in [("/status", &shown), ("the daemon's log", &log)] {
        for secret in [KEY, TOKEN, PING_URL] {
            assert!(!text.contains(secret), "{secret} in {place}:\n{text}");
        }
    }
    // Scrubbed, not dropped: the output and the API's message are still there.
    let tail = job(&doc, "echoer")["last_run"]["output_tail"]
        .as_str()
        .expect("output_tail");
    assert_eq!(
        tail,
        "key=[redacted] url=[redacted] token=[redacted]\ndone\n"
    );
    let last_error = job(&doc, "bound")["sync"]["last_error"]
        .as_str()
        .expect("last_error");
    assert!(
        last_error
            .contains("check rejected: pingUrl [redacted] (token [redacted]) for key [redacted]"),
        "{last_error}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"output\"")
            && l.contains("key=[redacted] url=[redacted] token=[redacted]")),
        "{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("check update failed")
            && l.contains("pingUrl [redacted] (token [redacted]) for key [redacted]")),
        "{log}"
    );
}

#[test]
fn the_api_key_is_scrubbed_from_a_jobs_output_when_nothing_else_reads_it() {
    // The daemon starts without a key; a reload adds `api_key_file` and a job printing the
    // key, with no `[api] base_url`, no bound check and no `fail_body`: nothing in the daemon
    // needs the key, but it must not reach the log or `/status`.
    let home = Home::new();
    let status = format!("listen = \"{}\"", home.socket().display());
    home.write(None, &status, "");
    let daemon = Daemon::on(&home)
        .env_remove(["HEARTBEAT_AGENT_API_KEY"])
        .terminate_on_drop()
        .start();
    let endpoint = home.endpoint();
    daemon.until("the endpoint answers", Duration::from_secs(10), || {
        endpoint
            .request("GET", "/healthz", None, Duration::from_secs(1))
            .ok()
            .map(|_| ())
    });
    let key_file = home.path("api-key");
    std::fs::write(&key_file, format!("{KEY}\n")).expect("write the key");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let jobs = format!(
        "[[jobs]]\nname = \"printer\"\nschedule = \"*/1 * * * * *\"\n\
         shell = \"echo key=$LEAKED; echo done\"\nenv = {{ LEAKED = \"{KEY}\" }}\n"
    );
    home.write(None, &status, &jobs);
    let config = std::fs::read_to_string(home.config_path()).expect("config");
    let api = format!(
        "[api]\napi_key_file = \"{}\"\n\n[status]",
        key_file.display()
    );
    home.write_config(&config.replacen("[status]", &api, 1));
    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    let doc = daemon.until("a run of printer", Duration::from_secs(20), || {
        let doc = status_doc(&endpoint, true);
        if !doc.to_string().contains("\"printer\"") {
            return None;
        }
        job(&doc, "printer")["last_run"]["output_tail"]
            .as_str()
            .is_some_and(|t| t.contains("done"))
            .then_some(doc)
    });
    let log = daemon.until("the output logged", Duration::from_secs(10), || {
        let log = daemon.text();
        log.contains("\"done\"").then_some(log)
    });
    for (place, text) in [("/status", &doc.to_string()), ("the daemon's log", &log)] {
        assert!(!text.contains(KEY), "the key in {place}:\n{text}");
    }
    assert_eq!(
        job(&doc, "printer")["last_run"]["output_tail"].as_str(),
        Some("key=[redacted]\ndone\n")
    );
    assert!(log.contains("key=[redacted]"), "{log}");
}
