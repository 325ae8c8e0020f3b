//! The standard `process_*` families of Prometheus clients, read from the kernel at scrape
//! time: CPU time from `getrusage`, resident and virtual size from `/proc/self/status`, open
//! descriptors from `/proc/self/fd`, the limit from `RLIMIT_NOFILE`; the start time is the
//! daemon's. A value that cannot be read is left out (its family stays, empty).

use super::Text;

/// The standard `process_*` families of Prometheus clients, read now.
pub(super) fn families(out: &mut Text, start_time: f64) {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok();
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    let cpu = usage.map(|u| seconds(u.user_time()) + seconds(u.system_time()));
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    // `VmRSS:     3912 kB`
    let kib = |key: &str| {
        let line = status.lines().find_map(|l| l.strip_prefix(key))?;
        let n: f64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(n * 1024.0)
    };
    let open = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as f64);
    let max = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .ok()
        .map(|(soft, _)| soft as f64);
    let families: [(&str, &str, &str, Option<f64>); 6] = [
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            cpu,
        ),
        (
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            kib("VmRSS:"),
        ),
        (
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            kib("VmSize:"),
        ),
        (
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            open,
        ),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        ),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            Some(start_time),
        ),
    ];
    for (name, kind, help, value) in families {
        out.family(name, kind, help);
        if let Some(value) = value {
            out.sample(name, &[], value);
        }
    }
}
