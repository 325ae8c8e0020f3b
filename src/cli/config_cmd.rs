//! `heartbeat-agent config check [FILE]`: validate the configuration file and show, per job, its
//! schedule, next fire times and (redacted) ping target. Exit 0 when valid (warnings allowed),
//! 78 (`EX_CONFIG`) with every problem on stderr when not. Beyond the file itself it warns when
//! a job is bound to a check (`check_id`) but no API key can be found in this environment: such
//! a job can neither learn its ping URL nor be kept in sync; and when `[status] listen` is taken
//! by something other than this config's daemon. The shipped example, checked as it is, gets
//! one note saying it is the example instead of those warnings.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{context, GlobalArgs};
use crate::config::{Config, Job, JobAction, PingTarget, WatchSpec};
use crate::exit;

/// Configuration commands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration; print each job's next fire times and ping target
    Check(CheckArgs),
}

/// `config check [FILE]`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The file to check, as --config FILE names it [default: --config, else the default
    /// configuration file]
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// The text of the shipped example (config/example.toml, installed by the package as
/// /usr/share/doc/heartbeat-agent/examples/config.toml): checked as it is, it is said to be the
/// example once instead of warning about its placeholders (no API key, its mode).
const EXAMPLE: &str = include_str!("../../config/example.toml");

/// Where the packaged systemd unit loads the credential `api-key` from
/// (packaging/systemd/heartbeat-agent.service, `LoadCredential=`).
const PACKAGED_KEY: &str = "/etc/heartbeat-agent/api-key";

/// How many upcoming fire times `config check` shows per job.
const FIRE_TIMES: usize = 3;

/// Runs a `config` subcommand.
pub(crate) fn run(cmd: ConfigCommand, global: &GlobalArgs) -> u8 {
    match cmd {
        ConfigCommand::Check(args) => check(args, global),
    }
}

fn check(args: CheckArgs, global: &GlobalArgs) -> u8 {
    let file = match (args.file, &global.config) {
        (Some(file), Some(flag)) if &file != flag => {
            super::print_error(format!(
                "config check: two files given ({} and --config {}): give one",
                file.display(),
                flag.display()
            ));
            return exit::USAGE;
        }
        (file, flag) => file.or_else(|| flag.clone()),
    };
    let path = crate::paths::config_file(file.as_ref());
    match Config::load(&path) {
        Ok(loaded) => {
            crate::logging::write_out(&report(&loaded.config, Utc::now()));
            if std::fs::read_to_string(&path).is_ok_and(|text| text == EXAMPLE) {
                crate::logging::write_err(&format!(
                    "heartbeat-agent: note: {} is the shipped example: its checks, URLs and \
                     paths are placeholders; copy it, edit it and check the copy",
                    path.display()
                ));
                return exit::OK;
            }
            let key = crate::config::read_api_key(&loaded.config.api.api_key);
            let missing_key = api_key_warning(&loaded.config, key.map(|k| k.is_some()));
            let status = &loaded.config.status;
            let expected = crate::status::owner::Expected::daemon_of(
                &path,
                &loaded.config,
                global.state_dir.as_deref(),
            );
            let in_use = crate::status::owner::listen_in_use(
                &status.listen,
                status.listen_configured,
                &expected,
            );
            for warning in loaded.warnings.iter().chain(&missing_key).chain(&in_use) {
                crate::logging::write_err(&format!("heartbeat-agent: warning: {warning}"));
            }
            exit::OK
        }
        Err(err) => context::invalid_config(&path, &err, ""),
    }
}

/// The warning for jobs bound to a check (`check_id`, or `create = true`: creating the check
/// needs the key too) when no API key is found: `key_found` is whether the configured source
/// gave a key (`Err` with why a configured source failed). None when no job is bound to a check
/// or a key was found. Names the file and the jobs, never a key.
pub(crate) fn api_key_warning(
    config: &Config,
    key_found: Result<bool, crate::config::secrets::ApiKeyError>,
) -> Option<String> {
    let bound: Vec<String> = config
        .jobs
        .iter()
        .filter_map(|job| match &job.target {
            PingTarget::Check(id) => Some(format!("job \"{}\" (check {id})", job.name)),
            PingTarget::None if job.check.create => Some(format!(
                "job \"{}\" (check to be created: create = true)",
                job.name
            )),
            _ => None,
        })
        .collect();
    let why = match key_found {
        Ok(true) => return None,
        Ok(false) => format!(
            "no API key source is found: [api] sets neither api_key_file nor api_key_env, \
             there is no systemd credential `{}` and ${} is unset",
            crate::config::secrets::CREDENTIAL_NAME,
            crate::config::secrets::API_KEY_ENV
        ),
        Err(err) => err.to_string(),
    };
    let (first, rest) = bound.split_first()?;
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{}: {first}{more} bound to a check, but {why}; such a job cannot learn its ping URL, \
         have its check created or be kept in sync: under systemd give the service the credential `{}` (the packaged unit \
         loads {PACKAGED_KEY}; a check run outside the service cannot see it, so then this does \
         not apply to the daemon); else give the daemon ${} or set `api_key_env`, or \
         `api_key_file` naming a file the daemon's user can read",
        config.path.display(),
        crate::config::secrets::CREDENTIAL_NAME,
        crate::config::secrets::API_KEY_ENV,
    ))
}

/// The text `config check` prints for a valid config, as of `now`.
pub(crate) fn report(config: &Config, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let count = config.jobs.len();
    let noun = if count == 1 { "job" } else { "jobs" };
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{}: valid, {count} {noun}", config.path.display());
    if let Some(cluster) = &config.cluster {
        out.push('\n');
        out.push_str(&cluster_report(cluster));
    }
    for job in &config.jobs {
        out.push('\n');
        out.push_str(&job_report(job, now, config.cluster.is_some()));
    }
    out
}

/// `[cluster]`, the password never shown (only where it comes from).
fn cluster_report(cluster: &crate::config::ClusterSettings) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster \"{}\": node \"{}\", lease {}s, on_unavailable = \"{}\"",
        cluster.name,
        cluster.node,
        cluster.lease.as_secs(),
        cluster.on_unavailable.as_str()
    );
    let endpoints: Vec<&str> = cluster.endpoints.iter().map(|u| u.as_str()).collect();
    let _ = writeln!(out, "  endpoints: {}", endpoints.join(", "));
    let files = [
        ("ca_file", &cluster.ca_file),
        ("cert_file", &cluster.cert_file),
        ("key_file", &cluster.key_file),
    ];
    let tls: Vec<String> = files
        .iter()
        .filter_map(|(key, path)| path.as_ref().map(|p| format!("{key} {}", p.display())))
        .collect();
    if !tls.is_empty() {
        let _ = writeln!(out, "  tls:       {}", tls.join(", "));
    }
    let auth = match (&cluster.user, &cluster.password_from) {
        (Some(user), Some(from)) => format!("user \"{user}\", password [redacted] from {from}"),
        (Some(user), None) => format!("user \"{user}\""),
        (None, _) => "none (etcd without authentication)".to_owned(),
    };
    let _ = writeln!(out, "  auth:      {auth}");
    out
}

fn job_report(job: &Job, now: DateTime<Utc>, in_cluster: bool) -> String {
    let mut out = String::new();
    let disabled = if job.enabled { "" } else { " (disabled)" };
    let _ = writeln!(out, "job \"{}\"{disabled}", job.name);
    let _ = writeln!(out, "  does:     {}", action(&job.action));
    let _ = writeln!(
        out,
        "  schedule: {} ({})",
        job.schedule.as_str(),
        job.timezone.name()
    );
    let mut after = now;
    let mut label = "  next:    ";
    for _ in 0..FIRE_TIMES {
        match job.schedule.next_after(after, job.timezone) {
            Some(next) => {
                let local = job.timezone.local(next);
                let _ = writeln!(out, "{label} {}", local.to_rfc3339());
                after = next;
            }
            None => {
                if after == now {
                    let _ = writeln!(out, "{label} no upcoming fire time");
                }
                break;
            }
        }
        label = "           ";
    }
    if job.retries.retries > 0 {
        let human = crate::duration::human_duration;
        // Without a timeout an attempt may run for ever: only the waits are bounded.
        let bound = match job.timeout {
            Some(_) => format!(
                "a run takes at most {}",
                human(job.retries.worst_case(job.timeout))
            ),
            None => format!(
                "the waits add up to {}; no timeout bounds the attempts",
                human(job.retries.longest_delays())
            ),
        };
        let _ = writeln!(
            out,
            "  retries:  {} (waits from {} doubling up to {}; {bound})",
            job.retries.retries,
            human(job.retries.delay),
            human(job.retries.delay_max),
        );
    }
    let ping = match &job.target {
        PingTarget::None if job.check.create => {
            "the check sync creates (its URL is learned when sync creates or finds it)".to_owned()
        }
        other => target(other),
    };
    let _ = writeln!(out, "  ping:     {ping}");
    if job.check.create {
        let name = job.check.name.as_deref().unwrap_or(&job.name);
        let _ = writeln!(out, "  check:    will be created as {name:?}");
    }
    if let Some(url) = &job.start_fail.start_url {
        let _ = writeln!(out, "  start:    {}", crate::redact::url(url.as_str()));
    }
    if let Some(url) = &job.start_fail.fail_url {
        let body = match job.start_fail.fail_body {
            crate::config::FailBody::OutputTail => " (POST, the last output as body)",
            crate::config::FailBody::Json => " (POST, a JSON summary of the run as body)",
            crate::config::FailBody::Empty => "",
        };
        let _ = writeln!(
            out,
            "  fail:     {}{body}",
            crate::redact::url(url.as_str())
        );
    }
    if in_cluster && job.action != JobAction::External {
        let runs_on = match job.run_on {
            crate::config::RunOn::One => "one agent per fire (claimed in etcd)",
            crate::config::RunOn::All => "every agent",
        };
        let _ = writeln!(out, "  runs on:  {runs_on}");
    }
    out
}

fn action(action: &JobAction) -> String {
    match action {
        JobAction::Command(argv) => format!("command {}", argv.first().map_or("", String::as_str)),
        JobAction::Shell { program, .. } => format!("shell script ({})", program.display()),
        JobAction::Watch(spec) => format!("watch {}", watch_kind(spec)),
        JobAction::External => "external (run elsewhere, pinged by `run --job`)".to_owned(),
    }
}

fn watch_kind(spec: &WatchSpec) -> &'static str {
    match spec {
        WatchSpec::Process { .. } => "process",
        WatchSpec::File { .. } => "file",
        WatchSpec::Disk { .. } => "disk",
        WatchSpec::Memory { .. } => "memory",
        WatchSpec::Load { .. } => "load",
        WatchSpec::Tcp { .. } => "tcp",
        WatchSpec::Http { .. } => "http",
    }
}

/// The ping target as shown: never the URL's path, which holds the token.
pub(crate) fn target(target: &PingTarget) -> String {
    match target {
        PingTarget::Url(url) => crate::redact::url(url.as_str()),
        PingTarget::Check(id) => format!("check {id}"),
        PingTarget::None => "none (warning: nothing will be pinged)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Zone;
    use std::path::Path;

    #[test]
    fn the_cluster_is_shown_without_its_password() {
        let dir = tempfile::tempdir().expect("tempdir");
        let password = dir.path().join("pw");
        std::fs::write(&password, "hunter2-etcd\n").expect("write");
        let text = format!(
            "[cluster]\nendpoints = [\"http://10.0.0.1:2379\"]\nnode = \"a\"\nuser = \"hb\"\n\
             password_file = \"{}\"\n\n[[jobs]]\nname = \"j\"\nschedule = \"@daily\"\n\
             command = [\"true\"]\n\n[[jobs]]\nname = \"w\"\nschedule = \"@daily\"\n\
             [jobs.watch]\nkind = \"load\"\nmax_load1 = 4.0\n",
            password.display()
        );
        let config = Config::from_text(&dir.path().join("c.toml"), &text)
            .expect("valid")
            .config;
        let shown = report(&config, Utc::now());
        for line in [
            "cluster \"heartbeat-agent\": node \"a\", lease 10s, on_unavailable = \"skip\"",
            "  endpoints: http://10.0.0.1:2379/",
            "  auth:      user \"hb\", password [redacted] from password_file ",
            "  runs on:  one agent per fire (claimed in etcd)",
            "  runs on:  every agent",
        ] {
            assert!(shown.contains(line), "{line:?} in:\n{shown}");
        }
        assert!(!shown.contains("hunter2-etcd"), "{shown}");
    }

    #[test]
    fn targets_are_redacted() {
        let url = PingTarget::Url(
            crate::config::PingUrl::parse("https://ping.example.com/tok-SECRET").expect("valid"),
        );
        let shown = target(&url);
        assert!(shown.starts_with("https://ping.example.com/…#"), "{shown}");
        assert!(!shown.contains("tok-SECRET"));
        assert_eq!(target(&PingTarget::Check("c1".to_owned())), "check c1");
        assert_eq!(
            target(&PingTarget::None),
            "none (warning: nothing will be pinged)"
        );
    }

    #[test]
    fn report_lists_each_job() {
        let text =
            "[[jobs]]\nname = \"a\"\nschedule = \"@reboot\"\ncommand = [\"/bin/true\", \"x\"]\n\
                    check_id = \"c1\"\nenabled = false\n";
        let loaded = Config::from_text(Path::new("c.toml"), text).expect("valid config");
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .expect("valid time")
            .with_timezone(&Utc);
        let report = report(&loaded.config, now);
        let first = loaded.config.jobs[0].schedule.next_after(now, Zone::UTC);
        let next = first.map_or("no upcoming fire time".to_owned(), |t| t.to_rfc3339());
        assert!(
            report.starts_with("c.toml: valid, 1 job\n\njob \"a\" (disabled)\n"),
            "{report}"
        );
        assert!(
            report.contains("  does:     command /bin/true\n"),
            "{report}"
        );
        assert!(report.contains("  schedule: @reboot (UTC)\n"), "{report}");
        assert!(
            report.contains(&format!("  next:     {next}\n")),
            "{report}"
        );
        assert!(report.ends_with("  ping:     check c1\n"), "{report}");
    }
}
