//! How one run of a job ended, as one type from the process or probe to every reader.
//!
//! The supervisor ([`crate::process`]) and the watch probes ([`crate::watch`]) produce a
//! [`RunEnd`]; the daemon keeps it in the job's run record; the `/status` document, the
//! `heartbeat_agent_runs_total` metric and the exit status of `run` are all read off it here,
//! so a new way of ending is one variant and one place to decide what it means.
//!
//! [`ProcessEnd`] is the part a process itself reports: an exit code or a terminating signal,
//! kept apart because "exited 137" and "killed by SIGKILL" mean different things to a reader.

use nix::sys::signal::Signal;

use crate::exit;

/// How a process ended: a code it chose, or a signal that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessEnd {
    /// It called `exit(code)`.
    Exited(i32),
    /// A signal ended it.
    Signaled {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
}

impl ProcessEnd {
    /// The status a shell would report: the code, or 128 + the signal number, within 0..=255.
    pub(crate) fn shell_status(self) -> u8 {
        let status = match self {
            ProcessEnd::Exited(code) => code,
            ProcessEnd::Signaled { signal, .. } => 128 + signal,
        };
        u8::try_from(status & 0xff).unwrap_or(u8::MAX)
    }

    /// The exit code when it exited, `None` when a signal ended it.
    pub(crate) fn code(self) -> Option<i32> {
        match self {
            ProcessEnd::Exited(code) => Some(code),
            ProcessEnd::Signaled { .. } => None,
        }
    }

    /// The signal that ended it, `None` when it exited.
    pub(crate) fn signal(self) -> Option<i32> {
        match self {
            ProcessEnd::Exited(_) => None,
            ProcessEnd::Signaled { signal, .. } => Some(signal),
        }
    }

    /// What `wait` reported, as a [`ProcessEnd`].
    pub(crate) fn from_status(status: std::process::ExitStatus) -> ProcessEnd {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ProcessEnd::Exited(code),
            (None, Some(signal)) => ProcessEnd::Signaled {
                signal,
                core_dumped: status.core_dumped(),
            },
            // Stopped/continued are not reported by wait(); treat as a generic failure.
            (None, None) => ProcessEnd::Exited(1),
        }
    }
}

impl std::fmt::Display for ProcessEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ProcessEnd::Exited(code) => write!(f, "exited with code {code}"),
            ProcessEnd::Signaled { signal, .. } => match Signal::try_from(signal) {
                Ok(sig) => write!(f, "killed by {}", sig.as_str()),
                Err(_) => write!(f, "killed by signal {signal}"),
            },
        }
    }
}

/// How one run of a job (a command or a watch probe) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// The command ended by itself (possibly after a signal the wrapper forwarded to it).
    Ended(ProcessEnd),
    /// The command ran past its timeout and the supervisor ended it: SIGTERM to its group, then
    /// SIGKILL when it was still there after the grace (`killed`).
    TimedOut {
        /// How its process ended.
        end: ProcessEnd,
        /// Whether SIGKILL had to be sent.
        killed: bool,
    },
    /// The daemon's shutdown stopped the run.
    Stopped {
        /// How the command's process ended; `None` for a watch probe abandoned before it had
        /// an answer.
        end: Option<ProcessEnd>,
        /// Whether SIGKILL had to be sent.
        killed: bool,
    },
    /// The run could not start: the program is missing or cannot be executed, the user is
    /// unknown, or the job runs elsewhere.
    NotStarted {
        /// Why, for the log and `/status`.
        reason: String,
        /// The program was not found (shells report 127 for that, 126 for the rest).
        missing: bool,
    },
    /// A watch was probed.
    Probed {
        /// Whether the condition held.
        healthy: bool,
        /// What was measured against which threshold.
        reason: String,
    },
}

/// What a run counts as: the `outcome` of `/status` (docs/status.md) and the `outcome` label of
/// `heartbeat_agent_runs_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum RunOutcome {
    /// The command exited with a success code, or the watch was healthy.
    Success,
    /// The command exited with a code that is not a success code.
    Failed,
    /// The command ran past its timeout.
    TimedOut,
    /// A signal the supervisor did not send ended the command.
    Signaled,
    /// The run could not start.
    NotStarted,
    /// The daemon's shutdown stopped the run.
    Stopped,
    /// The watch found its condition unhealthy.
    Unhealthy,
}

impl RunOutcome {
    /// Every outcome, in the order `/metrics` lists them.
    pub(crate) const ALL: [RunOutcome; 7] = [
        RunOutcome::Success,
        RunOutcome::Failed,
        RunOutcome::TimedOut,
        RunOutcome::Signaled,
        RunOutcome::NotStarted,
        RunOutcome::Stopped,
        RunOutcome::Unhealthy,
    ];

    /// The outcome named `name` (see [`RunOutcome::as_str`]).
    pub(crate) fn named(name: &str) -> Option<RunOutcome> {
        RunOutcome::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// The name in `/status` and in the metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Success => "success",
            RunOutcome::Failed => "failed",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::Signaled => "signaled",
            RunOutcome::NotStarted => "not_started",
            RunOutcome::Stopped => "stopped",
            RunOutcome::Unhealthy => "unhealthy",
        }
    }
}

impl RunEnd {
    /// What the run counts as, given the job's `success_exit_codes`.
    pub(crate) fn outcome(&self, success_codes: &[i32]) -> RunOutcome {
        match self {
            RunEnd::Ended(ProcessEnd::Exited(code)) if success_codes.contains(code) => {
                RunOutcome::Success
            }
            RunEnd::Ended(ProcessEnd::Exited(_)) => RunOutcome::Failed,
            RunEnd::Ended(ProcessEnd::Signaled { .. }) => RunOutcome::Signaled,
            RunEnd::TimedOut { .. } => RunOutcome::TimedOut,
            RunEnd::Stopped { .. } => RunOutcome::Stopped,
            RunEnd::NotStarted { .. } => RunOutcome::NotStarted,
            RunEnd::Probed { healthy: true, .. } => RunOutcome::Success,
            RunEnd::Probed { healthy: false, .. } => RunOutcome::Unhealthy,
        }
    }

    /// The status `run` exits with: the command's own status (its code, or 128 + the signal);
    /// 124 when it timed out and ended after SIGTERM, 137 when it had to be killed (as coreutils
    /// `timeout`); 127 when the program was not found and 126 when it could not be started (as
    /// shells). A probe gives 0 when healthy and 1 when not; a probe stopped before its answer,
    /// 128 + SIGTERM, as a shell reports a job ended by that signal.
    pub(crate) fn exit_status(&self) -> u8 {
        match self {
            RunEnd::Ended(end) => end.shell_status(),
            RunEnd::TimedOut { killed: false, .. } => exit::TIMED_OUT,
            RunEnd::TimedOut { killed: true, .. } => exit::KILLED,
            RunEnd::Stopped { end: Some(end), .. } => end.shell_status(),
            RunEnd::Stopped { end: None, .. } => 128 + Signal::SIGTERM as u8,
            RunEnd::NotStarted { missing: true, .. } => exit::NOT_FOUND,
            RunEnd::NotStarted { missing: false, .. } => exit::CANNOT_EXECUTE,
            RunEnd::Probed { healthy: true, .. } => exit::OK,
            RunEnd::Probed { healthy: false, .. } => exit::FAILURE,
        }
    }

    /// How the command's process ended, when a process ran to an end.
    pub(crate) fn process_end(&self) -> Option<ProcessEnd> {
        match self {
            RunEnd::Ended(end) | RunEnd::TimedOut { end, .. } => Some(*end),
            RunEnd::Stopped { end, .. } => *end,
            RunEnd::NotStarted { .. } | RunEnd::Probed { .. } => None,
        }
    }

    /// The command's exit code, when its process exited (rather than being ended by a signal).
    pub(crate) fn exit_code(&self) -> Option<i32> {
        self.process_end().and_then(ProcessEnd::code)
    }

    /// The signal that ended the command's process, if one did.
    pub(crate) fn signal(&self) -> Option<i32> {
        self.process_end().and_then(ProcessEnd::signal)
    }

    /// Whether it ran past its timeout.
    pub(crate) fn timed_out(&self) -> bool {
        matches!(self, RunEnd::TimedOut { .. })
    }

    /// Whether the daemon's shutdown stopped it.
    pub(crate) fn stopped(&self) -> bool {
        matches!(self, RunEnd::Stopped { .. })
    }

    /// Whether the supervisor had to send SIGKILL.
    pub(crate) fn killed(&self) -> bool {
        matches!(
            self,
            RunEnd::TimedOut { killed: true, .. } | RunEnd::Stopped { killed: true, .. }
        )
    }

    /// Why it could not start, what a watch probe measured, or that a probe was stopped before
    /// its answer; `None` for a command that ran.
    pub(crate) fn reason(&self) -> Option<&str> {
        match self {
            RunEnd::NotStarted { reason, .. } | RunEnd::Probed { reason, .. } => Some(reason),
            RunEnd::Stopped { end: None, .. } => Some("stopped by shutdown"),
            RunEnd::Ended(_) | RunEnd::TimedOut { .. } | RunEnd::Stopped { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGKILL: ProcessEnd = ProcessEnd::Signaled {
        signal: 9,
        core_dumped: false,
    };

    #[test]
    fn outcomes_are_the_documented_names() {
        let codes = [0, 3];
        let cases = [
            (RunEnd::Ended(ProcessEnd::Exited(0)), "success"),
            (RunEnd::Ended(ProcessEnd::Exited(3)), "success"),
            (RunEnd::Ended(ProcessEnd::Exited(1)), "failed"),
            (RunEnd::Ended(SIGKILL), "signaled"),
            (
                RunEnd::TimedOut {
                    end: ProcessEnd::Exited(0),
                    killed: false,
                },
                "timed_out",
            ),
            (
                RunEnd::Stopped {
                    end: None,
                    killed: false,
                },
                "stopped",
            ),
            (
                RunEnd::NotStarted {
                    reason: "x".into(),
                    missing: true,
                },
                "not_started",
            ),
            (
                RunEnd::Probed {
                    healthy: true,
                    reason: "ok".into(),
                },
                "success",
            ),
            (
                RunEnd::Probed {
                    healthy: false,
                    reason: "low".into(),
                },
                "unhealthy",
            ),
        ];
        for (end, name) in cases {
            assert_eq!(end.outcome(&codes).as_str(), name, "{end:?}");
        }
    }

    #[test]
    fn exit_status_is_the_shells_and_timeouts() {
        assert_eq!(RunEnd::Ended(ProcessEnd::Exited(3)).exit_status(), 3);
        assert_eq!(RunEnd::Ended(ProcessEnd::Exited(256 + 4)).exit_status(), 4);
        assert_eq!(RunEnd::Ended(SIGKILL).exit_status(), 137);
        let timed_out = |killed| RunEnd::TimedOut {
            end: SIGKILL,
            killed,
        };
        assert_eq!(timed_out(false).exit_status(), 124);
        assert_eq!(timed_out(true).exit_status(), 137);
        let term = ProcessEnd::Signaled {
            signal: 15,
            core_dumped: false,
        };
        let stopped = RunEnd::Stopped {
            end: Some(term),
            killed: false,
        };
        assert_eq!(stopped.exit_status(), 143);
        let not_started = |missing| RunEnd::NotStarted {
            reason: String::new(),
            missing,
        };
        assert_eq!(not_started(true).exit_status(), 127);
        assert_eq!(not_started(false).exit_status(), 126);
    }

    #[test]
    fn code_signal_and_reason_are_read_off_the_end() {
        let timed_out = RunEnd::TimedOut {
            end: SIGKILL,
            killed: true,
        };
        assert_eq!((timed_out.exit_code(), timed_out.signal()), (None, Some(9)));
        assert!(timed_out.timed_out() && timed_out.killed() && !timed_out.stopped());
        assert_eq!(timed_out.reason(), None);
        let abandoned = RunEnd::Stopped {
            end: None,
            killed: false,
        };
        assert!(abandoned.stopped() && !abandoned.timed_out());
        assert_eq!(abandoned.reason(), Some("stopped by shutdown"));
        assert_eq!((abandoned.exit_code(), abandoned.signal()), (None, None));
        let exited = RunEnd::Ended(ProcessEnd::Exited(2));
        assert_eq!((exited.exit_code(), exited.signal()), (Some(2), None));
    }
}
