//! Absurd output sizes: an `output_tail` above the documented maximum stops the daemon at
//! start (exit 78, file:line:col), and a job that prints 200 MB with the largest tail allowed
//! leaves the daemon's peak resident size tens of MiB, not hundreds: the tail is a bounded
//! ring whatever the job prints.

use super::*;

#[test]
fn an_output_tail_above_the_maximum_stops_the_daemon_at_start() {
    let home = Home::new();
    home.write_jobs(
        "[[jobs]]\nname = \"loud\"\nschedule = \"@reboot\"\ncommand = [\"true\"]\n\
         output_tail = \"18446744073709551615\"\n",
    );
    let mut daemon = home.start();
    let status = daemon.exit_within(10 * SECOND);
    assert_eq!(status.code(), Some(78), "{}", daemon.text());
    let line = format!(
        "{}:9:15: job \"loud\": key `output_tail`: output_tail of 18446744073709551615 bytes is \
         more than the most a job keeps, 1 MiB",
        home.config_path().display()
    );
    assert!(daemon.text().contains(&line), "{}", daemon.text());
}

#[test]
fn a_job_printing_200_mb_leaves_the_daemon_small() {
    let home = Home::new();
    let server = ping_server();
    home.write_jobs(&format!(
        "[[jobs]]\nname = \"loud\"\nschedule = \"@reboot\"\n\
         shell = \"head -c 209715200 /dev/zero | tr '\\\\0' x; echo; echo the-end\"\n\
         output_tail = \"1MiB\"\nping_url = \"{}\"\n",
        server.url("/loud")
    ));
    // Only warnings are logged: the job's output lines would otherwise be 200 MB of log.
    let daemon = home.start_with(&[("HEARTBEAT_AGENT_LOG", "warn")]);
    wait_hits(&server, "/loud", 1, 120 * SECOND);
    let peak = crate::util::peak_kib(daemon.pid());
    eprintln!("the daemon's peak resident size after a job printed 200 MB: {peak} KiB");
    assert!(
        peak < 48 * 1024,
        "the daemon's peak resident size is {peak} KiB"
    );
    daemon.stop();
}
