//! Tags merge: a check's `tags` are shared between the config, the agent and whoever else tags
//! the check (the web UI, another tool), but the service's `PUT` takes `tags` whole (it keeps a
//! field it is not sent, not part of an array). So sync owns only *its* tags and keeps the
//! others:
//!
//! - the agent's own tags: what the desired definition carries (the configured `tags`, and for
//!   a check the agent creates its scope tag and whatever other tag marks it as the agent's),
//!   what this agent sent before (the last accepted definition: a tag the config no longer sets
//!   is removed once), and, on a check that carries an agent tag, every tag starting with
//!   [`AGENT_TAG`] (a stale one of the agent's is the agent's to remove);
//! - every other tag on the check stays: a `PUT` that carries `tags` sends the service's tags
//!   less the agent's unwanted ones, plus the desired ones ([`merged`]);
//! - comparing and drift see only the agent's own tags ([`seen`]): a tag added in the web UI is
//!   no difference, a removed configured or agent tag is.
//!
//! Pure functions of the three tag lists; the pass decides when it knows the service's tags
//! (it read the check) and when it leaves `tags` out of a `PUT` (they did not change: the
//! service keeps what it has).

/// How every tag the agent puts on a check begins (the scope tag
/// [`crate::config::check::scope_tag`], and any other tag marking the check as the agent's).
pub const AGENT_TAG: &str = "heartbeat-agent";

/// Whether `tag` is the agent's or the config's business, given the desired tags and the ones
/// this agent sent before (see the module header).
fn owned(tag: &str, desired: &[String], accepted: Option<&[String]>) -> bool {
    let agents_check = desired.iter().any(|t| t.starts_with(AGENT_TAG));
    desired.iter().any(|t| t == tag)
        || accepted.is_some_and(|a| a.iter().any(|t| t == tag))
        || (agents_check && tag.starts_with(AGENT_TAG))
}

/// The service's tags (`remote`) as sync compares them with `desired`: only the agent's own, in
/// the desired order when they are the same set (an order of the service's is no difference).
pub fn seen(remote: &[String], desired: &[String], accepted: Option<&[String]>) -> Vec<String> {
    let mut own: Vec<String> = remote
        .iter()
        .filter(|t| owned(t, desired, accepted))
        .cloned()
        .collect();
    own.dedup();
    let same = own.len() == desired.len() && desired.iter().all(|t| own.contains(t));
    if same {
        desired.to_vec()
    } else {
        own
    }
}

/// What a `PUT` sends as `tags`: the service's tags (`remote`) in their order, less the agent's
/// own that are not desired, then the desired ones the service lacks.
pub fn merged(remote: &[String], desired: &[String], accepted: Option<&[String]>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let kept = remote
        .iter()
        .filter(|t| desired.contains(t) || !owned(t, desired, accepted));
    for tag in kept.chain(desired) {
        if !out.contains(tag) {
            out.push(tag.clone());
        }
    }
    out
}

/// Whether two tag lists hold the same tags (order aside).
pub fn same(a: &[String], b: &[String]) -> bool {
    a.iter().all(|t| b.contains(t)) && b.iter().all(|t| a.contains(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn tags_set_elsewhere_stay_and_are_no_difference() {
        let desired = tags(&["db", "heartbeat-agent:h/backup"]);
        let remote = tags(&["team-x", "heartbeat-agent:h/backup", "db"]);
        assert_eq!(
            seen(&remote, &desired, None),
            desired,
            "same set, desired order"
        );
        assert_eq!(
            merged(&remote, &desired, None),
            tags(&["team-x", "heartbeat-agent:h/backup", "db"])
        );
    }

    #[test]
    fn a_removed_agent_or_configured_tag_is_a_difference_and_comes_back() {
        let desired = tags(&["db", "heartbeat-agent:h/backup"]);
        let remote = tags(&["team-x"]);
        assert!(seen(&remote, &desired, Some(&desired)).is_empty());
        assert_eq!(
            merged(&remote, &desired, Some(&desired)),
            tags(&["team-x", "db", "heartbeat-agent:h/backup"])
        );
    }

    #[test]
    fn a_tag_the_config_dropped_and_stale_agent_tags_are_removed_others_kept() {
        let accepted = tags(&["old", "heartbeat-agent:h/backup"]);
        let desired = tags(&["heartbeat-agent:h/backup", "heartbeat-agent-owner:x"]);
        let remote = tags(&[
            "old",
            "ui",
            "heartbeat-agent:h/backup",
            "heartbeat-agent:stale/b",
        ]);
        assert_eq!(
            seen(&remote, &desired, Some(&accepted)),
            tags(&["old", "heartbeat-agent:h/backup", "heartbeat-agent:stale/b"])
        );
        assert_eq!(
            merged(&remote, &desired, Some(&accepted)),
            tags(&["ui", "heartbeat-agent:h/backup", "heartbeat-agent-owner:x"])
        );
    }

    #[test]
    fn a_check_bound_by_id_leaves_agent_tags_it_does_not_carry_alone() {
        let desired = tags(&["prod"]);
        let remote = tags(&["heartbeat-agent:other/job", "prod"]);
        assert_eq!(seen(&remote, &desired, None), desired);
        assert_eq!(merged(&remote, &desired, None), remote);
    }
}
