//! A run's id: a random (version 4) UUID made once per run by [`super::run_with_pings`], so every
//! trace of one run can be told from another run of the same job, even when runs overlap: the
//! command's `HEARTBEAT_AGENT_RUN_ID`, the daemon's log lines, the run's record (`/status`,
//! the history) and the `{run_id}` of its ping, start and fail URLs, which pairs a start with
//! its end at the service (healthchecks' `rid`).
//!
//! The `uuid` crate gives the text form and the version and variant bits; the random bytes
//! come from `rand`'s thread generator (a CSPRNG seeded by the OS), already in the tree, so
//! no second RNG is built in.

use std::fmt;

/// One run's id (a version 4 UUID, shown hyphenated in lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RunId(uuid::Uuid);

impl RunId {
    /// A new random id.
    pub(crate) fn new() -> RunId {
        RunId(uuid::Builder::from_random_bytes(rand::random()).into_uuid())
    }

    /// A fixed id, for tests that compare records.
    #[cfg(test)]
    pub(crate) fn fixed(n: u128) -> RunId {
        RunId(uuid::Uuid::from_u128(n))
    }

    /// The id as its 36 characters (`8-4-4-4-12` lower-case hex digits).
    pub(crate) fn text(&self) -> String {
        self.0.hyphenated().to_string()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_run_gets_a_new_version_4_uuid() {
        let (a, b) = (RunId::new(), RunId::new());
        assert_ne!(a, b);
        let text = a.text();
        assert_eq!(text.len(), 36);
        assert_eq!(text.as_bytes()[14], b'4', "{text}");
        assert!(
            matches!(text.as_bytes()[19], b'8' | b'9' | b'a' | b'b'),
            "{text}"
        );
        assert_eq!(
            uuid::Uuid::parse_str(&text).map(|u| u.get_version_num()),
            Ok(4)
        );
    }
}
