//! The command line: clap definitions (one file per subcommand), global options, the one-line
//! messages that replace clap's for the two usual slips (a command line without `--`, an
//! unquoted schedule: `usage_hint`), and the mapping from a command's result to the process
//! exit code.
//!
//! Doc comments on the argument structs are the `--help` text: keep them true to the code.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, FromArgMatches, Parser, Subcommand};

use crate::exit;
use crate::logging::LogFormat;

pub mod api;
pub mod assemble;
pub mod config_cmd;
mod config_watch;
pub mod context;
pub mod daemon;
pub mod demo;
pub mod emulator;
pub mod generate;
pub mod health;
pub mod history;
pub mod import;
pub mod outbox;
pub mod pause;
pub mod ping;
pub mod schedule;
pub mod status;
pub mod sync;
pub mod trigger;
pub mod wrap;

/// The program's name in help and messages.
const NAME: &str = "heartbeat-agent";

/// Heartbeat ping agent and edge daemon.
///
/// Wraps cron jobs (`run`), runs and watches jobs on cron schedules (`daemon`), pings heartbeat
/// checks on success and keeps their period and grace in sync with the schedule.
#[derive(Debug, Parser)]
#[command(
    name = NAME,
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Options accepted before or after any subcommand.
    #[command(flatten)]
    pub global: GlobalArgs,

    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's command line (exits with clap's message on a usage error).
    ///
    /// `run` starts once per cron job, so its start-up cost matters: a command line that parses
    /// as `run` against a parser holding only the global options and `run` is taken from there,
    /// without building the other subcommands' definitions. Anything else (another subcommand,
    /// `--help`, `--version`, every error) goes through the whole command line, so messages and
    /// help are the same either way.
    pub fn from_env() -> Cli {
        let args: Vec<OsString> = std::env::args_os().collect();
        Cli::parse_run(&args).unwrap_or_else(|| match Cli::try_parse_from(&args) {
            Ok(cli) => cli,
            Err(err) => match usage_hint(&err, &args) {
                Some(message) => {
                    print_error(message);
                    std::process::exit(i32::from(exit::USAGE))
                }
                None => err.exit(),
            },
        })
    }

    /// `args` parsed as `run`, or `None` when they are anything else or do not parse.
    fn parse_run(args: &[OsString]) -> Option<Cli> {
        let parser = GlobalArgs::augment_args(clap::Command::new(NAME))
            .subcommand(wrap::RunArgs::augment_args(clap::Command::new("run")))
            .disable_help_subcommand(true);
        let matches = parser.try_get_matches_from(args).ok()?;
        let ("run", run_matches) = matches.subcommand()? else {
            return None;
        };
        Some(Cli {
            global: GlobalArgs::from_arg_matches(&matches).ok()?,
            command: Command::Run(wrap::RunArgs::from_arg_matches(run_matches).ok()?),
        })
    }
}

/// The one-line message that replaces clap's for the two usage mistakes a newcomer makes, or
/// `None` to keep clap's:
///
/// - words of a command line given to a subcommand that takes one (`run sh -c 'exit 3'`)
///   without `--` before them: clap's tip ("to pass '-c' as a value, use '-- -c'") would run
///   `-c` as the command, so the message says to put `--` before the whole command;
/// - an unquoted schedule expression (`schedule 0 3 * * *`): the shell split it (and expanded
///   each `*` into file names), so the message says to quote it.
///
/// An unexpected option given to a subcommand that takes a command line is named with the same
/// pointer to `--` instead of clap's tip. Only when no `--` was given (after one, clap's
/// message stands); for other subcommands and other mistakes clap's message stands.
fn usage_hint(err: &clap::Error, args: &[OsString]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument || args.iter().any(|a| a == "--") {
        return None;
    }
    let Some(ContextValue::String(word)) = err.get(ContextKind::InvalidArg) else {
        return None;
    };
    let whole = <Cli as clap::CommandFactory>::command();
    let matches = whole
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()?;
    let name = matches.subcommand_name()?;
    let sub = whole.find_subcommand(name)?;
    let takes_command = sub.get_positionals().any(clap::Arg::is_last_set);
    if takes_command && word.starts_with('-') {
        return Some(format!(
            "{name}: unexpected option `{word}` (see `{NAME} {name} --help`); a command and its \
             own options go after `--`: `{NAME} {name} [OPTIONS] -- CMD [ARGS...]`"
        ));
    }
    if word.starts_with('-') {
        return None;
    }
    if takes_command {
        let after = args.iter().position(|a| a == name)? + 1;
        let at = after
            + args[after..]
                .iter()
                .position(|a| a.to_str() == Some(word))?;
        let command: Vec<String> = args[at..]
            .iter()
            .map(|a| shell_word(&a.to_string_lossy()))
            .collect();
        return Some(format!(
            "{name}: put `--` before the command: `{NAME} {name} [OPTIONS] -- {}` (without it, \
             the command's words are read as {NAME}'s own options)",
            command.join(" ")
        ));
    }
    (name == "schedule").then(|| {
        format!(
            "schedule: quote the expression, as in `{NAME} schedule '0 3 * * *'` (unquoted, the \
             shell splits it into words, here `{word}` was left over, and expands each `*` into \
             file names)"
        )
    })
}

/// `word` as a shell reads it back: as it is when it holds only plain characters, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Options that apply to every subcommand.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Configuration file [default: $HEARTBEAT_AGENT_CONFIG, else
    /// $CONFIGURATION_DIRECTORY/config.toml (set by systemd), else
    /// /etc/heartbeat-agent/config.toml for root, else
    /// $XDG_CONFIG_HOME/heartbeat-agent/config.toml]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// State directory (outbox, learned ping URLs, locks), overriding `[agent] state_dir`
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Base URL of the monitoring API, overriding `[api] base_url`
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,

    /// Log level: error, warn, info, debug or trace (or a tracing filter such as
    /// `heartbeat_agent=debug`) [env: HEARTBEAT_AGENT_LOG]
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Say what was done, as --log-level info does (for `run`: the ping it sent, with the
    /// answer's status and time; without it a good run prints nothing)
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,

    /// Log format [default: auto: journald fields when stderr is the journal, else text]
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,
}

impl GlobalArgs {
    /// What the logging set-up needs from these options.
    pub fn logging_options(&self) -> crate::logging::Options {
        crate::logging::Options {
            level: self
                .log_level
                .clone()
                .or_else(|| self.verbose.then(|| "info".to_owned())),
            format: self.log_format.unwrap_or(LogFormat::Auto),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one command, pass its output and exit code through, ping on success
    Run(wrap::RunArgs),
    /// Print the next fire times of a cron schedule
    Schedule(schedule::ScheduleArgs),
    /// Validate the configuration file
    #[command(subcommand)]
    Config(config_cmd::ConfigCommand),
    /// Call any operation of the monitoring API from the shell
    #[command(subcommand)]
    Api(api::ApiCommand),
    /// Serve a local emulator of the monitoring API and its ping host
    Emulator(emulator::EmulatorArgs),
    /// Send one ping now (kept in the outbox when it cannot be delivered)
    Ping(ping::PingArgs),
    /// Show and manage pending pings: list, flush, purge
    Outbox(outbox::OutboxArgs),
    /// Bring every bound heartbeat check's definition in line with the config now (a new
    /// period or a re-activation waits for the job's next accepted ping: it restarts the
    /// service's timer)
    Sync(sync::SyncArgs),
    /// Run and watch the config's jobs on their schedules, ping on success
    Daemon(daemon::DaemonArgs),
    /// Translate a crontab into [[jobs]] tables, or wrap its jobs in `run --job`
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Print shell completions (bash, zsh, fish, elvish, powershell)
    Completions(generate::CompletionsArgs),
    /// Print the man page (roff), or write all pages with --out-dir
    Manpage(generate::ManpageArgs),
    /// Show the running daemon's status: jobs, runs, pings, sync, remote view
    Status(status::StatusArgs),
    /// Show the jobs' last runs, newest first (the run history; no daemon needed)
    History(history::HistoryArgs),
    /// Exit 0 when the running daemon is healthy, 1 otherwise (for exec probes)
    Health(health::HealthArgs),
    /// Run a job of the running daemon now (needs [status] token)
    Trigger(trigger::TriggerArgs),
    /// Pause jobs for maintenance: deactivate their checks (through the daemon, else the API)
    Pause(pause::PauseArgs),
    /// End the pause of jobs: re-activate their checks, restarting their timer
    Resume(pause::ResumeArgs),
    /// Try the agent: a demo daemon against an in-process emulator, with a live status table
    Demo(demo::DemoArgs),
}

/// Runs the parsed command line and returns the process exit code.
pub fn main(cli: Cli) -> ExitCode {
    let Cli { global, command } = cli;
    let code = match command {
        Command::Run(args) => wrap::run(args, &global),
        Command::Schedule(args) => schedule::run(args, &global),
        Command::Config(cmd) => config_cmd::run(cmd, &global),
        Command::Api(cmd) => api::run(cmd, &global),
        Command::Emulator(args) => emulator::run(args, &global),
        Command::Ping(args) => ping::run(args, &global),
        Command::Outbox(args) => outbox::run(args, &global),
        Command::Sync(args) => sync::run(args, &global),
        Command::Daemon(args) => daemon::run(args, &global),
        Command::Import(cmd) => import::run(cmd, &global),
        Command::Completions(args) => generate::completions(args, &global),
        Command::Manpage(args) => generate::manpage(args, &global),
        Command::Status(args) => status::run(args, &global),
        Command::History(args) => history::run(args, &global),
        Command::Health(args) => health::run(args, &global),
        Command::Trigger(args) => trigger::run(args, &global),
        Command::Pause(args) => pause::pause(args, &global),
        Command::Resume(args) => pause::resume(args, &global),
        Command::Demo(args) => demo::run(args, &global),
    };
    ExitCode::from(code)
}

/// Prints a one-line `heartbeat-agent: ...` message on stderr.
///
/// For messages meant for the person at the terminal (usage problems, a command that cannot be
/// run); operational events go through `tracing` instead.
pub fn print_error(message: impl std::fmt::Display) {
    crate::logging::write_err(&format!("heartbeat-agent: {message}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn argv(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn run_parsed_alone_is_what_the_whole_command_line_gives() {
        for line in [
            "heartbeat-agent run -- true",
            "heartbeat-agent --config /x.toml run --ping-url http://h/t --timeout 5s -- sh -c x",
            "heartbeat-agent run --job backup --lock --log-level debug",
            "heartbeat-agent --log-format=json run --success-codes 0,3 --state-dir /s -- a -b --c",
            "heartbeat-agent run --ping-method post --source web1 --ping-timeout 2s -- run",
        ] {
            let fast = Cli::parse_run(&argv(line)).expect(line);
            let whole = Cli::try_parse_from(argv(line)).expect(line);
            assert_eq!(format!("{fast:?}"), format!("{whole:?}"), "{line}");
        }
    }

    #[test]
    fn everything_but_a_valid_run_goes_to_the_whole_command_line() {
        for line in [
            "heartbeat-agent daemon",
            "heartbeat-agent --version",
            "heartbeat-agent run --help",
            "heartbeat-agent run --version",
            "heartbeat-agent run --bogus -- true",
            "heartbeat-agent help run",
            "heartbeat-agent schedule run",
            "heartbeat-agent",
        ] {
            assert!(Cli::parse_run(&argv(line)).is_none(), "{line}");
        }
    }
}
