//! Probes of the local machine: `process` (sysinfo's process table), `file` (stat), `disk`
//! (statvfs), `memory` (`/proc/meminfo`) and `load` (`/proc/loadavg`).

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sysinfo::{ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};

use super::{human_bytes, human_number, Probe};
use crate::config::Amount;
use crate::duration::human_duration;

/// `process`: some running process other than the agent itself has `pattern` in its name or in
/// its command line (arguments joined by spaces). Blocking: reads `/proc`.
pub(super) fn process(system: &Mutex<System>, pattern: &str) -> Probe {
    // A panic while holding the lock leaves a table that is merely stale: refreshing fixes it.
    let mut system = system
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Only the command line is asked for (the name and state come with every refresh). It is
    // re-read each time: an `exec` changes it while the pid stays the same.
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_cmd(UpdateKind::Always),
    );
    let own = std::process::id();
    let found = system.processes().values().find(|process| {
        process.pid().as_u32() != own
            && process.thread_kind().is_none()
            && process.status() != ProcessStatus::Zombie
            && matches(process.name(), process.cmd(), pattern)
    });
    match found {
        Some(process) => Probe::healthy(format!(
            "process {pattern:?}: running as pid {} ({})",
            process.pid(),
            process.name().to_string_lossy()
        )),
        None => Probe::unhealthy(format!(
            "process {pattern:?}: no running process has it in its name or command line"
        )),
    }
}

/// Whether `pattern` occurs in the process name or its space-joined command line.
fn matches(name: &OsStr, cmd: &[std::ffi::OsString], pattern: &str) -> bool {
    if name.to_string_lossy().contains(pattern) {
        return true;
    }
    let line: Vec<_> = cmd.iter().map(|arg| arg.to_string_lossy()).collect();
    line.join(" ").contains(pattern)
}

/// `file`: `path` exists and was modified at most `max_age` ago. A modification time in the
/// future (clock skew) counts as just now. Blocking: a stat.
pub(super) fn file(path: &Path, max_age: Duration) -> Probe {
    let shown = path.display();
    let modified = match std::fs::metadata(path).and_then(|meta| meta.modified()) {
        Ok(modified) => modified,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Probe::unhealthy(format!("file {shown}: missing"));
        }
        Err(err) => return Probe::unhealthy(format!("file {shown}: cannot stat: {err}")),
    };
    let age = SystemTime::now()
        .duration_since(modified)
        .unwrap_or(Duration::ZERO);
    // Whole seconds read better and are what `max_age` is written in.
    let shown_age = human_duration(Duration::from_secs(age.as_secs()));
    Probe::check(
        age <= max_age,
        format!(
            "file {shown}: modified {shown_age} ago, at most {} allowed",
            human_duration(max_age)
        ),
    )
}

/// `disk`: free space on the file system holding `path`, as available to unprivileged users
/// (`f_bavail`: the blocks reserved for root do not count), is at least `min_free`. A
/// percentage is of the file system's size. Blocking: a statvfs.
// The statvfs fields are `c_ulong`/`fsblkcnt_t`: u64 here, u32 on some 32-bit targets.
#[allow(clippy::useless_conversion)]
pub(super) fn disk(path: &Path, min_free: Amount) -> Probe {
    let shown = path.display();
    let stat = match nix::sys::statvfs::statvfs(path) {
        Ok(stat) => stat,
        Err(err) => return Probe::unhealthy(format!("disk {shown}: cannot statvfs: {err}")),
    };
    let unit = u64::from(stat.fragment_size());
    let free = u64::from(stat.blocks_available()).saturating_mul(unit);
    let total = u64::from(stat.blocks()).saturating_mul(unit);
    let free_percent = if total == 0 {
        0.0
    } else {
        free as f64 * 100.0 / total as f64
    };
    let (ok, need) = match min_free {
        Amount::Bytes(bytes) => (free >= bytes, human_bytes(bytes)),
        Amount::Percent(percent) => (free_percent >= percent, format!("{percent}%")),
    };
    Probe::check(
        ok,
        format!(
            "disk {shown}: {} free ({free_percent:.1}% of {}), need at least {need}",
            human_bytes(free),
            human_bytes(total)
        ),
    )
}

/// `memory`: the share of memory in use, `MemTotal - MemAvailable`, is at most
/// `max_used_percent`.
pub(super) fn memory(max_used_percent: f64) -> Probe {
    let text = match std::fs::read_to_string("/proc/meminfo") {
        Ok(text) => text,
        Err(err) => return Probe::unhealthy(format!("memory: cannot read /proc/meminfo: {err}")),
    };
    let Some((total, available)) = parse_meminfo(&text) else {
        return Probe::unhealthy("memory: /proc/meminfo has no MemTotal or MemAvailable");
    };
    let used = total.saturating_sub(available);
    let used_percent = used as f64 * 100.0 / total.max(1) as f64;
    Probe::check(
        used_percent <= max_used_percent,
        format!(
            "memory: {used_percent:.1}% used ({} of {}), at most {}% allowed",
            human_bytes(used),
            human_bytes(total),
            human_number(max_used_percent)
        ),
    )
}

/// `(MemTotal, MemAvailable)` in bytes from the text of `/proc/meminfo`.
fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    };
    Some((field("MemTotal")?, field("MemAvailable")?))
}

/// `load`: the 1-minute load average is at most `max_load1`.
pub(super) fn load(max_load1: f64) -> Probe {
    let text = match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => text,
        Err(err) => return Probe::unhealthy(format!("load: cannot read /proc/loadavg: {err}")),
    };
    let Some(load1) = parse_loadavg(&text) else {
        return Probe::unhealthy(format!(
            "load: cannot parse /proc/loadavg: {:?}",
            text.trim()
        ));
    };
    Probe::check(
        load1 <= max_load1,
        format!(
            "load: 1-minute average {load1:.2}, at most {} allowed",
            human_number(max_load1)
        ),
    )
}

/// The 1-minute load average: the first field of `/proc/loadavg`.
fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields_are_read_in_bytes() {
        let text = "MemTotal:        8000 kB\nMemFree:  100 kB\nMemAvailable:    2000 kB\n";
        assert_eq!(parse_meminfo(text), Some((8000 * 1024, 2000 * 1024)));
        assert_eq!(parse_meminfo("MemTotal: 8000 kB\n"), None);
    }

    #[test]
    fn loadavg_first_field() {
        assert_eq!(parse_loadavg("0.52 0.40 0.33 1/234 5678\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn pattern_matches_name_or_command_line() {
        let cmd = ["sleep".into(), "30".into()];
        assert!(matches(OsStr::new("sleep"), &cmd, "slee"));
        assert!(matches(OsStr::new("x"), &cmd, "sleep 30"));
        assert!(!matches(OsStr::new("x"), &cmd, "sleep 31"));
    }
}
