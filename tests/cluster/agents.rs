//! Agents of one cluster for the tests: real `heartbeat-agent daemon` processes, each with its
//! own home, config (`[cluster] node = NAME`), state and status endpoint, pinging the emulator;
//! their jobs append `NODE SLOT` to a file per job, so the tests count every fire slot from
//! the jobs' own output.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::emulator::{token_for, Background};
use crate::util::Home;

/// What every agent of a test shares.
pub struct Setup<'a> {
    /// The `[cluster]` lines besides `node` (endpoints, name, lease, on_unavailable, ...).
    pub cluster: String,
    /// How many jobs, each of `shape`.
    pub jobs: usize,
    /// What each job is.
    pub shape: JobShape,
    /// Where the jobs write (one file per job).
    pub out: &'a Path,
    /// The service.
    pub emulator: &'a Background,
}

/// The jobs of a [`Setup`]: each appends `NODE SLOT` to its file, then runs `then`.
#[derive(Debug, Clone, Copy)]
pub struct JobShape {
    /// The cron schedule (with seconds).
    pub schedule: &'static str,
    /// Shell run after the line is written (such as `; sleep 3`).
    pub then: &'static str,
    /// More TOML lines of each job (such as `overlap = "skip"`).
    pub extra: &'static str,
}

impl JobShape {
    /// Every second, nothing more.
    pub const EVERY_SECOND: JobShape = JobShape {
        schedule: "*/1 * * * * *",
        then: "",
        extra: "",
    };
}

/// One running agent; killed when dropped.
pub struct Agent {
    /// Its `[cluster] node`.
    pub node: String,
    /// Kept for its directory (config, state), removed when the agent is dropped.
    _home: Home,
    child: Child,
    status_port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Agent {
    /// Starts agent `node` of `setup` with `env` added to its environment (such as
    /// [`faketime`]'s).
    pub fn start(setup: &Setup<'_>, node: &str, env: &[(String, String)]) -> Agent {
        let home = Home::new();
        let status_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut config = format!(
            "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \
             \"127.0.0.1:{status_port}\"\n\n[cluster]\n{}\nnode = \"{node}\"\n",
            home.state_dir().display(),
            setup.cluster
        );
        for j in 0..setup.jobs {
            let file = setup.out.join(format!("j{j}"));
            let shape = setup.shape;
            config.push_str(&format!(
                "\n[[jobs]]\nname = \"j{j}\"\nschedule = \"{}\"\nshell = \"echo \
                 \\\"$HEARTBEAT_AGENT_NODE $HEARTBEAT_AGENT_SCHEDULED\\\" >> {}{}\"\nping_url = \
                 \"{}/{}\"\n{}\n",
                shape.schedule,
                file.display(),
                shape.then,
                setup.emulator.ping_url(),
                token_for(&format!("j{j}")),
                shape.extra,
            ));
        }
        home.write_config(&config);
        let mut cmd = home.agent();
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .args(["daemon", "--log-format", "json", "--config"])
            .arg(home.config_path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start an agent");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().expect("log").push(line);
            }
        });
        Agent {
            node: node.to_owned(),
            _home: home,
            child,
            status_port,
            log,
        }
    }

    /// Its log so far (JSON lines).
    pub fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// `GET path` on its status endpoint: the status code and body.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let authority = format!("127.0.0.1:{}", self.status_port);
        std::net::TcpStream::connect(&authority).ok()?;
        Some(crate::util::http::exchange(
            &authority,
            &format!("GET {path} HTTP/1.1"),
            &[&format!("Host: {authority}")],
        ))
    }

    /// The `message` of each of its JSON log lines so far, one per line.
    pub fn messages(&self) -> String {
        let log = self.log.lock().expect("log");
        let message = |line: &String| {
            let value: serde_json::Value = serde_json::from_str(line).ok()?;
            value["message"].as_str().map(str::to_owned)
        };
        log.iter()
            .filter_map(message)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Its `GET /status` document, once the endpoint answers.
    pub fn status(&self) -> serde_json::Value {
        let what = format!("the status endpoint of agent {}", self.node);
        let every = Duration::from_millis(100);
        let body = crate::util::eventually_every(every, Duration::from_secs(10), &what, || {
            match self.get("/status") {
                Some((200, body)) => Ok(body),
                other => Err(format!("{other:?}")),
            }
        });
        serde_json::from_str(&body).expect("status JSON")
    }

    /// Its `/metrics` text.
    pub fn metrics(&self) -> String {
        match self.get("/metrics") {
            Some((200, body)) => body,
            other => panic!("/metrics of {}: {other:?}", self.node),
        }
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills it (SIGKILL) at once.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `(job, slot)` to the nodes that ran it, in the order they wrote it.
pub type Slots = BTreeMap<(usize, i64), Vec<String>>;

/// Every `(job, slot)` the jobs wrote, with the nodes that ran it (in file order).
pub fn slots(out: &Path, jobs: usize) -> Slots {
    let mut slots: BTreeMap<(usize, i64), Vec<String>> = BTreeMap::new();
    for j in 0..jobs {
        let text = std::fs::read_to_string(out.join(format!("j{j}"))).unwrap_or_default();
        for line in text.lines() {
            let (node, slot) = line.split_once(' ').expect("NODE SLOT");
            let slot = slot
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("slot in {line:?}"));
            slots.entry((j, slot)).or_default().push(node.to_owned());
        }
    }
    slots
}

/// The slots of `slots` that ran more than once, for messages.
pub fn twice(slots: &Slots) -> Vec<String> {
    slots
        .iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|((j, slot), nodes)| format!("j{j}@{slot}: {nodes:?}"))
        .collect()
}

/// The slots in `from..=to` (Unix seconds) that no agent ran, for messages.
pub fn missing(slots: &Slots, jobs: usize, from: i64, to: i64) -> Vec<String> {
    (0..jobs)
        .flat_map(|j| (from..=to).map(move |s| (j, s)))
        .filter(|key| !slots.contains_key(key))
        .map(|(j, s)| format!("j{j}@{s}"))
        .collect()
}

/// Now, in Unix seconds (the test's own, real clock).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

/// A directory for the jobs' output files.
pub fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_owned();
    (dir, path)
}

/// The environment that runs a program `offset` off the real clock through Debian's
/// libfaketime (what `faketime -f OFFSET` sets; given directly, so the agent is our child and
/// not the `faketime` script's, and a kill reaches it); `None` when libfaketime is not
/// installed (the test is then skipped, except under CI).
pub fn faketime(offset: &str) -> Option<Vec<(String, String)>> {
    let lib = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join("faketime/libfaketime.so.1"))
        .find(|path| path.exists());
    let how = "run scripts/test-tools.sh as root (Debian's faketime)";
    if !crate::util::require(lib.is_some(), "libfaketime", how) {
        return None;
    }
    let lib = lib?.display().to_string();
    Some(vec![
        ("LD_PRELOAD".to_owned(), lib),
        ("FAKETIME".to_owned(), offset.to_owned()),
    ])
}
