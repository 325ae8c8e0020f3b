//! Loopback TLS and a real forward proxy for the tests of outgoing connections.
//!
//! [`Front`] listens on 127.0.0.1 or [::1] and passes every connection on to a plain backend
//! (a [`super::http::FakeServer`], the emulator's API or ping host), terminating TLS with a
//! certificate of `tests/data/tls` first (or not: a plain front puts an IPv4 backend on IPv6).
//! It relays raw bytes on purpose: the backend (often a [`super::http::FakeServer`]) records
//! the requests, the front only adds TLS or another address family.
//! [`TinyProxy`] runs Debian's `tinyproxy` (installed by `scripts/test-tools.sh`) on a
//! free port and reads from its log every request it handled.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// `tests/data/tls/NAME`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tls")
        .join(name)
}

/// The test CA that signed `server.pem` (127.0.0.1, ::1, localhost).
pub fn ca_file() -> PathBuf {
    data("ca.pem")
}

/// Which certificate a front presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cert {
    /// `server.pem`, signed by the test CA.
    Trusted,
    /// `other-server.pem`, signed by a CA nobody trusts.
    Untrusted,
    /// `expired-server.pem`, signed by `expired-ca.pem`, valid only on 2001-01-01.
    Expired,
    /// No TLS: bytes are passed on as they come.
    Plain,
}

/// A running front; stops with the test process.
#[derive(Debug)]
pub struct Front {
    addr: SocketAddr,
    tls: bool,
}

impl Front {
    /// A front on `bind` (`127.0.0.1:0` or `[::1]:0`) for `backend`.
    pub fn start(bind: &str, backend: SocketAddr, cert: Cert) -> Front {
        let acceptor = match cert {
            Cert::Plain => None,
            Cert::Trusted => Some(acceptor("server")),
            Cert::Untrusted => Some(acceptor("other-server")),
            Cert::Expired => Some(acceptor("expired-server")),
        };
        let listener = std::net::TcpListener::bind(bind).expect("bind the front");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) = tokio::net::TcpStream::connect(backend).await else {
                            return;
                        };
                        match acceptor {
                            Some(acceptor) => {
                                if let Ok(mut tls) = acceptor.accept(client).await {
                                    let _ =
                                        tokio::io::copy_bidirectional(&mut tls, &mut server).await;
                                }
                            }
                            None => {
                                let mut client = client;
                                let _ =
                                    tokio::io::copy_bidirectional(&mut client, &mut server).await;
                            }
                        }
                    });
                }
            });
        });
        Front {
            addr,
            tls: cert != Cert::Plain,
        }
    }

    /// `https://HOST:PORT/PATH` (or `http://` for a plain front), `[::1]` in brackets.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// `https://HOST:PORT` without a trailing slash (an `[api] base_url`).
    pub fn base(&self) -> String {
        self.url("").trim_end_matches('/').to_owned()
    }
}

fn acceptor(name: &str) -> tokio_rustls::TlsAcceptor {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(data(&format!("{name}.pem")))
            .expect("certificate file")
            .collect::<Result<_, _>>()
            .expect("certificates");
    let key = PrivateKeyDer::from_pem_file(data(&format!("{name}.key"))).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The backend address of a `http://ADDR/...` URL.
pub fn addr_of(url: &str) -> SocketAddr {
    let parsed = reqwest::Url::parse(url).expect("url");
    parsed
        .socket_addrs(|| None)
        .expect("address")
        .into_iter()
        .next()
        .expect("one address")
}

/// Debian's tinyproxy, running in the foreground on a free port of 127.0.0.1.
pub struct TinyProxy {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl TinyProxy {
    /// Starts it; panics naming the fix when tinyproxy is not installed (the test must not pass
    /// without it: `scripts/test-tools.sh` installs it, CI runs that script).
    pub fn start() -> TinyProxy {
        TinyProxy::start_with("")
    }

    /// [`TinyProxy::start`] with `extra` lines in its configuration (`BasicAuth USER PASSWORD`
    /// makes it answer 407 to any request without those credentials, `CONNECT` included).
    pub fn start_with(extra: &str) -> TinyProxy {
        let dir = tempfile::tempdir().expect("dir");
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let conf = dir.path().join("tinyproxy.conf");
            std::fs::write(
                &conf,
                format!(
                    "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 100\n\
                     LogLevel Connect\nAllow 127.0.0.1\n{extra}"
                ),
            )
            .expect("conf");
            let log = dir.path().join(format!("log-{port}"));
            let out = std::fs::File::create(&log).expect("log");
            let child = Command::new("tinyproxy")
                .arg("-d")
                .arg("-c")
                .arg(&conf)
                .stdout(Stdio::from(out.try_clone().expect("dup")))
                .stderr(Stdio::from(out))
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start tinyproxy ({e}): run `bash scripts/test-tools.sh` \
                         (Debian package tinyproxy)"
                    )
                });
            let mut proxy = TinyProxy {
                child,
                port,
                log,
                _dir: tempfile::tempdir().expect("dir"),
            };
            let up = super::wait_until(Duration::from_secs(5), Duration::from_millis(20), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            if up {
                proxy._dir = dir;
                return proxy;
            }
            let _ = proxy.child.kill();
        }
        panic!("tinyproxy did not start on a free port in 5 tries");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request line it handled so far (`GET http://...`, `CONNECT host:port`).
    pub fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once("Request (file descriptor ").map(|(_, r)| r))
            .filter_map(|r| r.split_once("): ").map(|(_, req)| req.to_owned()))
            .collect()
    }
}

impl Drop for TinyProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
