//! `run --job NAME` with a real configuration file: the job's command, ping target, success
//! codes and timeout come from the config; an unknown job is a warning, never a lost run.

use std::time::Duration;

use super::{output, stderr, Env, TOKEN};
use crate::util::http::{FakeServer, Mode};

fn write_config(env: &Env, jobs: &str) -> String {
    let path = env.path("config.toml");
    std::fs::write(&path, jobs).expect("write config");
    path.to_str().expect("utf8 path").to_owned()
}

#[test]
fn job_without_command_runs_its_configured_command_and_pings() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let marker = env.path("ran");
    let config = write_config(
        &env,
        &format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\ncommand = [\"touch\", \"{}\"]\nping_url = \"{}\"\n",
            marker.display(),
            server.url(&format!("/{TOKEN}")),
        ),
    );
    let out = output(env.run(&["--config", &config, "--job", "backup"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(marker.exists(), "the configured command did not run");
    let pings = server.wait_for(1, Duration::from_secs(5));
    assert_eq!(pings.len(), 1);
    assert_eq!(pings[0].target, format!("/{TOKEN}"));
}

#[test]
fn shell_job_runs_through_its_shell_program_with_the_job_name_in_env() {
    let env = Env::new();
    let out_file = env.path("out");
    let config = write_config(
        &env,
        &format!(
            "[[jobs]]\nname = \"report\"\nschedule = \"@hourly\"\nshell_program = \"/bin/sh\"\nshell = \"echo $HEARTBEAT_AGENT_JOB > {}\"\n",
            out_file.display()
        ),
    );
    let out = output(env.run(&["--config", &config, "--job", "report"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = std::fs::read_to_string(&out_file).expect("the shell job wrote its file");
    assert_eq!(written.trim(), "report");
}

#[test]
fn job_success_exit_codes_decide_the_ping() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let config = write_config(
        &env,
        &format!(
            "[[jobs]]\nname = \"sync\"\nschedule = \"@daily\"\nsuccess_exit_codes = [0, 3]\nping_url = \"{}\"\n",
            server.url(&format!("/{TOKEN}")),
        ),
    );
    let out = output(env.run(&[
        "--config", &config, "--job", "sync", "--", "sh", "-c", "exit 3",
    ]));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(server.wait_for(1, Duration::from_secs(5)).len(), 1);
}

#[test]
fn job_timeout_from_the_config_applies() {
    let env = Env::new();
    let config = write_config(
        &env,
        "[[jobs]]\nname = \"slow\"\nschedule = \"@daily\"\ntimeout = \"1s\"\nkill_after = \"1s\"\ncommand = [\"sleep\", \"30\"]\n",
    );
    let started = std::time::Instant::now();
    let out = output(env.run(&["--config", &config, "--job", "slow"]));
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn unknown_job_is_a_warning_and_the_command_still_runs() {
    let env = Env::new();
    let server = FakeServer::start(Mode::Status(200));
    let config = write_config(
        &env,
        &format!(
            "[[jobs]]\nname = \"backup\"\nschedule = \"@daily\"\nping_url = \"{}\"\n",
            server.url(&format!("/{TOKEN}")),
        ),
    );
    let out = output(env.run(&[
        "--config", &config, "--job", "bakup", "--", "sh", "-c", "echo ran",
    ]));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"ran\n");
    let err = stderr(&out);
    assert!(err.contains("job \"bakup\" is not in"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        server.requests().is_empty(),
        "an unknown job must not ping another job's check"
    );
}
