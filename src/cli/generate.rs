//! `heartbeat-agent completions SHELL` and `heartbeat-agent manpage`: shell completions and roff
//! man pages generated from the clap definition of the command line, so they cannot drift from
//! it. The Debian package ships both (`scripts/build-deb.sh` generates them).
//!
//! Two things are added to what clap generates:
//!
//! - The bash script is repaired. clap_complete names the case labels of subcommands after the
//!   binary with `-` turned into `__subcmd__` (`heartbeat__subcmd__agent__subcmd__run`) while
//!   the loop that walks the words turns it into `__` (`heartbeat__agent__subcmd__run`), so for
//!   a hyphenated binary name nothing past the first word completed. [`repair_bash`] renames the
//!   labels to what the loop produces; the test drives the script in a real bash.
//! - The main man page gains EXIT STATUS, ENVIRONMENT and FILES sections (clap knows none of
//!   them), written here from the same constants the code uses.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{print_error, Cli, GlobalArgs};
use crate::exit;

/// `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// `manpage`.
#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Write heartbeat-agent.1 and one page per subcommand (heartbeat-agent-run.1, ...) into
    /// DIR instead of printing the main page on stdout
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` on stdout.
pub(crate) fn completions(args: CompletionsArgs, _global: &GlobalArgs) -> u8 {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, BIN, &mut out);
    if args.shell == Shell::Bash {
        out = repair_bash(&String::from_utf8_lossy(&out), BIN).into_bytes();
    }
    print(&out)
}

/// The binary's name, as completions register it.
const BIN: &str = "heartbeat-agent";

/// `script` (clap_complete's bash output for `bin`) with each subcommand's case label renamed
/// from the prefix clap_complete gives it (`-` as `__subcmd__`) to the one its word loop sets
/// (`-` as `__`). Only lines that are a case label starting with the broken prefix change.
fn repair_bash(script: &str, bin: &str) -> String {
    let broken = bin.replace('-', "__subcmd__");
    let fixed = bin.replace('-', "__");
    if broken == fixed {
        return script.to_owned();
    }
    let mut out = String::with_capacity(script.len());
    for line in script.split_inclusive('\n') {
        let label = line.trim_start();
        match label.strip_prefix(broken.as_str()) {
            Some(rest) if rest.trim_end().ends_with(')') => {
                out.push_str(&line[..line.len() - label.len()]);
                out.push_str(&fixed);
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Prints the main man page (roff) on stdout, or writes every page into `--out-dir`.
pub(crate) fn manpage(args: ManpageArgs, _global: &GlobalArgs) -> u8 {
    let command = Cli::command();
    if let Some(dir) = args.out_dir {
        let main = main_page(command.clone());
        let written = clap_mangen::generate_to(command, &dir).and_then(|()| {
            let page = main?;
            std::fs::write(dir.join(format!("{BIN}.1")), page)
        });
        return match written {
            Ok(()) => exit::OK,
            Err(err) => {
                print_error(format!(
                    "cannot write the man pages into {}: {err}; give an existing, writable \
                     --out-dir",
                    dir.display()
                ));
                exit::FAILURE
            }
        };
    }
    match main_page(command) {
        Ok(page) => print(page.as_bytes()),
        Err(err) => {
            print_error(format!("cannot render the man page: {err}"));
            exit::FAILURE
        }
    }
}

/// The main man page: clap_mangen's, with EXIT STATUS, ENVIRONMENT and FILES inserted before
/// its VERSION section (the order of man-pages(7)).
fn main_page(command: clap::Command) -> std::io::Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command).render(&mut out)?;
    let page = String::from_utf8_lossy(&out).into_owned();
    let extra = extra_sections();
    Ok(match page.find("\n.SH VERSION") {
        Some(at) => format!("{}\n{}{}", &page[..at], extra, &page[at + 1..]),
        None => format!("{page}{extra}"),
    })
}

/// Exit codes (README.md, "Exit codes"; `exit.rs`).
const EXIT_STATUS: &[(&str, &str)] = &[
    (
        "0",
        "Success (daemon and demo: stopped by SIGTERM or SIGINT in order).",
    ),
    (
        "1",
        "A runtime failure: an API error, a failed sync, a lock held by another run.",
    ),
    ("2", "Bad command-line arguments."),
    (
        "78",
        "Invalid configuration (EX_CONFIG); systemd does not restart the service on it.",
    ),
    ("124", "run --timeout: the command ended after SIGTERM."),
    ("126", "run: the command cannot be executed."),
    ("127", "run: the command was not found."),
    (
        "130",
        "daemon: a second SIGINT during the shutdown forced the exit.",
    ),
    ("137", "run --timeout: the command had to be killed."),
    (
        "other",
        "run: the command's own exit status, or 128+N when it died from signal N.",
    ),
];

/// Environment variables the agent reads.
const ENVIRONMENT: &[(&str, &str)] = &[
    (crate::paths::CONFIG_ENV, "The configuration file when --config is not given."),
    (crate::config::secrets::API_KEY_ENV, "The API key when the config names no other source. Never printed; removed from every job's environment."),
    (super::context::ACCOUNT_ENV, "The account id when the config has none."),
    (super::wrap::PING_URL_ENV, "run and ping: the ping URL when --ping-url is not given (it carries the check's token: never printed)."),
    (crate::logging::LOG_ENV, "Log filter (error, warn, info, debug, trace, or a tracing filter)."),
    ("TZ", "The default time zone of job schedules and of schedule when [agent] timezone and --tz are not given (else UTC)."),
    (crate::paths::STATE_DIRECTORY_ENV, "Set by systemd's StateDirectory=: its first entry is the default state directory."),
    (crate::paths::CONFIGURATION_DIRECTORY_ENV, "Set by systemd's ConfigurationDirectory=: config.toml in its first entry is the default configuration file."),
    ("CREDENTIALS_DIRECTORY", "Set by systemd's LoadCredential=: the credential api-key is an API key source."),
    ("NOTIFY_SOCKET, WATCHDOG_USEC", "Set by systemd for Type=notify and WatchdogSec=: the daemon reports readiness and keeps the watchdog fed."),
    ("XDG_CONFIG_HOME, XDG_STATE_HOME", "Non-root users: where the default config file and state directory are."),
    ("NO_COLOR", "Set (to anything): no colours in output."),
];

/// Files the agent reads and writes by default.
const FILES: &[(&str, &str)] = &[
    ("/etc/heartbeat-agent/config.toml", "The configuration file for root ($CONFIGURATION_DIRECTORY/config.toml when set; users: $XDG_CONFIG_HOME/heartbeat-agent/config.toml, else ~/.config/heartbeat-agent/config.toml)."),
    ("/var/lib/heartbeat-agent/", "The state directory for root: the outbox of undelivered pings, learned ping URLs, sync state, locks (users: $XDG_STATE_HOME/heartbeat-agent, else ~/.local/state/heartbeat-agent; --state-dir and [agent] state_dir override)."),
    ("/usr/share/doc/heartbeat-agent/examples/config.toml", "Every configuration key, commented, with its default (Debian package)."),
];

/// EXIT STATUS, ENVIRONMENT and FILES as roff.
fn extra_sections() -> String {
    let mut out = String::new();
    for (title, entries) in [
        ("EXIT STATUS", EXIT_STATUS),
        ("ENVIRONMENT", ENVIRONMENT),
        ("FILES", FILES),
    ] {
        out.push_str(&format!(".SH \"{title}\"\n"));
        for (term, text) in entries {
            out.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(term), roff(text)));
        }
    }
    out
}

/// `text` escaped for roff: backslashes, hyphens (so they stay hyphens, not dashes) and a
/// leading dot or apostrophe (which would start a request).
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// Writes `bytes` to stdout; a closed pipe is not an error worth reporting.
fn print(bytes: &[u8]) -> u8 {
    let _ = std::io::stdout().lock().write_all(bytes);
    exit::OK
}
