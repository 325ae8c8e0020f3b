//! The daemon's resident memory: what it asks of glibc's allocator so that it holds only the
//! heap it uses. Two mechanisms, each with its reason:
//!
//! - [`tune_malloc`]: two malloc arenas instead of up to eight per core, so memory freed by
//!   one runtime thread serves the others; and every allocation of 4 KiB or more in a mapping
//!   of its own, so that it goes back to the system whole when freed (see the function);
//! - [`release_free_memory`]: `malloc_trim(0)` after the config is parsed and after a burst of
//!   runs (when no run has been in progress for a second), so the heap does not stay at its
//!   peak.
//!
//! Both lower the daemon's private memory (its heap), which no other process shares; the
//! program's own code pages are left to the kernel.

/// Tunes glibc's malloc for the daemon. Call before any thread is started.
///
/// - Two arenas: by default each thread that allocates gets its own arena (up to 8 per core),
///   and memory freed in one cannot serve another: with the runtime's thread, the spawner
///   threads and the blocking pool all allocating around thousands of small job records, that
///   fragmentation is most of the resident size.
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
