//! This machine's name, as pings send it in `Origin` (`run`, `ping`, the daemon) and the
//! daemon uses it to spread its jitter across hosts.

/// The host name (`localhost` when it is unknown, empty, not UTF-8 or holds control
/// characters, so it is always safe in a header).
pub fn name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty() && !h.chars().any(char::is_control))
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_name_is_header_safe() {
        let name = super::name();
        assert!(!name.is_empty());
        assert!(!name.chars().any(char::is_control), "{name:?}");
    }
}
