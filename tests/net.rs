//! Outgoing connections over real TLS and through a real proxy (issue 16): a loopback TLS front
//! with a CA the tests carry (`tests/data/tls`), Debian's tinyproxy, IPv6 loopback.

use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::util::daemon::Daemon;
use crate::util::emulator::Background;
use crate::util::http::{FakeServer, Reply};
use crate::util::outbox::{Behaviour, PingHost};
use crate::util::tls::{self, Cert, Front, TinyProxy};
use crate::util::Home;

/// Every token here contains this, so output can be searched for a leak.
const SECRET: &str = "SECRETnet";

fn token(name: &str) -> String {
    format!("{SECRET}-{name}")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The proxy and trust settings of the developer's shell, which no agent here inherits.
const INHERITED: [&str; 10] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// `heartbeat-agent --state-dir STATE ARGS`, without inherited proxies or trust settings.
fn agent(home: &Home, args: &[&str]) -> Command {
    let mut cmd = home.agent();
    for var in INHERITED {
        cmd.env_remove(var);
    }
    cmd.arg("--state-dir")
        .arg(home.state_dir())
        .args(args)
        .stdin(Stdio::null());
    cmd
}

fn output(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run the agent");
    let all = text(&out);
    assert!(!all.contains(SECRET), "a token was printed:\n{all}");
    out
}

fn run_ping(home: &Home, url: &str, extra: &[&str]) -> Command {
    let mut args = vec!["run", "--ping-url", url, "--ping-timeout", "5s"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "true"]);
    agent(home, &args)
}

#[test]
fn run_pings_over_https_trusting_ca_file_or_ssl_cert_file() {
    let home = Home::new();
    let host = PingHost::start(Behaviour::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Trusted);
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    // The system store plus `--ca-file`: found in the ca_file without reading the whole store.
    let mut cmd = run_ping(&home, &front.url(&token("a")), &["--ca-file", ca]);
    cmd.env("HEARTBEAT_AGENT_LOG", TRUST_LOG);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("a")), 1, "{}", text(&out));
    assert!(!text(&out).contains("the whole store"), "{}", text(&out));
    let mut cmd = run_ping(&home, &front.url(&token("b")), &[]);
    cmd.env("SSL_CERT_FILE", ca);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("b")), 1, "{}", text(&out));
    // The system store alone does not know the test CA: refused, never sent.
    let out = output(run_ping(&home, &front.url(&token("c")), &[]));
    assert_eq!(host.count(&token("c")), 0);
    assert!(text(&out).contains("is not trusted"), "{}", text(&out));
    assert!(text(&out).contains("system bundle"), "{}", text(&out));
}

/// An https ping without a proxy goes through the built-in HTTP/1.1 client over rustls (its
/// request says `Connection: close`; reqwest's keeps the connection), trusting each source as
/// reqwest did: `--ca-file` beside the system store, and `SSL_CERT_DIR` alone (a hashed
/// directory holding only the test CA, no bundle). A certificate of a CA neither holds is
/// refused with the words reqwest's refusal had, and the ping never reaches the host.
#[test]
fn https_pings_go_through_the_built_in_client_with_the_same_trust() {
    let home = Home::new();
    let host = FakeServer::start(crate::util::http::Mode::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("")), Cert::Trusted);
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    let dir = home.path("certs");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::copy(tls::ca_file(), dir.join("test-ca.pem")).expect("copy the CA");
    rehash(&dir);
    let with_ca_file = run_ping(&home, &front.url(&token("ca-file")), &["--ca-file", ca]);
    let mut with_dir = run_ping(&home, &front.url(&token("dir")), &[]);
    with_dir.env("SSL_CERT_DIR", &dir);
    for (cmd, name) in [(with_ca_file, token("ca-file")), (with_dir, token("dir"))] {
        let out = output(cmd);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let requests = host.requests();
        let seen = requests
            .iter()
            .find(|r| r.path() == format!("/{name}"))
            .unwrap_or_else(|| panic!("{name} never arrived: {}", text(&out)));
        assert_eq!(seen.header("connection"), Some("close"), "{name}: {seen:?}");
        assert!(seen.header("origin").is_some(), "{name}: {seen:?}");
    }
    let untrusted = Front::start("127.0.0.1:0", tls::addr_of(&host.url("")), Cert::Untrusted);
    let mut cmd = run_ping(&home, &untrusted.url(&token("unknown")), &[]);
    cmd.env("SSL_CERT_DIR", &dir);
    let out = output(cmd);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "the command's status: {all}");
    let expected = format!(
        "the certificate of 127.0.0.1 is not trusted (UnknownIssuer); trusted: SSL_CERT_DIR {} \
         (1 certificates). If 127.0.0.1 uses a private CA",
        dir.display()
    );
    assert!(all.contains(&expected), "{expected} missing in:\n{all}");
    assert!(all.contains("kept in the outbox"), "{all}");
    assert!(
        !host.requests().iter().any(|r| r.path().contains("unknown")),
        "{:?}",
        host.requests()
    );
}

/// The daemon's https pings without a proxy take the built-in client too: a job firing every
/// second delivers each run's ping over TLS to a host known only through `[api] ca_file`, each
/// on its own connection (`Connection: close`), the one TLS configuration shared by them all.
#[test]
fn the_daemons_https_pings_go_through_the_built_in_client() {
    let home = Home::new();
    let host = FakeServer::start(crate::util::http::Mode::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("")), Cert::Trusted);
    let config = home.write_config(&format!(
        "[agent]\nstate_dir = \"{state}\"\n\n[api]\nca_file = \"{ca}\"\n\n\
         [[jobs]]\nname = \"tick\"\nschedule = \"*/1 * * * * *\"\ncommand = [\"true\"]\n\
         ping_url = \"{url}\"\n",
        state = home.state_dir().display(),
        ca = tls::ca_file().display(),
        url = front.url(&token("daemon")),
    ));
    let mut daemon = Daemon::on(&home)
        .env_remove(INHERITED)
        .config(&config)
        .text_log()
        .both_outputs()
        .start();
    let requests = host.wait_for(2, std::time::Duration::from_secs(20));
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.exit_within(std::time::Duration::from_secs(10));
    assert!(requests.len() >= 2, "{requests:?}\n{}", daemon.text());
    for request in &requests {
        assert_eq!(request.path(), format!("/{}", token("daemon")));
        assert_eq!(request.header("connection"), Some("close"), "{request:?}");
    }
    let log = daemon.text();
    assert!(!log.contains("not trusted"), "{log}");
    assert!(!log.contains(SECRET), "a token was logged:\n{log}");
}

/// How an https ping fails, in the words users saw from reqwest: a certificate for other
/// names, an expired certificate (both refused certificates, kept, logged once with the trust
/// store), a server that does not speak TLS (a failed connection with rustls' words) and one
/// that never answers the handshake (a timeout). The command's status is untouched and each
/// ping is kept.
#[test]
fn https_ping_failures_are_told_as_before() {
    let home = Home::new();
    let host = FakeServer::start(crate::util::http::Mode::Status(200));
    let backend = tls::addr_of(&host.url(""));
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    let expired_ca = tls::data("expired-ca.pem");
    let expired_ca = expired_ca.to_str().expect("utf8");
    // The test certificate names 127.0.0.1, ::1 and localhost, not 127.0.0.2.
    let other_name = Front::start("127.0.0.2:0", backend, Cert::Trusted);
    let expired = Front::start("127.0.0.1:0", backend, Cert::Expired);
    // A listener that never accepts: the kernel completes the TCP handshake, nobody answers
    // the TLS one.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = format!(
        "https://{}/{}",
        silent.local_addr().expect("addr"),
        token("silent")
    );
    // A plain HTTP server: it answers the ClientHello with an HTTP error, which is no TLS record.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let plain_url = format!(
        "https://{}/{}",
        plain.local_addr().expect("addr"),
        token("plain")
    );
    std::thread::spawn(move || {
        for mut conn in plain.incoming().flatten() {
            use std::io::{Read, Write};
            let _ = conn.read(&mut [0u8; 4096]);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let cases = [
        (
            other_name.url(&token("name")),
            ca,
            vec![
                "the certificate of 127.0.0.2 is not trusted (certificate not valid for name \
                 \"127.0.0.2\"; certificate is only valid for IpAddress(127.0.0.1), \
                 IpAddress(0::1) or DnsName(\"localhost\")); trusted: system bundle",
            ],
        ),
        (
            expired.url(&token("expired")),
            expired_ca,
            vec![
                "the certificate of 127.0.0.1 is not trusted (certificate expired: \
                 verification time ",
                "but certificate is not valid after 978393600 (",
            ],
        ),
        (
            plain_url,
            ca,
            vec!["connection failed: received corrupt message of type InvalidContentType"],
        ),
        (silent_url, ca, vec!["timed out"]),
    ];
    for (url, trusted, needles) in cases {
        let started = std::time::Instant::now();
        let out = output(run_ping(&home, &url, &["--ca-file", trusted]));
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "the command's status: {all}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(9),
            "within the 5 s ping budget: {:?}: {all}",
            started.elapsed()
        );
        for needle in needles.iter().chain(&["kept in the outbox"]) {
            assert!(all.contains(needle), "{needle} missing in:\n{all}");
        }
    }
    assert!(host.requests().is_empty(), "{:?}", host.requests());
    drop(silent);
}

/// Names the certificates of `dir` by subject hash (`HASH.0`), as OpenSSL looks them up.
fn rehash(dir: &std::path::Path) {
    let rehash = Command::new("openssl")
        .arg("rehash")
        .arg(dir)
        .output()
        .expect("openssl (scripts/test-tools.sh)");
    assert!(rehash.status.success(), "{}", text(&rehash));
}

/// The default log filter plus the trust store's own debug lines (`src/net/trust`), which
/// name no URL; not `heartbeat_agent::net`'s, whose description would read the whole store.
const TRUST_LOG: &str = "info,heartbeat_agent::pinged=warn,heartbeat_agent::net::trust=debug";

/// The system's bundle plus the test CA, and a hashed directory (`openssl rehash`) of the
/// system's roots plus the test CA, each as the whole store (`SSL_CERT_FILE`, `SSL_CERT_DIR`):
/// the test CA is found without reading the whole store (in the directory by its subject
/// hash), and a certificate of a CA that neither holds is refused as before, its ping kept.
#[test]
fn the_test_ca_is_found_in_a_large_bundle_and_by_hash_in_a_directory() {
    let home = Home::new();
    let host = PingHost::start(Behaviour::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Trusted);
    let ca = std::fs::read(tls::ca_file()).expect("test CA");
    let system = std::fs::read("/etc/ssl/certs/ca-certificates.crt")
        .expect("the system bundle: install ca-certificates (scripts/test-tools.sh)");
    let bundle = home.path("bundle.pem");
    std::fs::write(&bundle, [system.as_slice(), ca.as_slice()].concat()).expect("bundle");
    let dir = home.path("certs");
    std::fs::create_dir(&dir).expect("mkdir");
    // The distinct certificates of the directory (one a file), as the description counts them.
    let mut distinct = std::collections::HashSet::new();
    for item in std::fs::read_dir("/etc/ssl/certs").expect("/etc/ssl/certs") {
        let path = item.expect("entry").path();
        if path.extension().is_some_and(|e| e == "pem") {
            let name = path.file_name().expect("name");
            std::fs::copy(&path, dir.join(name)).expect("copy a root");
            let text = std::fs::read_to_string(&path).expect("a root");
            distinct.insert(text.split_whitespace().collect::<String>());
        }
    }
    assert!(
        distinct.len() > 50,
        "{} roots in /etc/ssl/certs",
        distinct.len()
    );
    std::fs::write(dir.join("test-ca.pem"), &ca).expect("test CA");
    let in_dir = distinct.len() + 1;
    let in_bundle = String::from_utf8_lossy(&system)
        .matches("-----BEGIN CERTIFICATE-----")
        .count()
        + 1;
    rehash(&dir);
    let hash = Command::new("openssl")
        .args(["x509", "-noout", "-subject_hash", "-in"])
        .arg(tls::ca_file())
        .output()
        .expect("openssl");
    let hash = String::from_utf8_lossy(&hash.stdout).trim().to_owned();
    assert!(
        dir.join(format!("{hash}.0")).exists(),
        "rehash made {hash}.0"
    );
    let store = |cmd: &mut Command, var: &str| {
        let value = if var == "SSL_CERT_FILE" {
            &bundle
        } else {
            &dir
        };
        cmd.env(var, value).env("HEARTBEAT_AGENT_LOG", TRUST_LOG);
    };
    for var in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
        let name = token(var);
        let mut cmd = run_ping(&home, &front.url(&name), &[]);
        store(&mut cmd, var);
        let out = output(cmd);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert_eq!(host.count(&name), 1, "{var}: {all}");
        assert!(!all.contains("the whole store is read"), "{var}: {all}");
        if var == "SSL_CERT_DIR" {
            let line = all
                .lines()
                .find(|l| l.contains("looked up by subject hash"))
                .unwrap_or_else(|| panic!("no lookup by hash: {all}"));
            assert!(line.contains(&format!("hash={hash}")), "{line}");
            assert!(line.contains("found=1"), "{line}");
        }
    }
    // A CA neither holds: refused with the same words, the ping kept; the whole store was
    // read before refusing.
    let untrusted = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Untrusted);
    for var in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
        let name = token(&format!("{var}-untrusted"));
        let mut cmd = run_ping(&home, &untrusted.url(&name), &[]);
        store(&mut cmd, var);
        let out = output(cmd);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "the command's status: {all}");
        assert_eq!(host.count(&name), 0, "{all}");
        assert!(all.contains("the whole store is read"), "{all}");
        let expected = if var == "SSL_CERT_FILE" {
            format!(
                "trusted: SSL_CERT_FILE {} ({in_bundle} certificates)",
                bundle.display()
            )
        } else {
            format!(
                "trusted: SSL_CERT_DIR {} ({in_dir} certificates)",
                dir.display()
            )
        };
        for needle in [
            "is not trusted (UnknownIssuer)",
            &expected,
            "kept in the outbox",
        ] {
            assert!(all.contains(needle), "{needle} missing in:\n{all}");
        }
    }
    let out = output(agent(&home, &["outbox", "list", "--json"]));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
}

/// A bundle reached through symbolic links is trusted: Kubernetes mounts secrets as links
/// (`ca.crt -> ..data/ca.crt`) and RHEL's system bundle is one. A FIFO named as the bundle is
/// refused at once, naming it, and the command still runs.
#[test]
fn a_ca_file_behind_symbolic_links_is_trusted_and_a_fifo_is_refused_without_blocking() {
    let home = Home::new();
    let host = PingHost::start(Behaviour::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Trusted);
    let data = home.path("..data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::copy(tls::ca_file(), data.join("ca.crt")).expect("copy");
    let link = home.path("ca.crt");
    std::os::unix::fs::symlink("..data/ca.crt", &link).expect("symlink");
    let link = link.to_str().expect("utf8");
    let out = output(run_ping(
        &home,
        &front.url(&token("l")),
        &["--ca-file", link],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("l")), 1, "{}", text(&out));
    let mut cmd = run_ping(&home, &front.url(&token("m")), &[]);
    cmd.env("SSL_CERT_FILE", link);
    let out = output(cmd);
    assert_eq!(host.count(&token("m")), 1, "{}", text(&out));
    let fifo = home.path("fifo.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let started = std::time::Instant::now();
    let out = output(run_ping(
        &home,
        &front.url(&token("f")),
        &["--ca-file", fifo.to_str().expect("utf8")],
    ));
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "the command ran: {all}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(all.contains("it is a FIFO, not a regular file"), "{all}");
    assert!(all.contains("fifo.pem"), "{all}");
}

#[test]
fn an_untrusted_certificate_is_reported_once_clearly_and_the_ping_is_kept() {
    let home = Home::new();
    let host = PingHost::start(Behaviour::Status(200));
    let front = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Untrusted);
    let ca = tls::ca_file();
    let started = std::time::Instant::now();
    let out = output(run_ping(
        &home,
        &front.url(&token("u")),
        &["--ca-file", ca.to_str().expect("utf8")],
    ));
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "the command's status: {all}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "a certificate error is not retried for the whole budget: {:?}",
        started.elapsed()
    );
    for needle in [
        "127.0.0.1",
        "is not trusted",
        "ca_file",
        "SSL_CERT_FILE",
        "UnknownIssuer",
    ] {
        assert!(all.contains(needle), "{needle} missing in:\n{all}");
    }
    assert_eq!(
        all.matches("is not trusted").count(),
        2,
        "once as the error, once as kept: {all}"
    );
    // Kept: once the trust store holds the ping host's CA, a flush delivers it.
    let out = output(agent(&home, &["outbox", "list", "--json"]));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    let mut flush = agent(&home, &["outbox", "flush"]);
    flush.env("SSL_CERT_FILE", tls::data("other-ca.pem"));
    let out = output(flush);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("u")), 1);
}

#[test]
fn ipv6_loopback_pings_over_http_and_https() {
    let home = Home::new();
    let host = PingHost::start(Behaviour::Status(200));
    let backend = tls::addr_of(&host.url("x"));
    let plain = Front::start("[::1]:0", backend, Cert::Plain);
    let secure = Front::start("[::1]:0", backend, Cert::Trusted);
    assert!(plain.url("t").starts_with("http://[::1]:"));
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    for (front, name) in [(&plain, "v6http"), (&secure, "v6https")] {
        let out = output(run_ping(
            &home,
            &front.url(&token(name)),
            &["--ca-file", ca],
        ));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert_eq!(host.count(&token(name)), 1, "{name}: {}", text(&out));
    }
}

#[test]
fn every_request_goes_through_the_proxy_http_and_https_unless_exempted() {
    let home = Home::new();
    let proxy = TinyProxy::start();
    let host = PingHost::start(Behaviour::Status(200));
    let backend = tls::addr_of(&host.url("x"));
    let secure = Front::start("127.0.0.1:0", backend, Cert::Trusted);
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    let with_proxy = |url: &str| {
        let mut cmd = run_ping(&home, url, &["--ca-file", ca]);
        cmd.env("HTTP_PROXY", proxy.url()).env(
            "HTTPS_PROXY",
            format!("http://user:{SECRET}pw@127.0.0.1:{}", &proxy.url()[17..]),
        );
        cmd
    };
    // http:// through the proxy: the built-in client steps aside, the proxy sees the request.
    let out = output(with_proxy(&host.url(&token("plain"))));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("plain")), 1);
    let seen = proxy.requests();
    assert!(
        seen.iter()
            .any(|r| r.starts_with("GET http://") && r.contains(&token("plain"))),
        "{seen:?}"
    );
    // https:// through the proxy: a CONNECT to the TLS front.
    let out = output(with_proxy(&secure.url(&token("tls"))));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("tls")), 1);
    let port = secure.base().rsplit(':').next().expect("port").to_owned();
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.starts_with("CONNECT 127.0.0.1:") && r.contains(&port)),
        "{:?}",
        proxy.requests()
    );
    // NO_PROXY exempts the host: direct, the proxy sees nothing more.
    let before = proxy.requests().len();
    let mut cmd = with_proxy(&host.url(&token("direct")));
    cmd.env("NO_PROXY", "localhost,127.0.0.1");
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("direct")), 1);
    assert_eq!(proxy.requests().len(), before, "{:?}", proxy.requests());
    // `[api] proxy = "none"` in the config turns the environment's proxy off.
    let config = home.write_config("[api]\nproxy = \"none\"\n");
    let mut cmd = with_proxy(&host.url(&token("none")));
    cmd.arg("--config").arg(&config);
    let mut cmd2 = agent(&home, &["--config", config.to_str().expect("utf8")]);
    cmd2.args(["run", "--ping-url", &host.url(&token("none")), "--", "true"])
        .env("HTTP_PROXY", proxy.url());
    let out = output(cmd2);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("none")), 1);
    assert_eq!(proxy.requests().len(), before, "{:?}", proxy.requests());
    drop(cmd);
}

#[test]
fn a_proxy_that_wants_credentials_keeps_the_ping_and_is_named_without_its_password() {
    // The proxy answers 407 to the plain request of an http:// ping and to the CONNECT of an
    // https:// one: neither answer is the ping host's, so both pings are kept, the message
    // names the proxy (never its password), and a flush with the right credentials delivers
    // each once.
    let home = Home::new();
    let proxy = TinyProxy::start_with("BasicAuth agent right-pw\n");
    let host = PingHost::start(Behaviour::Status(200));
    let secure = Front::start("127.0.0.1:0", tls::addr_of(&host.url("x")), Cert::Trusted);
    let ca = tls::ca_file();
    let ca = ca.to_str().expect("utf8");
    let port = &proxy.url()[17..];
    let wrong = format!("http://agent:{SECRET}-wrong@127.0.0.1:{port}");
    for (url, name) in [
        (host.url(&token("plain")), token("plain")),
        (secure.url(&token("tls")), token("tls")),
    ] {
        let mut cmd = run_ping(&home, &url, &["--ca-file", ca]);
        cmd.env("HTTP_PROXY", &wrong).env("HTTPS_PROXY", &wrong);
        let out = output(cmd);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert_eq!(host.count(&name), 0, "the proxy let it through: {all}");
        let named = format!("through the proxy http://agent:…@127.0.0.1:{port}");
        assert!(all.contains(&named), "the proxy is not named: {all}");
        assert!(all.contains("kept in the outbox"), "{all}");
        assert!(!all.contains("refused by the server"), "{all}");
    }
    assert!(
        proxy.requests().len() >= 2,
        "the proxy saw both: {:?}",
        proxy.requests()
    );
    let out = output(agent(&home, &["outbox", "list", "--json"]));
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        listed["entries"].as_array().map(Vec::len),
        Some(2),
        "both pings kept: {listed}"
    );
    let right = format!("http://agent:right-pw@127.0.0.1:{port}");
    let mut flush = agent(&home, &["outbox", "flush"]);
    flush
        .env("HTTP_PROXY", &right)
        .env("HTTPS_PROXY", &right)
        .env("SSL_CERT_FILE", ca);
    let out = output(flush);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("plain")), 1);
    assert_eq!(host.count(&token("tls")), 1);
}

#[test]
fn no_proxy_takes_a_cidr_block_with_a_port() {
    // `127.0.0.0/8:PORT` exempts that port of the block only.
    let home = Home::new();
    let proxy = TinyProxy::start();
    let host = PingHost::start(Behaviour::Status(200));
    let port = tls::addr_of(&host.url("x")).port();
    let mut cmd = run_ping(&home, &host.url(&token("direct")), &[]);
    cmd.env("HTTP_PROXY", proxy.url())
        .env("NO_PROXY", format!("127.0.0.0/8:{port}"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("direct")), 1);
    assert_eq!(proxy.requests(), Vec::<String>::new(), "exempted");
    let other = if port == 1 { 2 } else { port - 1 };
    let mut cmd = run_ping(&home, &host.url(&token("proxied")), &[]);
    cmd.env("HTTP_PROXY", proxy.url())
        .env("NO_PROXY", format!("127.0.0.0/8:{other}"));
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(host.count(&token("proxied")), 1);
    assert_eq!(proxy.requests().len(), 1, "another port is not exempted");
    assert!(!text(&out).contains("ignored"), "{}", text(&out));
}

#[test]
fn sync_the_daemon_and_an_http_watch_work_over_https_through_the_proxy() {
    let home = Home::new();
    let proxy = TinyProxy::start();
    let emulator = Background::start();
    let check = emulator
        .add_heartbeat_check(&json!({"name": "tls check",
            "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1, "graceUnit": "hours"}}))
        .expect("check");
    let id = check["id"].as_str().expect("id").to_owned();
    let ping_url = check["heartbeat"]["pingUrl"]
        .as_str()
        .expect("ping url")
        .to_owned();
    let ping_token = ping_url.rsplit('/').next().expect("token");
    let api = Front::start(
        "127.0.0.1:0",
        tls::addr_of(emulator.base_url()),
        Cert::Trusted,
    );
    let pings = Front::start("127.0.0.1:0", emulator.ping_addr(), Cert::Trusted);
    let health = PingHost::start(Behaviour::Status(200));
    let health = Front::start("127.0.0.1:0", tls::addr_of(&health.url("x")), Cert::Trusted);
    let config = home.write_config(&format!(
        "[agent]\nstate_dir = \"{state}\"\n\n[api]\nbase_url = \"{api}\"\nping_base_url = \"{ping}\"\n\
         account_id = \"{account}\"\napi_key_env = \"EMULATOR_KEY\"\nca_file = \"{ca}\"\n\n\
         [[jobs]]\nname = \"nightly\"\nschedule = \"@daily\"\ncheck_id = \"{id}\"\n\n\
         [[jobs]]\nname = \"probe\"\nschedule = \"*/1 * * * * *\"\nping_url = \"{ping_url}\"\n\n\
         [jobs.watch]\nkind = \"http\"\nurl = \"{url}\"\n",
        ping_url = pings.url(ping_token),
        state = home.state_dir().display(),
        api = api.base(),
        ping = pings.base(),
        account = emulator.account(),
        ca = tls::ca_file().display(),
        url = health.url("health"),
    ));
    let config = config.to_str().expect("utf8").to_owned();
    let with_env = |mut cmd: Command| {
        cmd.env("EMULATOR_KEY", emulator.api_key())
            .env("HTTPS_PROXY", proxy.url());
        cmd
    };
    let out = output(with_env(agent(&home, &["--config", &config, "sync"])));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        emulator.requests().iter().any(|r| r.method == "PUT"),
        "no PUT reached the emulator: {}",
        text(&out)
    );
    let mut daemon = Daemon::on(&home)
        .env_remove(INHERITED)
        .arg("--state-dir")
        .arg(home.state_dir())
        .config(&config)
        .env("EMULATOR_KEY", emulator.api_key())
        .env("HTTPS_PROXY", proxy.url())
        .text_log()
        .both_outputs()
        .start();
    let pinged = crate::util::wait_until(
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(100),
        || !emulator.pings().is_empty(),
    );
    daemon.signal(nix::sys::signal::Signal::SIGKILL);
    daemon.exit_within(std::time::Duration::from_secs(10));
    assert!(
        pinged,
        "the daemon never pinged over https:\n{}",
        daemon.text()
    );
    let connects: Vec<String> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("CONNECT "))
        .collect();
    for front in [&api, &pings, &health] {
        let port = front.base().rsplit(':').next().expect("port").to_owned();
        assert!(
            connects.iter().any(|r| r.contains(&format!(":{port} "))),
            "no CONNECT to {port}: {connects:?}"
        );
    }
}

#[test]
fn config_check_names_a_bad_ca_file_or_proxy_with_its_place() {
    let home = Home::new();
    let garbage = home.path("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").expect("write");
    let config = home.write_config(&format!(
        "[api]\nca_file = \"{}\"\nproxy = \"socks5://user:{SECRET}@p:1080\"\n",
        garbage.display()
    ));
    let out = output(agent(
        &home,
        &[
            "--config",
            config.to_str().expect("utf8"),
            "config",
            "check",
        ],
    ));
    let all = text(&out);
    assert_eq!(out.status.code(), Some(78), "{all}");
    assert!(all.contains(":2:11: [api]: key `ca_file`"), "{all}");
    assert!(all.contains("no certificate in it"), "{all}");
    assert!(all.contains(":3:9: [api]: key `proxy`"), "{all}");
    assert!(
        all.contains("proxy scheme \"socks5\" is not supported"),
        "{all}"
    );
}

#[test]
fn an_api_call_through_a_proxy_that_wants_credentials_names_the_proxy_not_the_service() {
    // A 407 is the proxy's answer by definition: to the CONNECT of an https:// base URL
    // (tinyproxy with BasicAuth) and to a forwarded http:// request (a proxy answering 407 with
    // `Proxy-Authenticate`, as squid does; tinyproxy answers those 401), the message names the
    // proxy without its password and says what to do, never "api error 407" as if the service
    // had answered, and no request reaches the service.
    let home = Home::new();
    let tiny = TinyProxy::start_with("BasicAuth agent right-pw\n");
    let squid_like = FakeServer::scripted(|_, _| Reply {
        status: 407,
        headers: vec![("proxy-authenticate", "Basic realm=\"proxy\"".to_owned())],
        body: "Proxy Authentication Required".to_owned(),
        delay: std::time::Duration::ZERO,
    });
    let emulator = Background::start();
    let api = Front::start(
        "127.0.0.1:0",
        tls::addr_of(emulator.base_url()),
        Cert::Trusted,
    );
    let ca = tls::ca_file();
    // tinyproxy answers 401 to a CONNECT without credentials: the proxy is named all the same.
    for (base, proxy, says) in [
        (
            api.base(),
            squid_like.url(""),
            "HTTP 407 (it wants credentials)",
        ),
        (
            emulator.base_url().to_owned(),
            squid_like.url(""),
            "HTTP 407 (it wants credentials)",
        ),
        (api.base(), tiny.url(), "tunnel error: unsuccessful"),
    ] {
        let port = &proxy[17..];
        let wrong = format!("http://agent:{SECRET}-wrong@127.0.0.1:{port}");
        let before = emulator.requests().len();
        let mut cmd = agent(&home, &["--base-url", &base, "api", "check-statuses"]);
        cmd.env("HEARTBEAT_AGENT_API_KEY", emulator.api_key())
            .env("HEARTBEAT_AGENT_ACCOUNT", emulator.account())
            .env("HTTP_PROXY", &wrong)
            .env("HTTPS_PROXY", &wrong)
            .env("SSL_CERT_FILE", &ca);
        let out = output(cmd);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(1), "{base}: {all}");
        let named = format!("through the proxy http://agent:…@127.0.0.1:{port}: ");
        assert!(
            all.contains(&named),
            "{base}: the proxy is not named: {all}"
        );
        assert!(all.contains(says), "{base}: {all}");
        assert!(!all.contains("api error 407"), "{base}: {all}");
        assert!(all.contains("(GET /v1/check-statuses)"), "{base}: {all}");
        assert_eq!(
            emulator.requests().len(),
            before,
            "{base}: the proxy let it through"
        );
    }
}
