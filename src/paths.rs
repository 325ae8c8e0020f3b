//! Where the configuration file and the state directory are: the flag, else the configured
//! or environment value, else the default: the directories systemd names
//! (`$CONFIGURATION_DIRECTORY`, `$STATE_DIRECTORY`), else the XDG base directory rules for users
//! and `/etc`, `/var/lib` for root.

use std::path::{Path, PathBuf};

/// The environment variable naming the configuration file when `--config` is not given.
pub(crate) const CONFIG_ENV: &str = "HEARTBEAT_AGENT_CONFIG";

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|u| u.dir)
        })
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn xdg_dir(var: &str, fallback: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(dir) if PathBuf::from(&dir).is_absolute() => PathBuf::from(dir),
        _ => home().join(fallback),
    }
}

/// The configuration file to use: `--config`, else `$HEARTBEAT_AGENT_CONFIG`, else the default
/// for the user.
pub(crate) fn config_file(flag: Option<&PathBuf>) -> PathBuf {
    if let Some(path) = flag {
        return path.clone();
    }
    if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    default_config_file()
}

/// The environment variable systemd sets for a unit with `ConfigurationDirectory=` (a
/// colon-separated list of absolute paths); `config.toml` in its first entry is the default
/// configuration file when set.
pub(crate) const CONFIGURATION_DIRECTORY_ENV: &str = "CONFIGURATION_DIRECTORY";

/// `$CONFIGURATION_DIRECTORY/config.toml` (first entry) when systemd set it, else
/// `/etc/heartbeat-agent/config.toml` for root, else
/// `$XDG_CONFIG_HOME/heartbeat-agent/config.toml` (`~/.config/...` when `XDG_CONFIG_HOME` is
/// unset, as it is under cron).
pub(crate) fn default_config_file() -> PathBuf {
    if let Some(dir) = first_absolute(CONFIGURATION_DIRECTORY_ENV) {
        return dir.join("config.toml");
    }
    if is_root() {
        PathBuf::from("/etc/heartbeat-agent/config.toml")
    } else {
        xdg_dir("XDG_CONFIG_HOME", ".config").join("heartbeat-agent/config.toml")
    }
}

/// The environment variable systemd sets for a unit with `StateDirectory=` (a colon-separated
/// list of absolute paths); its first entry is the default state directory when set.
pub(crate) const STATE_DIRECTORY_ENV: &str = "STATE_DIRECTORY";

/// The state directory: `--state-dir` (`flag`), else `[agent] state_dir` (`configured`), else
/// [`default_state_dir`].
pub(crate) fn state_dir(flag: Option<&Path>, configured: Option<&Path>) -> PathBuf {
    flag.or(configured)
        .map_or_else(default_state_dir, Path::to_path_buf)
}

/// `$STATE_DIRECTORY` (first entry) when systemd set it, else `/var/lib/heartbeat-agent` for
/// root, else `$XDG_STATE_HOME/heartbeat-agent` (`~/.local/state/heartbeat-agent` when unset).
/// Each user has their own by default.
pub(crate) fn default_state_dir() -> PathBuf {
    if let Some(dir) = first_absolute(STATE_DIRECTORY_ENV) {
        return dir;
    }
    if is_root() {
        PathBuf::from("/var/lib/heartbeat-agent")
    } else {
        xdg_dir("XDG_STATE_HOME", ".local/state").join("heartbeat-agent")
    }
}

/// The first entry of the colon-separated list in `$var`, when it is an absolute path.
fn first_absolute(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .and_then(|list| std::env::split_paths(&list).next())
        .filter(|dir| dir.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_config_which_wins_over_the_default() {
        let (flag, configured) = (Path::new("/flag"), Path::new("/configured"));
        assert_eq!(state_dir(Some(flag), Some(configured)), flag);
        assert_eq!(state_dir(None, Some(configured)), configured);
        assert_eq!(state_dir(None, None), default_state_dir());
    }
}
