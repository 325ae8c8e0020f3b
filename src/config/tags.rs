//! The tags the agent gives the checks it creates (`[jobs.check] create = true`): the scope tag
//! sync finds a job's check by, the older form it adopts on upgrade, and the owner tag that
//! says which agent made it (docs/sync.md, "Checks the agent creates"). The one place that
//! spells them; `[jobs.check] tags` may not use their prefixes.

/// How the tag of a check the agent creates begins ([`scope_tag`]): reserved in `tags`.
pub(super) const SCOPE_TAG_PREFIX: &str = "heartbeat-agent:";

/// How the tag naming the owner of a created check begins ([`owner_tag`]): reserved in `tags`.
pub(crate) const OWNER_TAG_PREFIX: &str = "heartbeat-agent-owner:";

/// The reserved prefix `tag` starts with, if any.
pub(super) fn reserved_prefix(tag: &str) -> Option<&'static str> {
    [SCOPE_TAG_PREFIX, OWNER_TAG_PREFIX]
        .into_iter()
        .find(|prefix| tag.starts_with(prefix))
}

/// The tag of the check sync creates for `job`, the one place that spells it:
/// `heartbeat-agent:<cluster>/<job>` in a cluster (every agent of it shares the job's one
/// check), else `heartbeat-agent:<host>@<scope id>/<job>`, where the scope id
/// ([`crate::identity::scope_id`]) is derived from the machine id and the config file's path:
/// two configs on one machine, or two machines with the same host name, never share a check,
/// and a lost state directory finds its check again. The host name is only there to be read.
/// Cluster and node names hold no `@` nor `/`, so the two forms never meet. The service's only
/// constraint on a tag is that it is not empty (`ChecksV1HeartbeatCheckCreate`,
/// `tags.items.minLength: 1`), which this always holds.
pub fn scope_tag(cluster: Option<&str>, host: &str, scope_id: &str, job: &str) -> String {
    match cluster {
        Some(cluster) => format!("{SCOPE_TAG_PREFIX}{cluster}/{job}"),
        None => format!("{SCOPE_TAG_PREFIX}{host}@{scope_id}/{job}"),
    }
}

/// The tag older agents created `job`'s check with outside a cluster (the host name was the
/// scope), adopted on upgrade (see [`super::CheckSettings::adopt_tag`]).
pub fn adopt_tag(host: &str, job: &str) -> String {
    format!("{SCOPE_TAG_PREFIX}{host}/{job}")
}

/// The tag that names the agent owning a created check.
pub(crate) fn owner_tag(identity: &crate::identity::Identity) -> String {
    format!("{OWNER_TAG_PREFIX}{identity}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_is_the_cluster_else_the_host_and_its_scope_id() {
        assert_eq!(
            scope_tag(Some("prod-eu"), "host-a", "0123456789abcdef", "backup"),
            "heartbeat-agent:prod-eu/backup",
            "in a cluster the scope is the cluster, not the host"
        );
        assert_eq!(
            scope_tag(None, "host-a", "0123456789abcdef", "backup"),
            "heartbeat-agent:host-a@0123456789abcdef/backup"
        );
        assert_eq!(
            adopt_tag("host-a", "backup"),
            "heartbeat-agent:host-a/backup"
        );
        assert_eq!(
            reserved_prefix("heartbeat-agent-owner:x"),
            Some(OWNER_TAG_PREFIX)
        );
        assert_eq!(reserved_prefix("heartbeat-agent:x"), Some(SCOPE_TAG_PREFIX));
        assert_eq!(reserved_prefix("heartbeat-agentx"), None);
    }
}
