//! The daemon's resident memory: what it asks of glibc's allocator and of the kernel so that
//! it holds only what it uses. Three mechanisms, each with its reason:
//!
//! - [`tune_malloc`]: two malloc arenas instead of up to eight per core, so memory freed by
//!   one runtime thread serves the others; and every allocation of 4 KiB or more in a mapping
//!   of its own, so that it goes back to the system whole when freed (see the function);
//! - [`release_free_memory`]: `malloc_trim(0)` after the config is parsed and after a burst of
//!   runs (when no run has been in progress for a second), so the heap does not stay at its
//!   peak;
//! - [`release_start_up_code`]: once after start-up and once after each reload, at the first
//!   quiet moment (when no run has been in progress for a second, as the trim), the pages of the
//!   binary and its libraries that are mapped but identical to their files are unmapped. Not at
//!   once: everything the daemon then runs faults its code back in, and right after start that
//!   made the first health probes under a flood of slow clients miss their 1 s deadline
//!   (`status::local_users::slow_clients_that_keep_coming_back_do_not_starve_health_probes`
//!   failed 2 runs in 3 with the release at start, passed 3 in 3 without it). Every first
//!   touch of a page of code maps the 64 KiB around it (the kernel's fault-around), so parsing
//!   the config, the command line and the TLS setup leave 6-8 MiB of code mapped that the
//!   running daemon never executes again: with 10 jobs every 5 s, 8.4 MiB of the 9.6 MiB
//!   resident were file pages and 0.7 MiB heap. What the daemon runs afterwards is mapped again
//!   at its first touch (a minor fault; the pages stay in the page cache, nothing is read from
//!   disk), and `packaging/link/daemon.order` keeps that steady path's code together.
//!
//! Only a mapping that is not writable and holds no private page is unmapped: its pages are
//! exactly the file's, so dropping them loses nothing. A page written into a read-only mapping
//! (a debugger's breakpoint, a uprobe) is private, and its whole mapping is left alone.

/// Tunes glibc's malloc for the daemon. Call before any thread is started.
///
/// - Two arenas: by default each thread that allocates gets its own arena (up to 8 per core),
///   and memory freed in one cannot serve another: with a multi-threaded runtime and thousands
///   of small job records that fragmentation is most of the resident size.
/// - Blocks of 4 KiB or more are mapped on their own (`M_MMAP_THRESHOLD`, instead of glibc's
///   sliding 128 KiB-32 MiB), and the heap's top is given back above 128 KiB free
///   (`M_TRIM_THRESHOLD`). Each run's task is a block of about 4.4 KB; on the heap, a burst of
///   1,000 runs left those blocks freed between the small records that outlive a run (each
///   job's last record, about 150 B), so whole pages stayed resident around a few live bytes
///   and `malloc_trim` could not return them. Mapped on their own, they go back to the system
///   when the run ends. Measured side by side (`scripts/bench-daemon-pair.sh A B 3`,
///   medians): after 1,000 jobs each ran once 8.78 -> 7.68 MiB, 100 jobs every 5 s while they
///   run 5.82 -> 5.19 MiB, 10 jobs every 5 s 4.23 -> 4.18 MiB. The price, an mmap and a munmap per such block (a few per run), did
///   not show in the burst's start delays (`scripts/bench-burst.sh`).
pub(crate) fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4096);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
    }
}

/// Hands freed heap memory back to the system. Parsing a large config allocates far more than
/// the validated model keeps; without this the daemon's resident size would stay at that peak.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns unused pages of glibc's heap to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether start-up or a reload left code to release at the next quiet moment.
static CODE_RELEASE_PENDING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Asks for [`release_start_up_code`] at the next quiet moment
/// ([`release_pending_start_up_code`], called when no run has been in progress for a second).
pub(crate) fn release_start_up_code_when_quiet() {
    CODE_RELEASE_PENDING.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Releases start-up's code if start-up or a reload asked for it since the last release.
pub(crate) fn release_pending_start_up_code() {
    if CODE_RELEASE_PENDING.swap(false, std::sync::atomic::Ordering::Relaxed) {
        release_start_up_code();
    }
}

/// Unmaps the pages of code and read-only data that start-up touched and that are identical to
/// their files (see the module header); returns how many bytes of mappings were released.
/// Best effort: on any error nothing more is done.
pub(crate) fn release_start_up_code() -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        clean_file_mappings(&smaps)
            .into_iter()
            .filter(|&(start, end)| {
                // SAFETY: the range is a read-only private file mapping without a private
                // page: every page is the file's own, so MADV_DONTNEED only unmaps it and the
                // next access maps the same bytes again. Nothing is written through it.
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) == 0
                }
            })
            .map(|(start, end)| end - start)
            .sum()
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// The address ranges of `/proc/self/smaps` mappings that are backed by a file, private, not
/// writable, with pages resident and none of them private (`Anonymous: 0 kB`).
fn clean_file_mappings(smaps: &str) -> Vec<(usize, usize)> {
    struct Mapping {
        range: (usize, usize),
        eligible: bool,
        resident: bool,
        anonymous: bool,
    }
    let mut found = Vec::new();
    let mut current: Option<Mapping> = None;
    let finish = |m: Option<Mapping>, found: &mut Vec<(usize, usize)>| {
        if let Some(m) = m.filter(|m| m.eligible && m.resident && !m.anonymous) {
            found.push(m.range);
        }
    };
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, end)) = first.split_once('-').and_then(|(s, e)| {
            Some((
                usize::from_str_radix(s, 16).ok()?,
                usize::from_str_radix(e, 16).ok()?,
            ))
        }) {
            // "start-end perms offset dev inode path"
            finish(current.take(), &mut found);
            let perms = fields.next().unwrap_or("");
            let inode = fields.nth(2).unwrap_or("0");
            let path = fields.next().unwrap_or("");
            let eligible = perms.len() == 4
                && perms.starts_with('r')
                && &perms[1..2] == "-"
                && perms.ends_with('p')
                && inode != "0"
                && path.starts_with('/');
            current = Some(Mapping {
                range: (start, end),
                eligible,
                resident: false,
                anonymous: false,
            });
        } else if let Some(m) = current.as_mut() {
            let kib = fields
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            match first {
                "Rss:" => m.resident = kib > 0,
                "Anonymous:" => m.anonymous = kib > 0,
                _ => {}
            }
        }
    }
    finish(current.take(), &mut found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
00200000-00389000 r--p 00000000 fe:00 10363000                           /usr/bin/heartbeat-agent
Size:               1572 kB
Rss:                 768 kB
Anonymous:             0 kB
00389000-00b0d000 r-xp 00188000 fe:00 10363000                           /usr/bin/heartbeat-agent
Size:               7696 kB
Rss:                5960 kB
Anonymous:             0 kB
00b0d000-00c39000 r--p 0090b000 fe:00 10363000                           /usr/bin/heartbeat-agent
Size:               1200 kB
Rss:                 304 kB
Anonymous:             8 kB
00c39000-00c3c000 rw-p 00a36000 fe:00 10363000                           /usr/bin/heartbeat-agent
Size:                 12 kB
Rss:                  12 kB
Anonymous:            12 kB
1fafb000-1fb3c000 rw-p 00000000 00:00 0                                  [heap]
Size:                260 kB
Rss:                 232 kB
Anonymous:           232 kB
7fa66bf6b000-7fa66c0c1000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1368 kB
Rss:                 852 kB
Anonymous:             0 kB
7fa66c114000-7fa66c118000 r--p 001cf000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:                 16 kB
Rss:                  16 kB
Anonymous:            16 kB
7fa66c118000-7fa66c11a000 r--p 001d3000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
Size:                  8 kB
Rss:                   0 kB
Anonymous:             0 kB
7fa66c238000-7fa66c23a000 r-xp 00000000 00:00 0                          [vdso]
Size:                  8 kB
Rss:                   4 kB
Anonymous:             0 kB
7fa66c300000-7fa66c301000 r--s 00000000 fe:00 5555                       /dev/shm/segment
Size:                  4 kB
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_private_file_mappings_are_released() {
        assert_eq!(
            clean_file_mappings(SMAPS),
            vec![
                (0x0020_0000, 0x0038_9000),
                (0x0038_9000, 0x00b0_d000),
                (0x7fa6_6bf6_b000, 0x7fa6_6c0c_1000),
            ],
            "the relocated read-only data (private pages), the writable data, the heap, the \
             vdso, a shared mapping and a mapping with nothing resident are kept"
        );
    }

    #[test]
    fn releasing_keeps_the_process_working_and_lowers_its_file_pages() {
        let rss_file = || {
            std::fs::read_to_string("/proc/self/status")
                .expect("procfs")
                .lines()
                .find_map(|l| l.strip_prefix("RssFile:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .expect("RssFile in /proc/self/status")
        };
        let before = rss_file();
        let released = release_start_up_code();
        let after = rss_file();
        assert!(released > 0, "nothing was released");
        assert!(
            after < before,
            "RssFile {before} kB before, {after} kB after"
        );
        // The code and data that were unmapped are mapped again on use.
        let text = format!("{:?}", (1..100).map(|i| i * 7).collect::<Vec<u64>>());
        assert!(text.contains("693"));
    }
}
