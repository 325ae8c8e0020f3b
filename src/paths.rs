//! Where the configuration file and the state directory are: the flag, else the configured
//! or environment value, else the default: the directories systemd names
//! (`$CONFIGURATION_DIRECTORY`, `$STATE_DIRECTORY`), else the XDG base directory rules for users
//! and `/etc`, `/var/lib` for root. A state directory that is a symbolic link is followed only
//! when this user or root owns both the link and the directory it leads to
//! ([`check_state_dir`]).

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

/// Refuses a state directory that is a symbolic link owned by another user than this one or
/// root, or that leads to a directory such a user owns: that user could point it anywhere, and
/// the agent (often root) would create, write and chmod its files there. A link this user or
/// root owns, to a directory this user or root owns, is followed (a state directory moved to
/// another disk). A missing directory is fine: it is created when first written. The error
/// names the link, its owner and what to do.
pub(crate) fn check_state_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let trusted = |uid: u32| uid == me || uid == 0;
    let shown = dir.display();
    let link = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(format!("cannot inspect the state directory {shown}: {err}")),
    };
    if !link.file_type().is_symlink() {
        return Ok(());
    }
    let fix = format!(
        "replace it with a directory owned by uid {me}, or set state_dir (or --state-dir) to one"
    );
    if !trusted(link.uid()) {
        return Err(format!(
            "the state directory {shown} is a symbolic link owned by uid {}, not by this user \
             (uid {me}) or root; it is not followed: {fix}",
            link.uid()
        ));
    }
    match std::fs::metadata(dir) {
        Ok(target) if !trusted(target.uid()) => Err(format!(
            "the state directory {shown} is a symbolic link to a directory owned by uid {}, \
             not by this user (uid {me}) or root; it is not followed: {fix}",
            target.uid()
        )),
        _ => Ok(()),
    }
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
    #[test]
    fn a_state_dir_link_of_this_user_is_followed_and_a_missing_dir_is_fine() {
        let root = tempfile::tempdir().expect("tempdir");
        let real = root.path().join("real");
        std::fs::create_dir(&real).expect("dir");
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        assert_eq!(super::check_state_dir(&link), Ok(()));
        assert_eq!(super::check_state_dir(&real), Ok(()));
        assert_eq!(super::check_state_dir(&root.path().join("absent")), Ok(()));
    }

    use super::*;

    #[test]
    fn the_flag_wins_over_the_config_which_wins_over_the_default() {
        let (flag, configured) = (Path::new("/flag"), Path::new("/configured"));
        assert_eq!(state_dir(Some(flag), Some(configured)), flag);
        assert_eq!(state_dir(None, Some(configured)), configured);
        assert_eq!(state_dir(None, None), default_state_dir());
    }
}
