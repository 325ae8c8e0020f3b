//! Spawning and supervising child processes: own process group, signal forwarding, timeouts
//! (SIGTERM to the group, then SIGKILL), exit status as code or signal, environment hygiene.
//!
//! Used by `run` (one command, stdio inherited, or passed through by a copy that keeps a
//! bounded tail) and by the daemon (many jobs, output captured into a bounded tail). The flow
//! is [`spawn`] a [`CommandSpec`] (`posix_spawn` or std's `Command`, see [`self::spawn`]; the
//! child is waited for on its pidfd, see [`child`]), then [`Running::supervise`] it with
//! [`Limits`] and a channel of [`ChildControl`] messages; the result is a [`ChildOutcome`] whose
//! [`RunEnd`] says who ended the run and keeps an exit code and a terminating signal apart. A
//! command that cannot start is a [`SpawnError`], which is a [`RunEnd`] too.
//!
//! Nothing here knows about the wrapper's own signals: the caller turns received signals into
//! [`ChildControl::Forward`], and reads its status off the [`RunEnd`]
//! ([`crate::run_end::RunEnd::exit_status`]).

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use nix::unistd::Pid;

mod child;
pub(crate) mod children;
pub(crate) mod lock;
mod proc_stat;
mod spawn;
mod supervise;
mod tail;
mod tee;
mod tty;

use crate::run_end::RunEnd;
pub(crate) use supervise::{ChildControl, ChildOutcome, ChildRequests, Limits};
pub(crate) use tail::{LineSink, Tail};

/// Environment variables that carry the agent's own secrets or its service-manager channel,
/// removed from every child's environment (variables starting with `WATCHDOG_` go too).
pub(crate) const SECRET_ENV: &[&str] = &[
    "HEARTBEAT_AGENT_API_KEY",
    "HEARTBEAT_AGENT_PING_URL",
    "NOTIFY_SOCKET",
    "CREDENTIALS_DIRECTORY",
];

/// The variable naming the job a child runs for (set when the job is known).
pub(crate) const JOB_ENV: &str = "HEARTBEAT_AGENT_JOB";

/// The variable holding the scheduled time (Unix seconds, before jitter) of the fire a daemon
/// job's child runs for: the fire's slot, the same on every agent of a cluster.
pub(crate) const SCHEDULED_ENV: &str = "HEARTBEAT_AGENT_SCHEDULED";

/// The variable holding the run's id (a UUID, new for each run; `{run_id}` in the job's URLs).
pub(crate) const RUN_ID_ENV: &str = "HEARTBEAT_AGENT_RUN_ID";

/// The variable naming the cluster node (`[cluster] node`) that runs a daemon job's child.
pub(crate) const NODE_ENV: &str = "HEARTBEAT_AGENT_NODE";

/// The variable naming the heartbeat check a child reports to (set when known).
pub(crate) const CHECK_ENV: &str = "HEARTBEAT_AGENT_CHECK_ID";

/// What to run and how.
#[derive(Debug, Clone)]
pub(crate) struct CommandSpec {
    /// The program: a path, or a name looked up in `PATH` (no shell is involved).
    pub program: OsString,
    /// Its arguments, without the program.
    pub args: Vec<OsString>,
    /// Variables to set on top of the inherited environment (`HEARTBEAT_AGENT_JOB`, a job's
    /// `env` table).
    pub env_set: Vec<(OsString, OsString)>,
    /// Variables to remove from the inherited environment, in addition to [`SECRET_ENV`] and
    /// `WATCHDOG_*` (the config's `api_key_env` and `[cluster] password_env`).
    pub env_remove: Vec<OsString>,
    /// The working directory; `None` keeps the caller's.
    pub working_dir: Option<PathBuf>,
    /// Where stdin, stdout and stderr go.
    pub io: Io,
    /// With [`Io::Capture`]: also hand each line of output to this sink as it arrives (the
    /// daemon logs it with the job's name).
    pub output_lines: Option<LineSink>,
    /// Run as this user and group (the daemon's `user`/`group`, when it runs as root).
    pub run_as: Option<RunAs>,
}

/// Credentials a child switches to before it executes the program, resolved by the caller
/// (looking up names is not allowed between fork and exec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunAs {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// Supplementary groups (the user's groups, as `initgroups(3)` would set them).
    pub groups: Vec<u32>,
}

/// Where a child's standard streams go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Io {
    /// Inherited untouched (byte-exact), as `run` needs. When stdin is the controlling terminal
    /// and the caller is in its foreground, the child's group becomes the foreground group for
    /// the run, so interactive commands work.
    Inherit,
    /// stdin from `/dev/null`; stdout and stderr one pipe (so the output keeps the order it
    /// was written in) read by the supervisor, keeping only the last `tail_bytes` bytes, as
    /// the daemon needs.
    Capture {
        /// How many bytes of the most recent output to keep.
        tail_bytes: usize,
    },
    /// stdin inherited as with [`Io::Inherit`]; stdout and stderr passed through to the
    /// caller's own, byte for byte, by a copy that keeps the last `tail_bytes` bytes of both
    /// (`run` for a job whose fail ping carries the output). The command's stdout and stderr
    /// are pipes then, not the terminal: one pipe copied to the caller's stdout when the
    /// caller's stdout and stderr are the same file (the order kept), else one each.
    Tee {
        /// How many bytes of the most recent output to keep.
        tail_bytes: usize,
    },
}

impl CommandSpec {
    /// A spec for `argv` (program first) with inherited stdio and no extra environment.
    ///
    /// Returns `None` when `argv` is empty or the program is the empty string.
    pub(crate) fn from_argv<S: Into<OsString> + Clone>(argv: &[S]) -> Option<CommandSpec> {
        let (program, args) = argv.split_first()?;
        let program: OsString = program.clone().into();
        if program.is_empty() {
            return None;
        }
        Some(CommandSpec {
            program,
            args: args.iter().cloned().map(Into::into).collect(),
            env_set: Vec::new(),
            env_remove: Vec::new(),
            working_dir: None,
            io: Io::Inherit,
            output_lines: None,
            run_as: None,
        })
    }

    /// The program as text, for messages.
    pub(crate) fn program_display(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    /// No such program (in `PATH`, or at the given path). Shells report 127.
    #[error("{program}: command not found")]
    NotFound {
        /// The program as given.
        program: String,
    },
    /// It exists but cannot be executed (permissions, not a valid executable, a directory).
    /// Shells report 126.
    #[error("{program}: cannot execute: {source}")]
    CannotExecute {
        /// The program as given.
        program: String,
        /// What exec said.
        source: io::Error,
    },
    /// Anything else (too many processes, a bad working directory, ...).
    #[error("{program}: cannot start: {source}")]
    Other {
        /// The program as given.
        program: String,
        /// What the system said.
        source: io::Error,
    },
}

impl From<&SpawnError> for RunEnd {
    fn from(err: &SpawnError) -> RunEnd {
        RunEnd::NotStarted {
            reason: err.to_string(),
            missing: matches!(err, SpawnError::NotFound { .. }),
        }
    }
}

/// A started child in its own process group (its pid is the group id).
#[derive(Debug)]
pub(crate) struct Running {
    child: child::Child,
    pid: Pid,
    tail: Option<tail::Capture>,
    tee: Option<tee::Tee>,
    terminal: Option<tty::Foreground>,
}

impl Running {
    /// The child's pid, which is also its process group id.
    pub(crate) fn pid(&self) -> u32 {
        u32::try_from(self.pid.as_raw()).unwrap_or_default()
    }
}

/// Makes the processes the calling thread starts from now on begin at the default scheduling
/// priority (`SCHED_RESET_ON_FORK`): a daemon given a higher one (`Nice=-5` in a systemd
/// drop-in, say) keeps it for itself, and the jobs run at the priority they would have under
/// cron. Threads
/// created by the calling thread reset too, so call it on each thread once it exists. Without a
/// raised priority it changes nothing; it cannot fail in a way that matters (errors ignored).
pub(crate) fn children_at_default_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: applies to the calling thread only, with a valid parameter; SCHED_OTHER keeps the
    // thread's nice value, the flag only affects its future children.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, &param);
    }
}

/// Starts `spec` in a new process group with a cleaned environment (see [`spawn`'s
/// module](self::spawn) for how).
///
/// Must be called inside a tokio runtime. The child is not killed when the [`Running`] is
/// dropped: supervise it to the end.
pub(crate) fn spawn(spec: &CommandSpec) -> Result<Running, SpawnError> {
    let (mut child, foreground) =
        spawn::start(spec).map_err(|source| classify(spec.program_display(), source))?;
    let pid = Pid::from_raw(child.pid());
    let terminal = foreground.map(|f| f.hand_to(pid));
    let tail = match spec.io {
        Io::Capture { tail_bytes } => Some(tail::Capture::start(
            &mut child,
            tail_bytes,
            spec.output_lines.clone(),
        )),
        Io::Inherit | Io::Tee { .. } => None,
    };
    let tee = match spec.io {
        Io::Tee { tail_bytes } => Some(tee::Tee::start(&mut child, tail_bytes)),
        Io::Inherit | Io::Capture { .. } => None,
    };
    Ok(Running {
        child,
        pid,
        tail,
        tee,
        terminal,
    })
}

fn is_secret(key: &std::ffi::OsStr) -> bool {
    let text = key.to_string_lossy();
    SECRET_ENV.contains(&text.as_ref()) || text.starts_with("WATCHDOG_")
}

fn classify(program: String, source: io::Error) -> SpawnError {
    match source.raw_os_error() {
        Some(libc::ENOENT) => SpawnError::NotFound { program },
        Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::ENOTDIR | libc::ETXTBSY) => {
            SpawnError::CannotExecute { program, source }
        }
        _ if source.kind() == io::ErrorKind::NotFound => SpawnError::NotFound { program },
        _ if source.kind() == io::ErrorKind::PermissionDenied => {
            SpawnError::CannotExecute { program, source }
        }
        _ => SpawnError::Other { program, source },
    }
}

/// How long to wait for a capture pipe to close after the child ended (a background grandchild
/// may hold it open forever).
const PIPE_GRACE: Duration = Duration::from_millis(200);

#[cfg(test)]
mod tests;
