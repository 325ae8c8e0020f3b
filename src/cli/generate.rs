//! `heartbeat-agent completions SHELL` and `heartbeat-agent manpage`: shell completions and roff
//! man pages generated from the clap definition of the command line, so they cannot drift from
//! it. The Debian package ships both (`scripts/build-deb.sh` generates them).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{exit, print_error, Cli, GlobalArgs};

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
    clap_complete::generate(args.shell, &mut command, "heartbeat-agent", &mut out);
    print(&out)
}

/// Prints the main man page (roff) on stdout, or writes every page into `--out-dir`.
pub(crate) fn manpage(args: ManpageArgs, _global: &GlobalArgs) -> u8 {
    let command = Cli::command();
    if let Some(dir) = args.out_dir {
        return match clap_mangen::generate_to(command, &dir) {
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
    let mut out = Vec::new();
    if let Err(err) = clap_mangen::Man::new(command).render(&mut out) {
        print_error(format!("cannot render the man page: {err}"));
        return exit::FAILURE;
    }
    print(&out)
}

/// Writes `bytes` to stdout; a closed pipe is not an error worth reporting.
fn print(bytes: &[u8]) -> u8 {
    let _ = std::io::stdout().lock().write_all(bytes);
    exit::OK
}
