//! Unit tests of `run`'s planning: job commands, targets, environment, lock identity.

use super::*;
use crate::config::{ApiKeySource, JobAction, PingTarget};
use crate::schedule::Zone;

#[test]
fn lock_identity_never_shows_the_token() {
    let ping = Ping::new("http://h:1/tok-abcdef", PingMethod::Get, "s").expect("valid");
    let spec = CommandSpec::from_argv(&["true"]).expect("argv");
    let (key, what) = lock_identity(None, Some(&ping), &spec);
    assert!(!key.contains("tok-abcdef") && !what.contains("tok-abcdef"));
    assert!(key.starts_with("url-"), "{key}");
    let (key, what) = lock_identity(Some("a/b"), Some(&ping), &spec);
    assert!(key.starts_with("job-a_b-") && !key.contains('/'), "{key}");
    assert_eq!(what, "job \"a/b\"");
    let other = CommandSpec::from_argv(&["false"]).expect("argv");
    assert_ne!(
        lock_identity(None, None, &spec).0,
        lock_identity(None, None, &other).0
    );
}

fn args(argv: &[&str]) -> RunArgs {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(argv).expect("valid arguments");
    match cli.command {
        crate::cli::Command::Run(args) => args,
        other => panic!("not run: {other:?}"),
    }
}

fn job(action: JobAction, target: PingTarget) -> Job {
    Job {
        name: "nightly".to_owned(),
        schedule: crate::schedule::Schedule::parse("0 3 * * *").expect("valid schedule"),
        timezone: Zone::UTC,
        action,
        timeout: None,
        kill_after: Duration::from_secs(10),
        success_exit_codes: vec![0],
        overlap: crate::config::Overlap::Skip,
        jitter: Duration::ZERO,
        working_dir: Some(PathBuf::from("/tmp")),
        env: [("K".to_owned(), "v".to_owned())].into_iter().collect(),
        user: None,
        group: None,
        enabled: true,
        catch_up: false,
        run_on: crate::config::RunOn::One,
        output_tail: 1024,
        history: 100,
        retries: Default::default(),
        target,
        check: Default::default(),
        start_fail: Default::default(),
    }
}

#[test]
fn job_without_command_runs_its_configured_one() {
    let run = args(&["heartbeat-agent", "run", "--job", "nightly"]);
    let shell = JobAction::Shell {
        program: PathBuf::from("/bin/bash"),
        script: "echo hi".to_owned(),
    };
    let spec = command_spec(&run, None, Some(&job(shell, PingTarget::None))).expect("a command");
    assert_eq!(spec.program, "/bin/bash");
    assert_eq!(spec.args, ["-c", "echo hi"]);
    assert_eq!(spec.working_dir, Some(PathBuf::from("/tmp")));
    assert!(spec.env_set.contains(&("K".into(), "v".into())));

    let argv = JobAction::Command(vec!["backup".to_owned(), "--all".to_owned()]);
    let spec = command_spec(&run, None, Some(&job(argv, PingTarget::None))).expect("a command");
    assert_eq!(
        (spec.program.as_os_str(), spec.args.len()),
        ("backup".as_ref(), 1)
    );

    let none = command_spec(
        &run,
        None,
        Some(&job(JobAction::External, PingTarget::None)),
    );
    assert_eq!(none.err(), Some(exit::CONFIG));
    // A command given after `--` wins, without the job's directory.
    let run = args(&["heartbeat-agent", "run", "--job", "nightly", "--", "true"]);
    let spec = command_spec(
        &run,
        None,
        Some(&job(JobAction::External, PingTarget::None)),
    )
    .expect("a command");
    assert_eq!(
        (spec.program.as_os_str(), spec.working_dir),
        ("true".as_ref(), None)
    );
}

#[test]
fn job_targets_and_environment() {
    let run = args(&["heartbeat-agent", "run", "--job", "nightly", "--", "true"]);
    let checked = job(JobAction::External, PingTarget::Check("chk_1".to_owned()));
    let config = Config {
        path: PathBuf::from("/etc/hb.toml"),
        agent: crate::config::AgentSettings {
            state_dir: None,
            timezone: Zone::UTC,
            shutdown_timeout: Duration::from_secs(30),
            outbox_max_entries: 1000,
            outbox_max_age: None,
            resync_interval: Duration::from_secs(6 * 3600),
            sync_jitter: Duration::from_secs(30),
            reassert_interval: Duration::from_secs(86_400),
            history: 100,
            history_keep_removed: Duration::from_secs(7 * 86_400),
        },
        api: crate::config::ApiSettings {
            base_url: None,
            ping_base_url: None,
            account_id: None,
            api_key: ApiKeySource::Env("MY_SERVICE_KEY".to_owned()),
            ca_file: None,
            proxy: None,
        },
        jobs: vec![std::sync::Arc::new(checked.clone())],
        status: Default::default(),
        cluster: None,
    };
    let spec = command_spec(&run, Some(&config), Some(&checked)).expect("a command");
    assert_eq!(spec.env_remove, [OsString::from("MY_SERVICE_KEY")]);
    assert!(spec
        .env_set
        .contains(&(process::JOB_ENV.into(), "nightly".into())));
    assert!(spec
        .env_set
        .contains(&(process::CHECK_ENV.into(), "chk_1".into())));
    let dir = std::path::Path::new("/nonexistent");
    assert_eq!(job_ping(&checked, PingMethod::Get, "h", dir), None);
    let url = job(
        JobAction::External,
        PingTarget::Url(crate::config::PingUrl::parse("http://h/t").expect("valid")),
    );
    let ping = job_ping(&url, PingMethod::Get, "h", dir).expect("the job's ping_url");
    assert_eq!(ping.url(), "http://h/t");
}

#[test]
fn exit_codes_are_bytes() {
    assert_eq!(parse_code(" 3"), Ok(3));
    assert!(parse_code("256").unwrap_err().contains("0 to 255"));
    assert!(parse_code("-1").is_err());
}
