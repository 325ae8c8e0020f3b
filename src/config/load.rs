//! Reading the configuration file and turning it into a [`Loaded`] config or a [`LoadError`]:
//! the file is read safely ([`CONFIG_FILE_MAX`], no FIFO, UTF-8, a message per OS error that
//! says what to do), parsed, validated, and every problem rendered as `path:line:col: ...`.
//!
//! Its own file because it is the entry point that runs the two stages (`parse.rs`, then
//! `validate.rs`) over a file it reads; the model they produce is in `mod.rs`.

use std::path::Path;

use super::{parse, problem, validate, Config};

/// A configuration that loaded, with the warnings found on the way (a job that pings nothing,
/// a key file readable by others, ...).
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The validated configuration.
    pub config: Config,
    /// Problems that do not stop the agent, one message each.
    pub warnings: Vec<String>,
}

/// Why a configuration could not be loaded: every problem found, each one line of
/// `path:line:col: ...` with a hint.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct LoadError {
    /// One message per problem, in file order.
    pub problems: Vec<String>,
    /// The file could not be read at all (missing, unreadable): its one problem says so, and
    /// nothing in it was found invalid.
    pub unread: bool,
}

impl Config {
    /// Reads and validates the file at `path`: every problem is collected into the error, each
    /// one line `path:line:col: ...` with a hint; warnings come back with the config.
    pub fn load(path: &Path) -> Result<Loaded, LoadError> {
        let text = read_file(path).map_err(|problem| LoadError {
            problems: vec![problem],
            unread: true,
        })?;
        Self::from_text(path, &text)
    }

    /// [`Config::load`] for a command that sends no fail ping (`status`, `history`, `pause`,
    /// `sync`, `api`...): the `fail_headers` values held in a file or a variable are not read,
    /// so one unset in this shell (or a file only the daemon may read) is no problem here. Every
    /// other check is the same.
    pub fn load_for_reading(path: &Path) -> Result<Loaded, LoadError> {
        let text = read_file(path).map_err(|problem| LoadError {
            problems: vec![problem],
            unread: true,
        })?;
        Self::validate(path, &text, false)
    }

    /// Validates `text` as if read from `path` (which names it in messages and anchors relative
    /// paths).
    pub fn from_text(path: &Path, text: &str) -> Result<Loaded, LoadError> {
        Self::validate(path, text, true)
    }

    /// [`Config::from_text`], reading the `fail_headers` secrets or not.
    fn validate(path: &Path, text: &str, read_header_secrets: bool) -> Result<Loaded, LoadError> {
        let is_root = nix::unistd::geteuid().is_root();
        let lines = problem::Lines::new(text);
        let render = |problems: Vec<problem::Problem>| -> Vec<String> {
            problems.iter().map(|p| p.render(path, &lines)).collect()
        };
        let (raw, mut problems) = parse::parse(text);
        let Some(raw) = raw else {
            return Err(LoadError {
                problems: render(problems),
                unread: false,
            });
        };
        let (config, check) = validate::build(raw, path, &lines, is_root, read_header_secrets);
        problems.extend(check.errors);
        match config {
            Some(config) if problems.is_empty() => Ok(Loaded {
                config,
                warnings: render(check.warnings),
            }),
            _ => {
                problems.sort_by_key(|p| p.span.as_ref().map_or(0, |s| s.start));
                Err(LoadError {
                    problems: render(problems),
                    unread: false,
                })
            }
        }
    }
}

/// The largest configuration file read, in bytes: 8 MiB, several times a config of 10,000
/// jobs. Parsing takes about twice the file's size in memory, so a larger file (or a FIFO, a
/// device) is refused before it is read, by `daemon` (start and reload), `run` and
/// `config check` alike.
pub const CONFIG_FILE_MAX: u64 = 8 * 1024 * 1024;

/// What the configuration file is called in the messages of [`crate::persist::file::read_named`].
const CONFIG_FILE: &str = "a configuration file";

/// The configuration file's bytes, read as [`crate::persist::file::read_named`] reads a file: never
/// blocking (a FIFO is refused at once), never more than [`CONFIG_FILE_MAX`]. For the daemon's
/// watch of the file, which compares them with the last ones seen.
pub(crate) fn read_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::persist::file::read_named(path, CONFIG_FILE_MAX, CONFIG_FILE)
}

/// Reads the config file; the error names the path, the OS error and what to do.
fn read_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    match read_bytes(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|err| {
            format!(
                "{shown}: the configuration file is not valid UTF-8 (at byte {}); save it as UTF-8",
                err.utf8_error().valid_up_to()
            )
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "{shown}: configuration file not found; create it (see config/example.toml and \
             docs/config.md), or name another with --config FILE or ${}",
            crate::paths::CONFIG_ENV
        )),
        Err(err) if err.kind() == std::io::ErrorKind::InvalidData => Err(format!(
            "{shown}: cannot read the configuration file: {err}; make it a regular file of at \
             most {} MiB",
            CONFIG_FILE_MAX >> 20
        )),
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => Err(format!(
            "{shown}: cannot read the configuration file: {err}; run as a member of group \
             heartbeat-agent or with sudo (the packaged file is mode 640, group heartbeat-agent)"
        )),
        Err(err) => Err(format!(
            "{shown}: cannot read the configuration file: {err}; check that it is a readable file"
        )),
    }
}
