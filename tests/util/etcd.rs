//! A real etcd cluster on 127.0.0.1 for the cluster tests: Debian's `etcd` (etcd-server),
//! members on free ports with their own data directories in a temporary directory, killed
//! when dropped. [`EtcdCluster::start`] returns `None` (the test skips) when etcd is missing,
//! except under CI, where it fails (see [`super::require`]).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::http::free_port;

/// The root user and its password that [`EtcdCluster::enable_auth`] creates.
const ROOT: &str = "root:root-pw-for-tests";

/// How long a member (or the whole cluster) may take to become healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How the members serve their client URLs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve https with this certificate and key (PEM files) instead of http.
    pub tls: Option<(PathBuf, PathBuf)>,
}

/// One member.
#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running etcd cluster of n members.
#[derive(Debug)]
pub struct EtcdCluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
    options: Options,
}

impl EtcdCluster {
    /// Whether etcd and etcdctl are installed (or, under CI, fails saying how to get them).
    pub fn available() -> bool {
        let here = super::runs("etcd", &["--version"]) && super::runs("etcdctl", &["version"]);
        super::require(
            here,
            "etcd and etcdctl",
            "run scripts/test-tools.sh as root (Debian's etcd-server and etcd-client)",
        )
    }

    /// `n` members serving http, all healthy; `None` when etcd is not installed (outside CI).
    pub fn start(n: usize) -> Option<EtcdCluster> {
        EtcdCluster::start_with(n, Options::default())
    }

    /// [`EtcdCluster::start`] with `options`.
    pub fn start_with(n: usize, options: Options) -> Option<EtcdCluster> {
        if !EtcdCluster::available() {
            return None;
        }
        // A port found free can be taken before etcd binds it (another process's connection
        // got it as its local port): the cluster then starts again on other ports.
        for attempt in 1..=3 {
            let dir = tempfile::tempdir().expect("a temporary directory for etcd");
            let members = (0..n)
                .map(|i| Member {
                    name: format!("m{i}"),
                    client_port: free_port(),
                    peer_port: free_port(),
                    child: None,
                })
                .collect();
            let mut cluster = EtcdCluster {
                dir,
                members,
                options: options.clone(),
            };
            for i in 0..n {
                cluster.spawn(i);
            }
            let last = attempt == 3;
            if (0..n).all(|i| cluster.until_healthy(i, last)) {
                return Some(cluster);
            }
        }
        unreachable!("the last attempt panics instead of giving up")
    }

    /// The members' client URLs, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// Member `i`'s client URL.
    pub fn endpoint(&self, i: usize) -> String {
        let scheme = if self.options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.members[i].client_port)
    }

    /// `endpoints = [...]` for a `[cluster]` table.
    pub fn endpoints_toml(&self) -> String {
        let quoted: Vec<String> = self
            .endpoints()
            .iter()
            .map(|e| format!("\"{e}\""))
            .collect();
        format!("endpoints = [{}]", quoted.join(", "))
    }

    /// Kills member `i` (SIGKILL) and waits for it to be gone.
    pub fn stop(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again (its data directory kept) and waits until it is healthy when
    /// the others are up (alone, a member has no quorum: then it only waits for its port).
    pub fn start_member(&mut self, i: usize) {
        self.spawn(i);
        if self.members.iter().filter(|m| m.child.is_some()).count() * 2 > self.members.len() {
            self.wait_healthy(i);
        }
    }

    /// Runs `etcdctl` (API v3) against the first running member with `args`.
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        self.etcdctl_command(args).output().expect("run etcdctl")
    }

    /// `etcdctl` (API v3) against the first running member with `args`, not started.
    fn etcdctl_command(&self, args: &[&str]) -> Command {
        let endpoint = (0..self.members.len())
            .find(|&i| self.members[i].child.is_some())
            .map(|i| self.endpoint(i))
            .expect("a running member");
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3").arg("--endpoints").arg(endpoint);
        if let Some((cert, _)) = &self.options.tls {
            // The test certificates are signed by tests/data/tls/ca.pem.
            let ca = cert.with_file_name("ca.pem");
            cmd.arg("--cacert").arg(ca);
        }
        cmd.args(args);
        cmd
    }

    /// Changes the password of `user` (as root, once [`EtcdCluster::enable_auth`] ran): etcd
    /// then refuses the tokens it gave the user before.
    pub fn change_password(&self, user: &str, password: &str) {
        let mut cmd = self.etcdctl_command(&[
            "--user",
            ROOT,
            "user",
            "passwd",
            user,
            "--interactive=false",
        ]);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run etcdctl");
        child
            .stdin
            .take()
            .expect("its stdin")
            .write_all(format!("{password}\n").as_bytes())
            .expect("the new password");
        let out = child.wait_with_output().expect("etcdctl ends");
        assert!(
            out.status.success(),
            "etcdctl user passwd: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates `user` with `password` (and a root user), grants it read and write under
    /// `prefix`, and enables authentication.
    pub fn enable_auth(&self, user: &str, password: &str, prefix: &str) {
        let steps: [Vec<String>; 6] = [
            vec!["user".into(), "add".into(), ROOT.into()],
            vec!["user".into(), "add".into(), format!("{user}:{password}")],
            vec!["role".into(), "add".into(), "agents".into()],
            vec![
                "role".into(),
                "grant-permission".into(),
                "agents".into(),
                "--prefix=true".into(),
                "readwrite".into(),
                prefix.into(),
            ],
            vec![
                "user".into(),
                "grant-role".into(),
                user.into(),
                "agents".into(),
            ],
            vec!["auth".into(), "enable".into()],
        ];
        for step in steps {
            let args: Vec<&str> = step.iter().map(String::as_str).collect();
            let out = self.etcdctl(&args);
            assert!(
                out.status.success(),
                "etcdctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Member `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    fn spawn(&mut self, i: usize) {
        let cluster: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let member = &self.members[i];
        let client = self.endpoint(i);
        let peer = format!("http://127.0.0.1:{}", member.peer_port);
        let log = std::fs::File::create(self.log_path(i)).expect("create the member's log");
        let mut cmd = Command::new("etcd");
        cmd.arg("--name")
            .arg(&member.name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&member.name))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &cluster.join(",")])
            .args(["--initial-cluster-state", "new"])
            .args([
                "--initial-cluster-token",
                &format!("hb-{}", std::process::id()),
            ])
            // Fast elections: the tests stop members and expect the rest to go on quickly.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--log-outputs", "stderr"]);
        if let Some((cert, key)) = &self.options.tls {
            cmd.arg("--cert-file").arg(cert).arg("--key-file").arg(key);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// Waits until member `i` says it is healthy (it has a leader).
    fn wait_healthy(&mut self, i: usize) {
        self.until_healthy(i, true);
    }

    /// Waits until member `i` says it is healthy: true; false when it exited because its port
    /// was taken and `last` is false (the caller starts again on other ports); else panics.
    fn until_healthy(&mut self, i: usize, last: bool) -> bool {
        let port = self.members[i].client_port;
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if self.options.tls.is_some() {
                if self.etcdctl(&["endpoint", "health"]).status.success() {
                    return true;
                }
            } else if healthy(port) {
                return true;
            }
            let exited = self.members[i]
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some());
            if exited && !last && self.log(i).contains("address already in use") {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "etcd member {i} did not become healthy within {START_TIMEOUT:?}; its log:\n{}",
            self.log(i)
        );
    }

    /// The directory the members keep their data and logs in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.stop(i);
        }
    }
}

/// Whether the plain-http member on `port` answers `GET /health` with health true.
fn healthy(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}

/// A TCP front to an etcd member that hands every byte of the member's answers to the client
/// `delay` after it came (requests pass at once): an etcd as slow as one under load, or far
/// away. Its threads end with the test process. Raw TCP on purpose, not a
/// [`super::http::FakeServer`]: it relays etcd's own answers (gRPC over HTTP/2) byte by byte.
#[derive(Debug)]
pub struct SlowFront {
    addr: std::net::SocketAddr,
}

impl SlowFront {
    /// A front for `member` (`http://127.0.0.1:PORT`) on a free port of 127.0.0.1.
    pub fn start(member: &str, delay: Duration) -> SlowFront {
        let backend = member
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the slow front");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&backend) else {
                    continue;
                };
                let (Ok(client_in), Ok(server_in)) = (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                // Requests: at once.
                std::thread::spawn(move || pipe(client_in, server, Duration::ZERO));
                // Answers: `delay` after they came.
                std::thread::spawn(move || pipe(server_in, client, delay));
            }
        });
        SlowFront { addr }
    }

    /// Its URL, for `[cluster] endpoints`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read, until either side closes.
fn pipe(mut from: TcpStream, to: TcpStream, delay: Duration) {
    let (chunks, later) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut to = to;
        for (read_at, chunk) in later {
            std::thread::sleep((read_at + delay).saturating_duration_since(Instant::now()));
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if chunks.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
}
