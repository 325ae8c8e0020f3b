//! `config check` against hostile input: a FIFO as the file (refused at once, not waited on),
//! an `output_tail` above the documented maximum, and `{exit_code}` outside a fail URL's path
//! and query, each named with file:line:col.

use std::time::{Duration, Instant};

use super::{assert_problem, config_check, Checked, JOB};
use crate::util::Home;

#[test]
fn a_fifo_as_the_config_is_refused_at_once() {
    let home = Home::new();
    let fifo = home.path("config.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let path = fifo.to_str().expect("utf-8 path").to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Instant::now();
    // In a thread, so a check that waits on the FIFO fails the test instead of hanging it.
    std::thread::spawn(move || {
        let _ = tx.send(config_check(&home, &["config", "check", "--config", &path]));
    });
    let checked: Checked = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("config check returned within 5 s");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(checked.code, 78, "{}", checked.stderr);
    assert_eq!(
        checked.stderr.lines().next(),
        Some(&*format!(
            "{}: cannot read the configuration file: it is a FIFO, not a regular file; make it a \
             regular file of at most 8 MiB",
            fifo.display()
        ))
    );
}

#[test]
fn an_output_tail_above_the_maximum_is_refused_with_its_place() {
    assert_problem(
        &format!("{JOB}command = [\"true\"]\noutput_tail = \"18446744073709551615\"\n"),
        "5:15: job \"backup\": key `output_tail`: output_tail of 18446744073709551615 bytes is \
         more than the most a job keeps, 1 MiB; hint: give at most \"1MiB\"; the default is \
         \"10KiB\"",
    );
    assert_problem(
        "[defaults]\noutput_tail = \"1025KiB\"\n",
        "2:15: [defaults]: key `output_tail`: output_tail of 1049600 bytes is more than the most \
         a job keeps, 1 MiB; hint: give at most \"1MiB\"; the default is \"10KiB\"",
    );
}

#[test]
fn exit_code_outside_a_fail_urls_path_or_query_is_refused_with_its_place() {
    for (url, part) in [
        ("http://127.0.0.1:1846{exit_code}/fail-tok", "host or port"),
        ("http://{exit_code}.example/fail-tok", "host or port"),
        ("https://hc-ping.com/fail-tok#{exit_code}", "fragment"),
    ] {
        assert_problem(
            &format!("{JOB}command = [\"true\"]\nfail_url = \"{url}\"\n"),
            &format!(
                "5:12: job \"backup\": key `fail_url`: {{exit_code}} is in the URL's {part}: \
                 filled in, the exit status would send the ping elsewhere; hint: put \
                 {{exit_code}} in the URL's path or query only, for example: \
                 https://hc-ping.com/UUID/{{exit_code}}"
            ),
        );
    }
}
