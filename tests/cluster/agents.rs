//! Agents of one cluster for the tests: real `heartbeat-agent daemon` processes, each with its
//! own home (config, state, status socket `status.sock`) and its JSON log kept in memory;
//! `kill -9` of a running agent and a start again on the same home; stopped with SIGKILL when
//! dropped, or with SIGTERM ([`Agent::terminate_on_drop`]).
//! [`Agent::start`] writes the config of a [`Setup`]: jobs that append `NODE SLOT` to a file
//! per job (the tests count every fire slot from the jobs' own output) and ping the emulator;
//! a test with a config of its own writes it in [`Agent::home`] and calls [`Agent::spawn`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use heartbeat_agent::status::client::Endpoint;

use crate::util::daemon::{Daemon, Log};
use crate::util::emulator::{token_for, Background};
pub use crate::util::faketime;
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

/// One agent; killed when dropped unless [`Agent::terminate_on_drop`] says SIGTERM.
pub struct Agent {
    /// Its `[cluster] node`.
    pub node: String,
    /// Its config, state directory and status socket; removed when the agent is dropped.
    pub home: Home,
    /// The running daemon, `None` before [`Agent::spawn`] and after a stop.
    daemon: Option<Daemon>,
    /// Every stderr line of every daemon started on this home, in order.
    log: Log,
    /// Whether it is stopped with SIGTERM (instead of SIGKILL) when dropped.
    terminate_on_drop: bool,
}

impl Agent {
    /// Agent `node` in a new home, not started: write its config ([`Agent::home`], status on
    /// [`Agent::socket`]), then [`Agent::spawn`] it.
    pub fn new(node: &str) -> Agent {
        Agent {
            node: node.to_owned(),
            home: Home::new(),
            daemon: None,
            log: Log::default(),
            terminate_on_drop: false,
        }
    }

    /// Starts agent `node` of `setup` with `env` added to its environment (such as
    /// [`faketime`]'s).
    pub fn start(setup: &Setup<'_>, node: &str, env: &[(String, String)]) -> Agent {
        let mut agent = Agent::new(node);
        let mut config = agent.config_head(&setup.cluster);
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
        agent.home.write_config(&config);
        agent.spawn(env);
        agent
    }

    /// The start of its config: `[agent]`, `[status]` on [`Agent::socket`], and `[cluster]`
    /// with `cluster` (the lines besides `node`) and its node; the jobs follow.
    pub fn config_head(&self, cluster: &str) -> String {
        format!(
            "[agent]\nstate_dir = \"{}\"\nshutdown_timeout = \"2s\"\n\n[status]\nlisten = \
             \"{}\"\n\n[cluster]\n{cluster}\nnode = \"{}\"\n",
            self.home.state_dir().display(),
            self.socket().display(),
            self.node
        )
    }

    /// Stops it with SIGTERM (waiting for its shutdown) when dropped, instead of SIGKILL.
    pub fn terminate_on_drop(mut self) -> Agent {
        self.terminate_on_drop = true;
        if let Some(daemon) = self.daemon.take() {
            self.daemon = Some(daemon.terminate_on_drop());
        }
        self
    }

    /// The unix socket its config's `[status] listen` names.
    pub fn socket(&self) -> PathBuf {
        self.home.path("status.sock")
    }

    /// Starts the daemon on the config in its home, with `env` added to its environment; also
    /// again after [`Agent::kill`] (its log goes on in the same buffer).
    pub fn spawn(&mut self, env: &[(String, String)]) {
        assert!(self.daemon.is_none(), "agent {} already runs", self.node);
        let mut launch = Daemon::on(&self.home)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .log_into(&self.log);
        if self.terminate_on_drop {
            launch = launch.terminate_on_drop();
        }
        self.daemon = Some(launch.start());
    }

    /// Its log so far (JSON lines).
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// `method path` on its status endpoint (with the bearer `token`), answered within
    /// `timeout`: the status code and body; `None` while the endpoint does not answer.
    fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        timeout: Duration,
    ) -> Option<(u16, String)> {
        let endpoint = Endpoint::Unix(self.socket());
        let answer = endpoint.request(method, path, token, timeout).ok()?;
        Some((answer.status, answer.body))
    }

    /// `GET path` on its status endpoint, answered within 2 s.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        self.request("GET", path, None, Duration::from_secs(2))
    }

    /// The `message` of each of its JSON log lines so far, one per line.
    pub fn messages(&self) -> String {
        let message = |line: serde_json::Value| line["message"].as_str().map(str::to_owned);
        let messages: Vec<String> = self.log.json().into_iter().filter_map(message).collect();
        messages.join("\n")
    }

    /// Its `GET /status` document, once the endpoint answers (panics after 10 s).
    pub fn status(&self) -> serde_json::Value {
        let what = format!("the status endpoint of agent {}", self.node);
        let every = Duration::from_millis(100);
        crate::util::eventually_every(every, Duration::from_secs(10), &what, || {
            self.try_status().ok_or("no answer")
        })
    }

    /// Its `GET /status` document now, `None` while the endpoint does not answer.
    pub fn try_status(&self) -> Option<serde_json::Value> {
        match self.get("/status")? {
            (200, body) => Some(serde_json::from_str(&body).expect("status JSON")),
            _ => None,
        }
    }

    /// `cluster.role` of its `/status` now, `None` while the endpoint does not answer.
    pub fn role(&self) -> Option<String> {
        Some(self.try_status()?["cluster"]["role"].as_str()?.to_owned())
    }

    /// Its `/metrics` text.
    pub fn metrics(&self) -> String {
        match self.get("/metrics") {
            Some((200, body)) => body,
            other => panic!("/metrics of {}: {other:?}", self.node),
        }
    }

    /// Runs job `job` now (`POST /jobs/{job}/run` with the bearer `token`); asserts 202.
    pub fn trigger(&self, job: &str, token: &str) {
        let path = format!("/jobs/{job}/run");
        let answer = self.request("POST", &path, Some(token), Duration::from_secs(5));
        assert!(
            matches!(answer, Some((202, _))),
            "trigger {job} on {}: {answer:?}",
            self.node
        );
    }

    /// Whether it runs.
    pub fn alive(&mut self) -> bool {
        self.daemon.as_mut().is_some_and(Daemon::alive)
    }

    /// SIGTERM, and waits for its shutdown; its log stays readable.
    pub fn terminate(&mut self) {
        let mut daemon = self.daemon.take().expect("a running agent to stop");
        daemon.signal(nix::sys::signal::Signal::SIGTERM);
        daemon.exit_within(Duration::from_secs(10));
    }

    /// Sends `signal` to the running daemon (SIGSTOP, SIGCONT, ...), without waiting.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        self.daemon
            .as_ref()
            .expect("a running agent to signal")
            .signal(signal);
    }

    /// Waits at most `timeout` for the daemon to exit by itself (a refusal at start): its exit
    /// code (`None` for a signal); fails the test with the log when it still runs.
    pub fn exit_code_within(&mut self, timeout: Duration) -> Option<i32> {
        let mut daemon = self.daemon.take().expect("a started agent");
        daemon.exit_within(timeout).code()
    }

    /// `kill -9`: SIGKILL, and reaped; [`Agent::spawn`] may start it again.
    pub fn kill(&mut self) {
        self.daemon.take().expect("a running agent to kill").kill();
    }
}

impl Drop for Agent {
    /// The daemon stops before its home is removed.
    fn drop(&mut self) {
        drop(self.daemon.take());
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
