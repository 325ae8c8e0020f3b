//! Handing the controlling terminal's foreground to the child's process group and back, so an
//! interactive command wrapped by `run` can read the terminal and get ^C, as under a shell.
//!
//! Both sides call `tcsetpgrp` (the child before exec, the parent after spawn), as job-control
//! shells do, so the child never reads the terminal while still in the background. SIGTTOU is
//! ignored around each call: a background process changing the foreground would otherwise stop.

use nix::unistd::Pid;

/// The terminal on stdin while the child holds its foreground; gives it back when dropped.
#[derive(Debug)]
pub(super) struct Foreground {
    /// The group that had the foreground before (the wrapper's own).
    previous: libc::pid_t,
}

/// The terminal hand-over: the child's half ([`Pending::arm`]) and the parent's
/// ([`Pending::hand_to`]).
#[derive(Debug)]
pub(super) struct Pending {
    previous: libc::pid_t,
}

impl Pending {
    /// When stdin is a terminal whose foreground group is ours, the hand-over the child must
    /// make before it execs ([`Pending::arm`]). Returns `None` (nothing to do) otherwise.
    pub(super) fn detect() -> Option<Pending> {
        // SAFETY: plain queries of our own process and fd 0.
        let (is_tty, ours, foreground) = unsafe {
            (
                libc::isatty(libc::STDIN_FILENO) == 1,
                libc::getpgrp(),
                libc::tcgetpgrp(libc::STDIN_FILENO),
            )
        };
        if !is_tty || foreground != ours {
            return None;
        }
        Some(Pending { previous: ours })
    }

    /// Makes the child take the terminal's foreground before it execs.
    pub(super) fn arm(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: runs in the forked child before exec and only calls async-signal-safe
        // functions (setpgid, signal, tcsetpgrp, getpgrp).
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                set_foreground(libc::getpgrp());
                Ok(())
            });
        }
    }

    /// The parent's half: puts the child's group in the foreground (whichever side runs first).
    pub(super) fn hand_to(self, child: Pid) -> Foreground {
        // SAFETY: setpgid on our own child; failure (it already exec'd) is harmless since the
        // child set its own group.
        unsafe {
            libc::setpgid(child.as_raw(), child.as_raw());
        }
        set_foreground(child.as_raw());
        Foreground {
            previous: self.previous,
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        set_foreground(self.previous);
    }
}

/// `tcsetpgrp(0, group)` with SIGTTOU ignored for the duration of the call.
fn set_foreground(group: libc::pid_t) {
    // SAFETY: signal() and tcsetpgrp() are async-signal-safe; the old disposition is restored.
    unsafe {
        let old = libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        libc::tcsetpgrp(libc::STDIN_FILENO, group);
        libc::signal(libc::SIGTTOU, old);
    }
}
