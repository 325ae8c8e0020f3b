//! Bad cluster settings against a running daemon: unreachable endpoints, wrong credentials, a
//! TLS mismatch, an endpoint that answers garbage. Each is one clear error naming the endpoint
//! and what to do, in the log and in status; the daemon keeps running, skips the fires it cannot
//! claim (on_unavailable = "skip") and never shows the password.

use std::path::Path;
use std::time::Duration;

use super::agents::{out_dir, Agent, JobShape, Setup};
use crate::util::emulator::Background;
use crate::util::etcd::{EtcdCluster, Options};
use crate::util::http::{refused_url, FakeServer, Mode};

/// Starts one agent with `cluster` lines, waits until its log holds `expected`, then checks the
/// status names the same error, no job ran, and `secret` (if any) appears nowhere.
fn expect_error(cluster: &str, expected: &[&str], secret: Option<&str>) -> Agent {
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: cluster.to_owned(),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let mut agent = Agent::start(&setup, "a", &[]);
    let logged =
        crate::util::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
            expected.iter().all(|e| agent.messages().contains(e))
        });
    assert!(
        logged,
        "expected {expected:?} in the log:\n{}",
        agent.messages()
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(agent.alive(), "the daemon died:\n{}", agent.log());
    assert!(!agent.log().contains("panicked"), "{}", agent.log());
    let status = agent.status();
    let last_error = status["etcd"]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        expected.iter().all(|e| last_error.contains(e)),
        "status: {last_error}"
    );
    assert!(
        !Path::new(&out.join("j0")).exists(),
        "a fire ran without a claim"
    );
    assert!(agent.log().contains("fire skipped"), "{}", agent.log());
    if let Some(secret) = secret {
        let texts = [agent.log(), status.to_string(), agent.metrics()];
        assert!(
            texts.iter().all(|t| !t.contains(secret)),
            "the password was shown"
        );
    }
    agent
}

#[test]
fn unreachable_endpoints_are_each_named() {
    let (one, two) = (refused_url(""), refused_url(""));
    let cluster = format!("endpoints = [\"{one}\", \"{two}\"]\nname = \"bad\"");
    let reason = "connection failed";
    let expected = [
        one.as_str(),
        two.as_str(),
        reason,
        "check that the members run",
    ];
    expect_error(&cluster, &expected, None);
}

#[test]
fn an_endpoint_answering_garbage_is_named() {
    let server = FakeServer::start(Mode::Status(200));
    let url = server.url("");
    let url = url.trim_end_matches('/');
    let cluster = format!("endpoints = [\"{url}\"]\nname = \"bad\"");
    let expected = [url, "not etcd's JSON", "is it an etcd client URL"];
    expect_error(&cluster, &expected, None);
}

/// Turns on authentication in `cluster` (user `agent`, its role on `name/`) and gives the
/// `[cluster]` lines of cluster `name` with user `agent` and a wrong password (`wrong-pw-4242`,
/// in a file of the returned directory).
fn wrong_password(cluster: &EtcdCluster, name: &str) -> (tempfile::TempDir, String) {
    cluster.enable_auth("agent", "right-pw-31337", &format!("{name}/"));
    let dir = tempfile::tempdir().expect("tempdir");
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "wrong-pw-4242\n").expect("write");
    let settings = format!(
        "{}\nname = \"{name}\"\nuser = \"agent\"\npassword_file = \"{}\"",
        cluster.endpoints_toml(),
        wrong.display()
    );
    (dir, settings)
}

#[test]
fn wrong_credentials_name_the_user_and_never_show_the_password() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    let (_dir, settings) = wrong_password(&cluster, "auth");
    let expected = [
        cluster.endpoint(0),
        "refused the credentials of user \"agent\"".to_owned(),
        "check [cluster] user and its password".to_owned(),
    ];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    expect_error(&settings, &expected, Some("wrong-pw-4242"));
    // Without a user, etcd says it needs one.
    let settings = format!("{}\nname = \"auth\"", cluster.endpoints_toml());
    let expected = [cluster.endpoint(0), "requires a user".to_owned()];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    expect_error(&settings, &expected, None);
}

#[test]
fn a_tls_mismatch_says_what_to_check() {
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tls");
    let options = Options {
        tls: Some((tls.join("server.pem"), tls.join("server.key"))),
    };
    let Some(cluster) = EtcdCluster::start_with(1, options) else {
        return;
    };
    // A CA that did not sign the member's certificate.
    let other = format!(
        "{}\nname = \"tls\"\nca_file = \"{}\"",
        cluster.endpoints_toml(),
        tls.join("other-ca.pem").display()
    );
    let expected = [
        cluster.endpoint(0),
        "TLS failed".to_owned(),
        "check [cluster] ca_file".to_owned(),
    ];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    expect_error(&other, &expected, None);
    // The CA that signed it: the member is reached over TLS, and the agent leads.
    let emulator = Background::start();
    let (_dir, out) = out_dir();
    let setup = Setup {
        cluster: format!(
            "{}\nname = \"tls-ok\"\nca_file = \"{}\"",
            cluster.endpoints_toml(),
            tls.join("ca.pem").display()
        ),
        jobs: 1,
        shape: JobShape::EVERY_SECOND,
        out: &out,
        emulator: &emulator,
    };
    let agent = Agent::start(&setup, "a", &[]);
    let led = crate::util::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
        agent.role().as_deref() == Some("leader")
    });
    assert!(led, "not leading over TLS:\n{}", agent.log());
    drop(agent);
    // http:// to a member that serves https.
    let plain = cluster.endpoint(0).replace("https://", "http://");
    let settings = format!("endpoints = [\"{plain}\"]\nname = \"tls\"");
    let expected = [plain.as_str(), "if the member serves https, write https://"];
    expect_error(&settings, &expected, None);
}

/// A wrong password is not tried again at every request (each try costs etcd a bcrypt): the
/// tries back off (1 s doubling to 60 s), counted from etcd's own `Authenticate` RPCs, and the
/// log says so once.
#[test]
fn a_refused_password_is_tried_again_with_backoff() {
    let Some(cluster) = EtcdCluster::start(1) else {
        return;
    };
    let (_dir, settings) = wrong_password(&cluster, "backoff");
    let before = super::slots::etcd_rpcs(&cluster, 1, "Authenticate");
    let agent = expect_error(
        &settings,
        &["refused the credentials"],
        Some("wrong-pw-4242"),
    );
    // expect_error took 2 s and more; 12 s more: 1 + 2 + 4 + 8 s of backoff at most 5 tries
    // (and the first few requests of the agent's tasks at once).
    std::thread::sleep(Duration::from_secs(12));
    let tries = super::slots::etcd_rpcs(&cluster, 1, "Authenticate") - before;
    assert!(
        tries <= 10,
        "{tries} authentications in about 15 s: the wrong password is not backed off"
    );
    assert!(
        tries >= 1,
        "etcd counted no authentication: is the metric there?"
    );
    let said = agent
        .messages()
        .lines()
        .filter(|l| l.contains("the credentials are tried again after"))
        .count();
    assert_eq!(said, 1, "{}", agent.messages());
    eprintln!("{tries} authentications of a wrong password in about 15 s");
}
