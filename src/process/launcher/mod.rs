//! The launcher: a small helper process, forked when the daemon starts (before its runtime and
//! its config exist), that forks and execs the daemon's job processes on its behalf.
//!
//! Why: when many jobs are due in the same second, starting them one by one from the daemon
//! is slow, for two reasons measured on a small VM (BENCHMARKS.md, issue 4). `posix_spawn`
//! (what std uses) returns only once the child has exec'd, and the child competes for the CPU
//! with every job already running, so each start waits for the others; and a plain `fork` of
//! the daemon copies its page tables, which grow with its memory. The helper is single-threaded
//! and small, forks in a fraction of the time, and does not wait for the exec: it reports the
//! child's pid at once and its exit later. A child that cannot exec (or chdir, or switch user)
//! reports the failed step itself and exits with 127; the run is then recorded as not started.
//!
//! The children are the helper's, so their exit statuses come back over the socket; the
//! daemon signals their process groups directly, as before. Only captured-output runs use it;
//! whenever the helper cannot take a run (it is gone, or the request is too large) the daemon
//! starts the process itself ([`super::spawn`]).

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{socketpair, AddressFamily, MsgFlags, SockFlag, SockType};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;
use tokio::sync::oneshot;
use tracing::warn;

use super::{classify, is_removed, tail, CommandSpec, Io, Running, SpawnError};

mod helper;
mod wire;

use wire::{Reply, Request, Stage, MAX_REQUEST, REPLY_LEN};

/// The daemon's handle on its helper process.
#[derive(Debug)]
pub struct Launcher {
    helper: Pid,
    /// The daemon's end of the socket until the first spawn attaches it to the runtime.
    unattached: Mutex<Option<OwnedFd>>,
    link: OnceLock<Option<Arc<Link>>>,
}

/// How a launched child ended, as the helper reported it.
#[derive(Debug)]
pub(super) struct Exit {
    /// The raw wait status.
    status: i32,
    /// The step that failed before exec, with its errno (the child then exited with 127).
    failed: Option<(Stage, i32)>,
}

impl Exit {
    /// The raw wait status, and why the child never ran `program` if it failed before exec.
    pub(super) fn into_parts(self, program: String) -> (i32, Option<SpawnError>) {
        (self.status, self.failed.map(|f| failure(program, f)))
    }
}

/// A request's answer: the child's pid, when it was forked and where its exit will come; or
/// `fork`'s errno.
type Started = Result<(i32, SystemTime, oneshot::Receiver<Exit>), i32>;

#[derive(Debug)]
struct Link {
    sock: AsyncFd<OwnedFd>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Requests waiting for their `Started` (or `ForkFailed`).
    starts: HashMap<u64, oneshot::Sender<Started>>,
    /// Running children waiting for their `Exited`.
    exits: HashMap<i32, oneshot::Sender<Exit>>,
    /// `ExecFailed` reports waiting for their child's `Exited`.
    failures: HashMap<i32, (Stage, i32)>,
    /// The helper is gone: the daemon starts processes itself from now on.
    dead: bool,
}

impl Launcher {
    /// Forks the helper. Call it early, while the process is single-threaded and small: the
    /// helper keeps what the process had then.
    pub fn start() -> io::Result<Launcher> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        // SAFETY: called while single-threaded (documented); the child only runs the helper's
        // loop and never returns.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                drop(ours);
                helper::serve(theirs)
            }
            pid => {
                drop(theirs);
                Ok(Launcher {
                    helper: Pid::from_raw(pid),
                    unattached: Mutex::new(Some(ours)),
                    link: OnceLock::new(),
                })
            }
        }
    }

    /// The helper's pid.
    pub fn helper_pid(&self) -> u32 {
        u32::try_from(self.helper.as_raw()).unwrap_or_default()
    }

    /// Starts `spec` through the helper. `None` when the helper cannot take it (it is gone,
    /// the output is not captured, or the request is too large): start it directly then.
    /// Must be called inside a tokio runtime.
    pub async fn spawn(&self, spec: &CommandSpec) -> Option<Result<Running, SpawnError>> {
        let Io::Capture { tail_bytes } = spec.io else {
            return None;
        };
        let link = self.link()?;
        let program = spec.program_display();
        let request = match request(spec) {
            Ok(request) => request,
            Err(err) => return Some(Err(err)),
        };
        let pipes = match Pipes::new() {
            Ok(pipes) => pipes,
            Err(source) => return Some(Err(SpawnError::Other { program, source })),
        };
        let started = link.send(request, &pipes.theirs()).await?;
        drop(pipes.child_ends);
        match started.await {
            Ok(Ok((pid, spawned_at, exit))) => {
                let capture = tail::Capture::from_pipes(
                    Some(pipes.stdout),
                    Some(pipes.stderr),
                    tail_bytes,
                    spec.output_lines.clone(),
                );
                Some(Ok(Running {
                    child: super::Child::Launched { exit, program },
                    pid: Pid::from_raw(pid),
                    spawned_at,
                    tail: Some(capture),
                    terminal: None,
                }))
            }
            Ok(Err(errno)) => Some(Err(SpawnError::Other {
                program,
                source: io::Error::from_raw_os_error(errno),
            })),
            // The helper went away before it answered.
            Err(_) => None,
        }
    }

    /// The attached link, `None` once the helper is gone.
    fn link(&self) -> Option<Arc<Link>> {
        let link = self.link.get_or_init(|| {
            let fd = lock(&self.unattached).take()?;
            Link::attach(fd)
                .map_err(|err| warn!(error = %err, "cannot use the job launcher; jobs are started directly"))
                .ok()
        });
        link.as_ref()
            .filter(|link| !lock(&link.state).dead)
            .map(Arc::clone)
    }
}

impl Link {
    fn attach(fd: OwnedFd) -> io::Result<Arc<Link>> {
        // SAFETY: fcntl on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the OwnedFd is moved into the AsyncFd and stays open, unchanged, as long
        // as it lives.
        let sock = unsafe { AsyncFd::register(fd) }?;
        let link = Arc::new(Link {
            sock,
            state: Mutex::default(),
        });
        tokio::spawn(read_replies(Arc::clone(&link)));
        Ok(link)
    }

    /// Sends `request` with `fds`; the receiver of its `Started`, or `None` when the helper
    /// cannot take it.
    async fn send(
        &self,
        mut request: Request,
        fds: &[i32; 3],
    ) -> Option<oneshot::Receiver<Started>> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut state = lock(&self.state);
            state.next_id += 1;
            let id = state.next_id;
            state.starts.insert(id, tx);
            id
        };
        request.id = id;
        let bytes = request.encode();
        let sent = if bytes.len() > MAX_REQUEST {
            Err(io::Error::from_raw_os_error(libc::EMSGSIZE))
        } else {
            loop {
                let Ok(mut guard) = self.sock.writable().await else {
                    break Err(io::Error::other("the launcher socket failed"));
                };
                match guard.try_io(|fd| Ok(wire::send(fd.get_ref().as_fd(), &bytes, fds)?)) {
                    Ok(result) => break result,
                    Err(_would_block) => continue,
                }
            }
        };
        if let Err(err) = sent {
            lock(&self.state).starts.remove(&id);
            if err.raw_os_error() != Some(libc::EMSGSIZE) {
                warn!(error = %err, "the job launcher cannot be reached; jobs are started directly");
                self.gone();
            }
            return None;
        }
        Some(rx)
    }

    /// Files a reply under the request or child it belongs to.
    fn dispatch(&self, reply: Reply) {
        let mut state = lock(&self.state);
        match reply {
            Reply::Started { id, pid, at } => {
                let (tx, rx) = oneshot::channel();
                state.exits.insert(pid, tx);
                let at = u64::try_from(at)
                    .map_or(UNIX_EPOCH, |nanos| UNIX_EPOCH + Duration::from_nanos(nanos));
                if let Some(start) = state.starts.remove(&id) {
                    let _ = start.send(Ok((pid, at, rx)));
                }
            }
            Reply::ForkFailed { id, errno } => {
                if let Some(start) = state.starts.remove(&id) {
                    let _ = start.send(Err(errno));
                }
            }
            Reply::ExecFailed { pid, stage, errno } => {
                state.failures.insert(pid, (stage, errno));
            }
            Reply::Exited { pid, status } => {
                let failed = state.failures.remove(&pid);
                if let Some(exit) = state.exits.remove(&pid) {
                    let _ = exit.send(Exit { status, failed });
                }
            }
        }
    }

    /// The helper is gone: waiting spawns and runs learn it (their channels close).
    fn gone(&self) {
        let mut state = lock(&self.state);
        state.dead = true;
        state.starts.clear();
        state.exits.clear();
        state.failures.clear();
    }
}

/// Reads the helper's replies until its end closes.
async fn read_replies(link: Arc<Link>) {
    let mut buf = [0u8; REPLY_LEN];
    loop {
        let Ok(mut guard) = link.sock.readable().await else {
            break;
        };
        let received = guard.try_io(|fd| {
            Ok(wire::receive(
                fd.get_ref().as_fd(),
                &mut buf,
                MsgFlags::MSG_DONTWAIT,
            )?)
        });
        match received {
            Err(_would_block) => continue,
            Ok(Ok((0, _))) => break,
            Ok(Ok((len, _))) => {
                if let Some(reply) = Reply::decode(&buf[..len]) {
                    link.dispatch(reply);
                }
            }
            Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(_)) => break,
        }
    }
    warn!("the job launcher exited; jobs are started directly from now on");
    link.gone();
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The pipes of one launched child: the daemon's read ends, and the child's ends (stdin from
/// `/dev/null`, stdout, stderr) that go to the helper.
struct Pipes {
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
    child_ends: [OwnedFd; 3],
}

impl Pipes {
    fn new() -> io::Result<Pipes> {
        let null = std::fs::File::open("/dev/null")?;
        let (out_read, out_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (err_read, err_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Pipes {
            stdout: pipe::Receiver::from_owned_fd(out_read)?,
            stderr: pipe::Receiver::from_owned_fd(err_read)?,
            child_ends: [null.into(), out_write, err_write],
        })
    }

    fn theirs(&self) -> [i32; 3] {
        self.child_ends.each_ref().map(AsRawFd::as_raw_fd)
    }
}

/// The request for `spec` (id set when sent): the program looked up in `PATH` as `execvp`
/// would, the complete environment, the working directory and the user.
fn request(spec: &CommandSpec) -> Result<Request, SpawnError> {
    let program = spec.program_display();
    let invalid = |what: &str| SpawnError::Other {
        program: program.clone(),
        source: io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        ),
    };
    let c = |s: &OsStr, what: &str| CString::new(s.as_bytes()).map_err(|_| invalid(what));
    let env = environment(spec);
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let path = resolve(&spec.program, path_var, spec.working_dir.as_deref())
        .map_err(|source| classify(program.clone(), source))?;
    let argv = std::iter::once(&spec.program)
        .chain(&spec.args)
        .map(|arg| c(arg, "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    let envp = env
        .into_iter()
        .map(|(k, v)| {
            let mut pair = k.into_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            CString::new(pair).map_err(|_| invalid("the environment"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = match &spec.working_dir {
        Some(dir) => Some(c(dir.as_os_str(), "the working directory")?),
        None => None,
    };
    Ok(Request {
        id: 0,
        path: c(path.as_os_str(), "the program")?,
        argv,
        envp,
        cwd,
        run_as: spec
            .run_as
            .as_ref()
            .map(|r| (r.uid, r.gid, r.groups.clone())),
    })
}

/// The child's environment: the daemon's, without the removed variables, with `env_set` on top.
fn environment(spec: &CommandSpec) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(key, _)| {
            !is_removed(key, &spec.env_remove) && !spec.env_set.iter().any(|(k, _)| k == key)
        })
        .collect();
    env.extend(spec.env_set.iter().cloned());
    env
}

/// Where `execvp` would find `program`: as given when it contains a slash, else the first
/// executable file of that name in `path_var` (default `/bin:/usr/bin`, as glibc). Relative paths are
/// taken from `cwd`, where the child will be. The error is the one `execvp` would give.
fn resolve(program: &OsStr, path_var: Option<&OsStr>, cwd: Option<&Path>) -> io::Result<PathBuf> {
    let from_cwd = |p: PathBuf| match cwd {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p,
    };
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let search = path_var.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut denied = None;
    for dir in std::env::split_paths(search) {
        let candidate = from_cwd(dir.join(program));
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() => {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o111 != 0 {
                    return Ok(candidate);
                }
                denied = Some(io::Error::from_raw_os_error(libc::EACCES));
            }
            _ => {}
        }
    }
    Err(denied.unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOENT)))
}

/// The message for a child that failed before it could exec.
fn failure(program: String, (stage, errno): (Stage, i32)) -> SpawnError {
    let source = io::Error::from_raw_os_error(errno);
    match stage {
        Stage::Exec => classify(program, source),
        Stage::Chdir => SpawnError::Other {
            program,
            source: io::Error::new(
                source.kind(),
                format!("cannot change to the working directory: {source}"),
            ),
        },
        Stage::User => SpawnError::Other {
            program,
            source: io::Error::new(
                source.kind(),
                format!("cannot switch user and group: {source}"),
            ),
        },
        Stage::Setup => SpawnError::Other { program, source },
    }
}

#[cfg(test)]
mod tests;
