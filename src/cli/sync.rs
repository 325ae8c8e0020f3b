//! `heartbeat-agent sync`: reconcile every bound heartbeat check with the config once, now.
//!
//! Per job it reads the check from the service (`GET /v1/checks/{id}`; the last accepted
//! definition when the service does not serve that route), prints the difference with the
//! desired one (`field: old -> new`, `old` being the service's value) and the fields edited on
//! the service (drift), then PUTs unless `--dry-run`. Exit 0 when everything is in sync (or
//! would be updated, with `--dry-run`), 1 when a PUT failed or was deferred by rate limiting
//! (one message per job on stderr) or, with `--exit-code`, when anything would change or was
//! changed (as `git diff --exit-code`), 2 for an unknown `--job`, 78 for a bad config.

use std::io::Write;

use chrono::Utc;
use clap::Args;

use super::{context, print_error, GlobalArgs};
use crate::config::Config;
use crate::exit;
use crate::sync::{
    sync_all, Action, CadenceCache, JobReport, SyncOptions, SyncOutcome, SyncReport,
};

/// `sync` arguments.
#[derive(Debug, Clone, Args)]
pub struct SyncArgs {
    /// Only this job (a job of the config, or one that left it and still has sync state)
    #[arg(long, value_name = "NAME")]
    pub job: Option<String>,
    /// Show what would change; send nothing
    #[arg(long)]
    pub dry_run: bool,
    /// PUT every definition even when nothing differs (repairs changes made elsewhere); a new
    /// period still waits for the job's next accepted ping
    #[arg(long)]
    pub force: bool,
    /// Print the result as one JSON document
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when anything would change (or changed): a difference, drift or a held change,
    /// as `git diff --exit-code` does
    #[arg(long)]
    pub exit_code: bool,
}

/// Runs `sync`.
pub(crate) fn run(args: SyncArgs, global: &GlobalArgs) -> u8 {
    let path = crate::paths::config_file(global.config.as_ref());
    let config = match Config::load_for_reading(&path) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                crate::logging::write_err(&format!("heartbeat-agent: warning: {warning}"));
            }
            loaded.config
        }
        Err(err) => {
            for problem in &err.problems {
                crate::logging::write_err(problem);
            }
            print_error(format!("configuration {} is invalid", path.display()));
            return exit::CONFIG;
        }
    };
    let state_dir = config.state_dir(global.state_dir.as_deref());
    if let Err(message) = crate::paths::check_state_dir(&state_dir) {
        print_error(message);
        return exit::FAILURE;
    }
    if let Some(job) = &args.job {
        let known =
            config.job(job).is_some() || crate::sync::state::load(&state_dir, job).is_some();
        if !known {
            print_error(format!(
                "no job named \"{job}\" in {} (and no sync state for one)",
                path.display()
            ));
            return exit::USAGE;
        }
    }
    let net = crate::net::Net::new(config.api.net(None));
    let client = match context::config_client(config.api.clone(), &path, global, net) {
        Ok(client) => client,
        Err((code, message)) => {
            print_error(message);
            return code;
        }
    };
    let runtime = match context::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let opts = SyncOptions {
        dry_run: args.dry_run,
        force: args.force,
        job: args.job.clone(),
        read: true,
        ..SyncOptions::at(Utc::now())
    };
    let mut cache = CadenceCache::default();
    let report = runtime.block_on(sync_all(&config, &client, &state_dir, &opts, &mut cache));
    let shown = if args.json {
        serde_json::to_string(&report).map(|text| text + "\n")
    } else {
        Ok(render(&report))
    };
    let written = shown
        .map_err(std::io::Error::from)
        .and_then(|text| std::io::stdout().lock().write_all(text.as_bytes()));
    if let Err(e) = written {
        print_error(format_args!("cannot write the result: {e}"));
        return exit::FAILURE;
    }
    for entry in &report.jobs {
        if let SyncOutcome::Failed(message)
        | SyncOutcome::Deferred(message)
        | SyncOutcome::Missing(message) = &entry.outcome
        {
            print_error(message);
        }
    }
    if report.failed() || (args.exit_code && report.changes()) {
        exit::FAILURE
    } else {
        exit::OK
    }
}

/// The human form: one heading per job, its changes indented, then what happened.
pub(crate) fn render(report: &SyncReport) -> String {
    let mut out = String::new();
    if report.jobs.is_empty() {
        out.push_str("no job is bound to a check (check_id): nothing to sync\n");
    }
    for entry in &report.jobs {
        out.push_str(&render_job(entry));
    }
    out
}

fn render_job(entry: &JobReport) -> String {
    let what = match entry.action {
        Action::Update => "",
        Action::Deactivate => ", deactivate: the job left the config",
    };
    let result = match &entry.outcome {
        SyncOutcome::InSync => "in_sync",
        SyncOutcome::Updated => "updated",
        SyncOutcome::Created => "created",
        SyncOutcome::WouldUpdate => "would update (dry run: nothing sent)",
        SyncOutcome::WouldCreate => {
            "would create the check: POST /v1/checks/heartbeat with the fields below (dry run: nothing sent)"
        }
        SyncOutcome::Held => "held (nothing sent)",
        SyncOutcome::Failed(_) => "failed",
        SyncOutcome::Missing(_) => "missing: the service has no such check (404)",
        SyncOutcome::Deferred(_) => "deferred (the API is rate limiting: nothing sent)",
    };
    let check = if entry.check_id.is_empty() {
        "no check yet: create = true".to_owned()
    } else {
        format!("check {}", entry.check_id)
    };
    let mut out = format!("{} ({check}{what}): {result}\n", entry.job);
    if !entry.drift.is_empty() {
        out.push_str(&format!(
            "  edited on the service since the agent's last update (drift): {}\n",
            entry.drift.join(", ")
        ));
    }
    if let Some(unread) = &entry.unread {
        out.push_str(&format!("  not read from the service: {unread}\n"));
    }
    for change in &entry.changes {
        out.push_str(&format!("  {change}\n"));
    }
    if !entry.held.is_empty() {
        out.push_str(
            "  held until the job's next accepted ping (a new period or a re-activation restarts the service's timer):\n",
        );
    }
    for change in &entry.held {
        out.push_str(&format!("    {change}\n"));
    }
    out
}
