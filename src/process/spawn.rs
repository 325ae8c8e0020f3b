//! Starting a [`CommandSpec`]'s process: `posix_spawn(3)` called directly where it can do
//! everything the spec asks, std's `Command` (fork, then work in the child before `exec`)
//! where it cannot.
//!
//! Why not std's `Command` (or tokio's, which wraps it) for every spawn: it copies the whole
//! environment into a map and back into a fresh array of C strings at every spawn that sets or
//! removes a variable (every job's does), opens `/dev/null` anew for each child's stdin, and
//! tokio's wrapper adds two `fcntl` per pipe. In a burst of 1,000 jobs that was about 130 of
//! the spawner threads' 850 `perf` samples, on top of the spawn itself (docs/dev/profiles,
//! BENCHMARKS.md). Here the environment the agent inherited, without its secrets, is turned
//! into C strings once; a spawn builds only its own variables and an array of pointers. The
//! child's stdin comes from one `/dev/null` descriptor kept open, and the pipes are made here.
//! Measured side by side against a build that spawns every job with std's `Command`
//! (`scripts/bench-burst.sh`, 7 interleaved rounds): the daemon's CPU per run 0.26 against
//! 0.30 ms, lower in 6 of 7 rounds; the burst's p99 within its noise (BENCHMARKS.md).
//!
//! The semantics are std's: the child leads a new process group, starts with an empty signal
//! mask and `SIGPIPE` at its default, gets the variables set on top of the inherited ones
//! (the last setting of a name wins, a setting beats a removal), and a program without `/` is
//! looked up in the agent's `PATH`; an executable file without `#!` (a script the kernel
//! refuses with "Exec format error") runs through `/bin/sh`, as execvp and every shell run it.
//! What `posix_spawn` cannot do goes to std's `Command`:
//! switching user (`setgroups`, `setgid`, `setuid` before `exec`), taking a terminal's
//! foreground, and a job whose own `env` sets `PATH` for a program without `/` (std looks it
//! up in the child's `PATH`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::OnceLock;

use super::child::Child;
use super::{tty, CommandSpec, Io, RunAs};

/// The child's standard streams as the parent prepared them.
struct Streams {
    /// The read ends kept by the parent (`None` where the stream is inherited).
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    /// The write ends handed to the child as its stdout and stderr (closed after the spawn).
    child_out: Option<OwnedFd>,
    child_err: Option<OwnedFd>,
    /// Whether the child's stdin is `/dev/null`.
    null_stdin: bool,
}

impl Streams {
    /// The streams of `io`. The child writes its stdout and stderr into one pipe where both
    /// go to the same place: the daemon's capture always, `run`'s copy ([`Io::Tee`]) when the
    /// agent's own stdout and stderr are the same file (a terminal, `>log 2>&1`, cron's mail
    /// pipe); then the output is read in the order the child wrote it, whatever the reader's
    /// pace. Two pipes keep each stream's own order only.
    fn for_io(io: Io) -> io::Result<Streams> {
        let piped = !matches!(io, Io::Inherit);
        let merged = match io {
            Io::Inherit => false,
            Io::Capture { .. } => true,
            Io::Tee { .. } => same_target(),
        };
        let (stdout, child_out) = if piped { pipe()? } else { (None, None) };
        let (stderr, child_err) = match &child_out {
            Some(write) if merged => (None, Some(write.try_clone()?)),
            _ if piped => pipe()?,
            _ => (None, None),
        };
        Ok(Streams {
            stdout,
            stderr,
            child_out,
            child_err,
            null_stdin: matches!(io, Io::Capture { .. }),
        })
    }
}

/// Whether the agent's own stdout and stderr are the same file (device and inode).
fn same_target() -> bool {
    let id = |fd| {
        nix::sys::stat::fstat(fd)
            .ok()
            .map(|stat| (stat.st_dev, stat.st_ino))
    };
    let (out, err) = (id(libc::STDOUT_FILENO), id(libc::STDERR_FILENO));
    out.is_some() && out == err
}

/// A pipe: (read end, write end), both close-on-exec.
fn pipe() -> io::Result<(Option<OwnedFd>, Option<OwnedFd>)> {
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((Some(read), Some(write)))
}

/// Starts `spec` in a new process group; returns the child and, when it takes the terminal's
/// foreground, the parent's half of that hand-over. Must be called inside a tokio runtime.
pub(super) fn start(spec: &CommandSpec) -> io::Result<(Child, Option<tty::Pending>)> {
    let mut streams = Streams::for_io(spec.io)?;
    let foreground = match spec.io {
        Io::Inherit | Io::Tee { .. } => tty::Pending::detect(),
        Io::Capture { .. } => None,
    };
    let path_lookup_in_child = !spec.program.as_bytes().contains(&b'/')
        && spec.env_set.iter().any(|(key, _)| key == "PATH");
    // A descriptor handed to the child below 3 (the agent started with a standard stream
    // closed) could be overwritten by the child's own dup2 calls: std's Command handles that.
    let null_stdin = streams.null_stdin.then(dev_null).flatten();
    let low_fd = [&streams.child_out, &streams.child_err]
        .into_iter()
        .flatten()
        .map(AsRawFd::as_raw_fd)
        .chain(null_stdin)
        .any(|fd| fd < 3);
    let pid = if spec.run_as.is_some() || foreground.is_some() || path_lookup_in_child || low_fd {
        with_std(spec, &mut streams, foreground.as_ref())?
    } else {
        with_posix_spawn(spec, &streams)?
    };
    // The child holds its own copies of the write ends now.
    drop(streams.child_out.take());
    drop(streams.child_err.take());
    let child = Child::new(pid, streams.stdout.take(), streams.stderr.take())?;
    Ok((child, foreground))
}

/// The spawn by std's `Command`, for what `posix_spawn` cannot do.
fn with_std(
    spec: &CommandSpec,
    streams: &mut Streams,
    foreground: Option<&tty::Pending>,
) -> io::Result<libc::pid_t> {
    let mut cmd = std::process::Command::new(&spec.program);
    cmd.args(&spec.args).process_group(0);
    for key in inherited_secrets().iter().chain(&spec.env_remove) {
        cmd.env_remove(key);
    }
    for (key, value) in &spec.env_set {
        cmd.env(key, value);
    }
    if let Some(dir) = &spec.working_dir {
        cmd.current_dir(dir);
    }
    if let Some(run_as) = spec.run_as.clone() {
        switch_user(&mut cmd, run_as);
    }
    if let Some(foreground) = foreground {
        foreground.arm(&mut cmd);
    }
    cmd.stdin(if streams.null_stdin {
        Stdio::null()
    } else {
        Stdio::inherit()
    });
    cmd.stdout(
        streams
            .child_out
            .take()
            .map_or_else(Stdio::inherit, Stdio::from),
    );
    cmd.stderr(
        streams
            .child_err
            .take()
            .map_or_else(Stdio::inherit, Stdio::from),
    );
    let child = cmd.spawn()?;
    // Dropping std's handle neither kills nor reaps the child; it is [`Child`]'s from here.
    libc::pid_t::try_from(child.id()).map_err(|_| io::Error::other("pid out of range"))
}

/// Makes the child drop to `run_as` before exec: supplementary groups, then the group, then the
/// user (in that order: after `setuid` the others are no longer allowed).
fn switch_user(cmd: &mut std::process::Command, run_as: RunAs) {
    let groups: Vec<libc::gid_t> = run_as.groups.clone();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system
    // calls on data prepared before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(run_as.gid) != 0
                || libc::setuid(run_as.uid) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The spawn by `posix_spawn(3)` (`posix_spawnp` for a program without `/`).
fn with_posix_spawn(spec: &CommandSpec, streams: &Streams) -> io::Result<libc::pid_t> {
    let program = c_string(&spec.program)?;
    let args = spec
        .args
        .iter()
        .map(|arg| c_string(arg))
        .collect::<io::Result<Vec<_>>>()?;
    let argv: Vec<*const libc::c_char> = std::iter::once(program.as_ptr())
        .chain(args.iter().map(|arg| arg.as_ptr()))
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let own = spec
        .env_set
        .iter()
        .map(|(key, value)| {
            let mut entry = Vec::with_capacity(key.len() + value.len() + 1);
            entry.extend_from_slice(key.as_bytes());
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            CString::new(entry).map_err(|_| nul_error())
        })
        .collect::<io::Result<Vec<_>>>()?;
    let envp = environment(spec, &own);
    let dir = spec
        .working_dir
        .as_deref()
        .map(|d| c_string(d.as_os_str()))
        .transpose()?;

    let mut actions = FileActions::new()?;
    if streams.null_stdin {
        match dev_null() {
            Some(null) => actions.dup2(null, 0)?,
            None => actions.open_null(0)?,
        }
    }
    if let Some(out) = &streams.child_out {
        actions.dup2(out.as_raw_fd(), 1)?;
    }
    if let Some(err) = &streams.child_err {
        actions.dup2(err.as_raw_fd(), 2)?;
    }
    if let Some(dir) = &dir {
        actions.chdir(dir)?;
    }
    let attrs = Attributes::new()?;

    let spawn = |path: &CString, argv: &[*const libc::c_char], lookup: bool| {
        let mut pid: libc::pid_t = 0;
        let spawn = if lookup {
            libc::posix_spawnp
        } else {
            libc::posix_spawn
        };
        // SAFETY: every pointer is valid for the call: the C strings and the null-terminated
        // arrays of pointers to them live until it returns, the actions and attributes were
        // initialised above and are destroyed after it.
        let code = unsafe {
            spawn(
                &mut pid,
                path.as_ptr(),
                &actions.0,
                &attrs.0,
                argv.as_ptr().cast(),
                envp.as_ptr().cast(),
            )
        };
        match code {
            0 => Ok(pid),
            code => Err(io::Error::from_raw_os_error(code)),
        }
    };
    let lookup = !spec.program.as_bytes().contains(&b'/');
    match spawn(&program, &argv, lookup) {
        Err(err) if err.raw_os_error() == Some(libc::ENOEXEC) => {
            // A script without `#!`: run by the shell, as std's `Command` (execvp) does.
            let script = match lookup {
                true => in_path(&spec.program).ok_or(err)?,
                false => program.clone(),
            };
            let shell = c_string(OsStr::new(SHELL))?;
            let argv: Vec<*const libc::c_char> = [shell.as_ptr(), script.as_ptr()]
                .into_iter()
                .chain(args.iter().map(|arg| arg.as_ptr()))
                .chain(std::iter::once(std::ptr::null()))
                .collect();
            spawn(&shell, &argv, false)
        }
        result => result,
    }
}

/// The shell that runs an executable file without `#!` (execvp's, and every shell's, rule).
const SHELL: &str = "/bin/sh";

/// The first executable file named `name` in the agent's `PATH`, as `posix_spawnp` finds it.
fn in_path(name: &OsStr) -> Option<CString> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .filter_map(|file| c_string(file.as_os_str()).ok())
        // SAFETY: `file` is a valid C string for the call.
        .find(|file| unsafe { libc::access(file.as_ptr(), libc::X_OK) } == 0)
}

/// The child's environment: the inherited variables without the agent's secrets, without
/// those `spec` removes and those it sets, then the ones it sets (`own`, in `env_set`'s
/// order: the last of a name wins); null-terminated.
fn environment(spec: &CommandSpec, own: &[CString]) -> Vec<*const libc::c_char> {
    let name =
        |entry: &[u8]| -> usize { entry.iter().position(|&b| b == b'=').unwrap_or(entry.len()) };
    let set = |key: &[u8]| spec.env_set.iter().any(|(k, _)| k.as_bytes() == key);
    let removed = |key: &[u8]| spec.env_remove.iter().any(|k| k.as_bytes() == key);
    let base = inherited();
    let mut envp = Vec::with_capacity(base.len() + own.len() + 1);
    for entry in base {
        let bytes = entry.as_bytes();
        let key = &bytes[..name(bytes)];
        if !set(key) && !removed(key) {
            envp.push(entry.as_ptr());
        }
    }
    for (i, entry) in own.iter().enumerate() {
        let key = &spec.env_set[i].0;
        let overridden = spec.env_set[i + 1..].iter().any(|(k, _)| k == key);
        if !overridden {
            envp.push(entry.as_ptr());
        }
    }
    envp.push(std::ptr::null());
    envp
}

/// The environment the agent started with, as `NAME=value` C strings, without its secrets
/// ([`super::SECRET_ENV`], `WATCHDOG_*`): read once, since the agent never changes its
/// environment.
fn inherited() -> &'static [CString] {
    // One per process: the process environment, read once.
    static INHERITED: OnceLock<Vec<CString>> = OnceLock::new();
    INHERITED.get_or_init(|| {
        std::env::vars_os()
            .filter(|(key, _)| !super::is_secret(key))
            .filter_map(|(key, value)| {
                let mut entry = std::os::unix::ffi::OsStringExt::into_vec(key);
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                CString::new(entry).ok()
            })
            .collect()
    })
}

/// The agent's own variables that no child may see ([`super::SECRET_ENV`], `WATCHDOG_*`), for
/// std's `Command`, read from its environment once.
fn inherited_secrets() -> &'static [OsString] {
    // One per process: the process environment's secret names, read once.
    static SECRETS: OnceLock<Vec<OsString>> = OnceLock::new();
    SECRETS.get_or_init(|| {
        std::env::vars_os()
            .map(|(key, _)| key)
            .filter(|key| super::is_secret(key))
            .collect()
    })
}

/// `/dev/null`, opened once for reading and kept (close-on-exec; each child gets a copy as its
/// stdin); `None` if it cannot be opened, and each child opens it itself then.
fn dev_null() -> Option<RawFd> {
    // One per process: one descriptor of /dev/null serves every spawn.
    static NULL: OnceLock<Option<OwnedFd>> = OnceLock::new();
    NULL.get_or_init(|| std::fs::File::open("/dev/null").ok().map(OwnedFd::from))
        .as_ref()
        .map(AsRawFd::as_raw_fd)
}

fn c_string(text: &OsStr) -> io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| nul_error())
}

/// What std says of a program, argument or variable holding a NUL byte.
fn nul_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "nul byte found in provided data",
    )
}

/// `posix_spawn_file_actions_t`, destroyed when dropped.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: init fills the zeroed structure; it is destroyed in Drop.
        unsafe {
            let mut actions = FileActions(std::mem::zeroed());
            check(libc::posix_spawn_file_actions_init(&mut actions.0))?;
            Ok(actions)
        }
    }

    fn dup2(&mut self, from: RawFd, to: RawFd) -> io::Result<()> {
        // SAFETY: `self.0` was initialised by `new` and is borrowed mutably for the call; the
        // descriptors are plain integers that glibc records in the actions.
        check(unsafe { libc::posix_spawn_file_actions_adddup2(&mut self.0, from, to) })
    }

    fn open_null(&mut self, to: RawFd) -> io::Result<()> {
        // SAFETY: `self.0` was initialised by `new` and is borrowed mutably for the call; the
        // path is a NUL-terminated static string, which glibc copies.
        check(unsafe {
            libc::posix_spawn_file_actions_addopen(
                &mut self.0,
                to,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            )
        })
    }

    fn chdir(&mut self, dir: &CString) -> io::Result<()> {
        // SAFETY: `self.0` was initialised by `new` and is borrowed mutably for the call; `dir`
        // is a valid C string, which glibc copies.
        check(unsafe { libc::posix_spawn_file_actions_addchdir_np(&mut self.0, dir.as_ptr()) })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in new().
        unsafe {
            libc::posix_spawn_file_actions_destroy(&mut self.0);
        }
    }
}

/// `posix_spawnattr_t` set as std sets it: a new process group, an empty signal mask,
/// `SIGPIPE` at its default (the agent ignores it, and an ignored signal stays ignored across
/// `exec`).
struct Attributes(libc::posix_spawnattr_t);

impl Attributes {
    fn new() -> io::Result<Attributes> {
        // SAFETY: init fills the zeroed structure (destroyed in Drop); the signal sets are
        // locals initialised by sigemptyset before use.
        unsafe {
            let mut attrs = Attributes(std::mem::zeroed());
            check(libc::posix_spawnattr_init(&mut attrs.0))?;
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            check(libc::posix_spawnattr_setsigmask(&mut attrs.0, &mask))?;
            let mut default: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut default);
            libc::sigaddset(&mut default, libc::SIGPIPE);
            check(libc::posix_spawnattr_setsigdefault(&mut attrs.0, &default))?;
            check(libc::posix_spawnattr_setpgroup(&mut attrs.0, 0))?;
            let flags = libc::POSIX_SPAWN_SETPGROUP
                | libc::POSIX_SPAWN_SETSIGMASK
                | libc::POSIX_SPAWN_SETSIGDEF;
            check(libc::posix_spawnattr_setflags(
                &mut attrs.0,
                i16::try_from(flags).unwrap_or_default(),
            ))?;
            Ok(attrs)
        }
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in new().
        unsafe {
            libc::posix_spawnattr_destroy(&mut self.0);
        }
    }
}

/// A posix_spawn function's return value as a result.
fn check(code: libc::c_int) -> io::Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(set: &[(&str, &str)], remove: &[&str]) -> CommandSpec {
        let mut spec = CommandSpec::from_argv(&["true"]).expect("argv");
        spec.env_set = set
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        spec.env_remove = remove.iter().map(|k| (*k).into()).collect();
        spec
    }

    fn entries(spec: &CommandSpec) -> Vec<String> {
        let own: Vec<CString> = spec
            .env_set
            .iter()
            .map(|(k, v)| {
                CString::new(format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                    .expect("no nul")
            })
            .collect();
        let envp = environment(spec, &own);
        assert!(envp.last().is_some_and(|p| p.is_null()));
        envp[..envp.len() - 1]
            .iter()
            .map(|&p| {
                // SAFETY: every pointer but the last points to one of `own`'s or the inherited
                // environment's C strings, which outlive this call.
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    #[test]
    fn the_environment_is_the_inherited_one_with_the_specs_changes() {
        let inherited: Vec<String> = inherited()
            .iter()
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        let path = inherited
            .iter()
            .find(|e| e.starts_with("PATH="))
            .expect("tests run with PATH set")
            .clone();
        let got = entries(&spec(
            &[("A_NEW", "1"), ("A_NEW", "2"), ("PATH", "/x")],
            &["HOME"],
        ));
        assert!(got.contains(&"A_NEW=2".to_owned()), "{got:?}");
        assert!(!got.contains(&"A_NEW=1".to_owned()), "{got:?}");
        assert!(got.contains(&"PATH=/x".to_owned()), "{got:?}");
        assert!(!got.contains(&path), "{got:?}");
        assert!(!got.iter().any(|e| e.starts_with("HOME=")), "{got:?}");
        // A removal does not undo a setting of the same name.
        let got = entries(&spec(&[("SOME_VAR", "kept")], &["SOME_VAR"]));
        assert!(got.contains(&"SOME_VAR=kept".to_owned()), "{got:?}");
        assert_eq!(
            got.len(),
            inherited.len() + 1 - usize::from(inherited.iter().any(|e| e.starts_with("SOME_VAR=")))
        );
    }
}
