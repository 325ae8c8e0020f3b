//! `/proc/PID/stat`, read for the few fields the supervisor and the orphan reaper need: a
//! process's state, its parent and its process group. The name field (`comm`, in parentheses)
//! may hold spaces and parentheses itself, so the fields are counted from the last `)`.

/// The fields of one `/proc/PID/stat` that the agent reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    /// The state letter: `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group.
    pub pgrp: i32,
}

impl Stat {
    /// Parses the text of `/proc/PID/stat` ("pid (comm) state ppid pgrp ..."); `None` when it
    /// does not have that shape.
    pub fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let mut state = fields.next()?.chars();
        let (Some(state), None) = (state.next(), state.next()) else {
            return None;
        };
        let ppid = fields.next()?.parse().ok()?;
        let pgrp = fields.next()?.parse().ok()?;
        Some(Stat { state, ppid, pgrp })
    }

    /// Whether the process has ended (a zombie waiting to be reaped, or dead).
    pub fn ended(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// The pids in `/proc` (its all-digit entries); an error when `/proc` cannot be read.
pub(super) fn pids() -> std::io::Result<impl Iterator<Item = i32>> {
    Ok(std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok()))
}

/// The stat of process `pid`; `None` when it is gone or unreadable.
pub(super) fn read(pid: i32) -> Option<Stat> {
    Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_past_odd_names() {
        let stat = |state, ppid, pgrp| Some(Stat { state, ppid, pgrp });
        assert_eq!(Stat::parse("12 (a b) c) S 1 40 40 0"), stat('S', 1, 40));
        assert_eq!(Stat::parse("12 (sh) Z 40 12 12 0"), stat('Z', 40, 12));
        assert_eq!(Stat::parse("garbage"), None);
        assert_eq!(Stat::parse("12 (sh) S 40"), None);
    }

    #[test]
    fn this_process_is_found_and_running() {
        let me = i32::try_from(std::process::id()).expect("a pid fits in i32");
        assert!(pids().expect("/proc is readable").any(|pid| pid == me));
        let stat = read(me).expect("our own stat");
        assert!(!stat.ended());
        assert_eq!(stat.pgrp, nix::unistd::getpgrp().as_raw());
    }
}
