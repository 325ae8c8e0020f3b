//! Starting the emulator from any integration test: in an async test (`start`), or in a plain
//! `#[test]` that runs the binary with `std::process::Command` (`Background`, which owns a
//! runtime thread for the emulator), or as its own process, the `heartbeat-agent emulator`
//! binary (`Process`).

use std::io::{BufRead, BufReader};
use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use heartbeat_agent::emulator::{Emulator, EmulatorHandle, EmulatorOptions, Fixtures};

/// `config/emulator-fixtures.json`, the example fixtures.
pub fn example_fixtures_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/emulator-fixtures.json"
    ))
}

/// The example fixtures, parsed.
pub fn example_fixtures() -> Fixtures {
    Fixtures::from_file(&example_fixtures_path()).expect("the example fixtures are valid")
}

/// The ping token the example fixtures give the "nightly backup" check.
pub const FIXTURE_TOKEN: &str = "3f2a9c1e-5b7d-4e8f-9a6b-1c2d3e4f5a01";

/// A ping token for a test check named `name`: a UUID (the emulator, like the service, takes
/// only UUID tokens), the same for the same name, different for different names.
pub fn token_for(name: &str) -> String {
    let hash = |seed: u64| {
        name.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        b >> 52,
        b & 0xffff_ffff_ffff
    )
}

/// Starts an emulator with the example fixtures on 127.0.0.1 port 0 (inside a tokio runtime).
pub async fn start() -> EmulatorHandle {
    start_with(EmulatorOptions {
        fixtures: example_fixtures(),
        ..EmulatorOptions::default()
    })
    .await
}

/// Starts an emulator with the given options (inside a tokio runtime).
pub async fn start_with(options: EmulatorOptions) -> EmulatorHandle {
    Emulator::start(options).await.expect("the emulator starts")
}

/// An emulator served by its own runtime, for synchronous tests. Derefs to the handle.
pub struct Background {
    handle: Option<EmulatorHandle>,
    runtime: tokio::runtime::Runtime,
}

impl Background {
    /// Starts an emulator with the example fixtures.
    pub fn start() -> Self {
        Self::start_with(EmulatorOptions {
            fixtures: example_fixtures(),
            ..EmulatorOptions::default()
        })
    }

    /// Starts an emulator without fixtures, holding one heartbeat check (period 1 day, grace
    /// 1 hour) per `(id, ping token)`.
    pub fn with_checks(checks: &[(&str, &str)]) -> Self {
        let emulator = Self::start_with(EmulatorOptions {
            fixtures: Fixtures::default(),
            ..EmulatorOptions::default()
        });
        for (id, token) in checks {
            emulator
                .add_heartbeat_check(&serde_json::json!({"id": id, "name": id,
                    "heartbeat": {"period": 1, "periodUnit": "days", "grace": 1,
                                  "graceUnit": "hours", "pingToken": token}}))
                .expect("add a heartbeat check");
        }
        emulator
    }

    /// Starts an emulator with the given options.
    pub fn start_with(options: EmulatorOptions) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the emulator");
        let handle = runtime.block_on(start_with(options));
        Background {
            handle: Some(handle),
            runtime,
        }
    }
}

impl Deref for Background {
    type Target = EmulatorHandle;

    fn deref(&self) -> &EmulatorHandle {
        self.handle.as_ref().expect("present until drop")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.runtime.block_on(handle.shutdown());
        }
    }
}

/// The `heartbeat-agent emulator` binary serving the example fixtures on 127.0.0.1 (port 0 for
/// both listeners) with its default API key; stopped with SIGTERM (and reaped) when dropped.
pub struct Process {
    child: Child,
    /// The API's `base_url=` line.
    pub base_url: String,
    _home: super::Home,
}

impl Process {
    /// Starts the binary and reads both lines it prints.
    pub fn start() -> Process {
        let home = super::Home::new();
        let mut child = home
            .agent()
            .args(["emulator", "--listen", "127.0.0.1:0"])
            .args(["--ping-listen", "127.0.0.1:0", "--fixtures"])
            .arg(example_fixtures_path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the emulator binary starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        let mut next = || lines.next().expect("a line").expect("readable");
        let base_url = next()
            .strip_prefix("base_url=")
            .expect("a base_url= line")
            .to_owned();
        assert!(next().starts_with("ping_url="));
        Process {
            child,
            base_url,
            _home: home,
        }
    }

    /// One authenticated API request (`body` sent as JSON when given): the status and the body
    /// parsed as JSON.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let authority = self.base_url.strip_prefix("http://").expect("an http URL");
        let host = format!("Host: {authority}");
        let body = body.map(serde_json::Value::to_string).unwrap_or_default();
        let answer = super::http::exchange_with_body(
            authority,
            &format!("{method} {path} HTTP/1.1"),
            &[
                &host,
                "Authorization: Bearer emulator-api-key",
                "Content-Type: application/json",
            ],
            &body,
        );
        let json = serde_json::from_str(&answer.body)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", answer.body));
        (answer.status, json)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if super::wait_exit(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
