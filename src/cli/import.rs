//! `heartbeat-agent import crontab [FILE|-] [--system] [--rewrite --jobs-out FILE]`: reads a
//! crontab and prints `[[jobs]]` tables (or, with `--rewrite`, the crontab with each job wrapped
//! in `heartbeat-agent run --job NAME --`). The translation lives in [`crate::import`].

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{print_error, GlobalArgs};
use crate::exit;
use crate::import::crontab::{self, Options, Rewrite};

/// `import`: what to import from.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Translate a crontab into [[jobs]] tables (printed on stdout, ready to append to the config)
    ///
    /// Every line that cannot be translated (and every setting that is not, such as MAILTO) is
    /// reported on stderr as FILE:LINE: what and why. Exit 0 when the crontab was read.
    Crontab(CrontabArgs),
}

/// `import crontab`.
#[derive(Debug, Args)]
pub struct CrontabArgs {
    /// The crontab to read; `-` or nothing reads standard input (`crontab -l | heartbeat-agent
    /// import crontab`)
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,

    /// System crontab format (/etc/crontab, /etc/cron.d/*): a user column after the schedule,
    /// imported as the job's `user`
    #[arg(long)]
    pub system: bool,

    /// Print the crontab instead, each job line wrapped in `heartbeat-agent run --job NAME --`,
    /// and write the jobs as external jobs (no command) to --jobs-out: cron keeps running them,
    /// the daemon only syncs and shows them
    #[arg(long, requires = "jobs_out")]
    pub rewrite: bool,

    /// With --rewrite: the file the [[jobs]] tables are written to (replaced if it exists)
    #[arg(long, value_name = "FILE", requires = "rewrite")]
    pub jobs_out: Option<PathBuf>,

    /// With --rewrite: the agent as cron starts it (cron's PATH is /usr/bin:/bin; give a full
    /// path when the agent is installed elsewhere)
    #[arg(long, value_name = "PATH", default_value = "heartbeat-agent")]
    pub program: String,
}

/// Runs `import SUBCOMMAND`.
pub fn run(command: ImportCommand, _global: &GlobalArgs) -> u8 {
    match command {
        ImportCommand::Crontab(args) => import_crontab(args),
    }
}

fn import_crontab(args: CrontabArgs) -> u8 {
    let (source, text) = match read_input(args.file.as_ref()) {
        Ok(input) => input,
        Err(message) => {
            print_error(message);
            return exit::FAILURE;
        }
    };
    let options = Options {
        system: args.system,
        rewrite: args.rewrite.then(|| Rewrite {
            program: args.program.clone(),
        }),
    };
    let import = crontab::import(&text, &source, &options);
    for problem in &import.problems {
        crate::logging::write_err(&problem.render(&source));
    }
    let stdout = match (&import.crontab, &args.jobs_out) {
        (Some(crontab), Some(path)) => {
            if let Err(err) = std::fs::write(path, &import.jobs) {
                print_error(format!(
                    "cannot write the jobs to {}: {err}; choose a writable --jobs-out FILE",
                    path.display()
                ));
                return exit::FAILURE;
            }
            crontab
        }
        _ => &import.jobs,
    };
    // A closed pipe (`| head`) is the reader's choice, not an error worth reporting.
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    print_error(summary(&import, args.jobs_out.as_ref()));
    exit::OK
}

/// One line on stderr saying what was done, so an empty stdout is never a mystery.
fn summary(import: &crontab::Import, jobs_out: Option<&PathBuf>) -> String {
    let jobs = match import.job_count {
        1 => "1 job".to_owned(),
        n => format!("{n} jobs"),
    };
    let problems = match import.problems.len() {
        0 => String::new(),
        1 => ", 1 problem reported above".to_owned(),
        n => format!(", {n} problems reported above"),
    };
    match jobs_out {
        Some(path) => format!(
            "imported {jobs} as external jobs into {}{problems}",
            path.display()
        ),
        None => format!("imported {jobs}{problems}"),
    }
}

/// Reads the crontab from FILE or stdin: the name used in messages, and the text.
fn read_input(file: Option<&PathBuf>) -> Result<(String, String), String> {
    let (source, bytes) = match file.filter(|f| f.as_os_str() != "-") {
        Some(path) => {
            let shown = path.display().to_string();
            let bytes = std::fs::read(path)
                .map_err(|err| format!("cannot read the crontab {shown}: {err}"))?;
            (shown, bytes)
        }
        None => {
            let mut stdin = std::io::stdin().lock();
            if stdin.is_terminal() {
                print_error(
                    "reading a crontab from the terminal (Ctrl-D ends it); give FILE, or pipe \
                     `crontab -l` into this command",
                );
            }
            let mut bytes = Vec::new();
            stdin
                .read_to_end(&mut bytes)
                .map_err(|err| format!("cannot read the crontab from standard input: {err}"))?;
            ("<stdin>".to_owned(), bytes)
        }
    };
    let text = String::from_utf8(bytes).map_err(|err| {
        format!(
            "{source}: the crontab is not valid UTF-8 (at byte {}); convert it to UTF-8",
            err.utf8_error().valid_up_to()
        )
    })?;
    Ok((source, text))
}
