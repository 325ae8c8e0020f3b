//! Who owns a check the agent created (docs/sync.md, "Whose check it is"). Outside a cluster a
//! created check carries, besides its scope tag, the owner tag
//! `heartbeat-agent-owner:<identity>` ([`crate::config::owner_tag`], the agent's
//! [`crate::identity::Identity`]); in a cluster the check is the cluster's (its scope is the
//! cluster name) and carries none.
//!
//! - [`stamped`]: the config of a pass with each created check's owner tag set, so the `POST`
//!   and every `PUT` carry it beside the scope tag.
//! - [`claim`]: a check found by the job's scope tag is the job's when it names no owner or this
//!   agent. One owned by another identity (two containers with the same host name and config
//!   path, a state directory copied to another machine) is never pinged nor changed: an ERROR
//!   names the job, the check and its owner, [`conflicts`] lists it for `/status` and `status`
//!   (`owned_by`, state `owned_by_other`),
//!   and [`conflict_counts`] counts it for `/metrics`.
//! - [`adopt`]: on upgrade, a check that older agents created under the host-named tag
//!   ([`crate::config::CheckSettings::adopt_tag`]) and that names no owner is adopted when no
//!   check carries the scope tag: its tags get the scope and owner tags (keeping the others),
//!   then it is read back, and it is this agent's only if its owner tag is the one it wrote (two
//!   configs of one host that upgrade at once: the last write wins, the other creates its own).

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use crate::api::model::{HeartbeatCheck, HeartbeatCheckUpdate};
use crate::api::ApiClient;
use crate::config::OWNER_TAG_PREFIX;
use crate::config::{Config, Job};

pub use crate::metrics_registry::{MetricsRegistry, OwnerConflict};

/// `config` with the owner tag of every job with `create = true` set to this agent's identity
/// (outside a cluster). Without an identity (no machine id, and a state directory that cannot
/// keep a generated one) the checks are created without an owner tag, which is logged.
pub(crate) fn stamped<'a>(config: &'a Config, state_dir: &Path) -> Cow<'a, Config> {
    let creates = config.jobs.iter().any(|job| job.check.create);
    if config.cluster.is_some() || !creates {
        return Cow::Borrowed(config);
    }
    let identity = match crate::identity::Identity::of(state_dir, &config.path) {
        Ok(identity) => identity,
        Err(err) => {
            tracing::warn!(
                state_dir = %state_dir.display(),
                error = %err,
                "this machine has no machine id and the state directory cannot keep a generated \
                 one: created checks get no owner tag, so another agent's check of the same scope \
                 cannot be told from this one's; make the state directory writable"
            );
            return Cow::Borrowed(config);
        }
    };
    let tag = crate::config::owner_tag(&identity);
    let mut owned = config.clone();
    for job in owned.jobs.iter_mut().filter(|job| job.check.create) {
        Arc::make_mut(&mut Arc::make_mut(job).check).owner_tag = Some(tag.clone());
    }
    Cow::Owned(owned)
}

/// The identities `check`'s owner tags name.
fn owners(check: &HeartbeatCheck) -> impl Iterator<Item = &str> {
    check
        .tags
        .iter()
        .filter_map(|tag| tag.strip_prefix(OWNER_TAG_PREFIX))
}

/// Whether `check`, found by `job`'s scope tag, is the job's (see the module header): `Ok`
/// when it names no owner or this agent, else the error that the job's report carries (after
/// the ERROR line and the counts).
pub(crate) fn claim(
    job: &Job,
    check: &HeartbeatCheck,
    metrics: &MetricsRegistry,
) -> Result<(), String> {
    let Some(ours) = job.check.owner_tag.as_deref() else {
        return Ok(());
    };
    let ours = ours.strip_prefix(OWNER_TAG_PREFIX).unwrap_or(ours);
    let other = match owners(check).find(|owner| *owner != ours) {
        Some(other) if !owners(check).any(|owner| owner == ours) => other.to_owned(),
        _ => {
            metrics.owner_lookup(&job.name, None);
            return Ok(());
        }
    };
    tracing::error!(
        job = %job.name,
        check = %check.id,
        owner = %other,
        identity = %ours,
        "the check carrying this job's scope tag is owned by another agent: it is neither pinged \
         nor changed; give each agent its own machine id (/etc/machine-id) or config path, or \
         remove the other agent's owner tag from the check to hand it over"
    );
    let conflict = OwnerConflict {
        check_id: check.id.clone(),
        owner: other.clone(),
    };
    metrics.owner_lookup(&job.name, Some(conflict));
    Err(format!(
        "job \"{}\": check {} carries the job's scope tag but is owned by agent {other} (this \
         agent is {ours}): it is neither pinged nor changed; give each agent its own machine id \
         or config path, or remove the tag \"{OWNER_TAG_PREFIX}{other}\" from the check to hand \
         it over",
        job.name, check.id
    ))
}

/// The check older agents created for `job` under its host-named tag, adopted (see the module
/// header); `None` when there is none to adopt. With `dry_run` the check is named, not changed.
pub(crate) async fn adopt(
    client: &ApiClient,
    job: &Job,
    dry_run: bool,
) -> Result<Option<HeartbeatCheck>, String> {
    let (Some(old), Some(scope), Some(owner)) = (
        job.check.adopt_tag.as_deref(),
        job.check.scope_tag.as_deref(),
        job.check.owner_tag.as_deref(),
    ) else {
        return Ok(None);
    };
    let found = super::created::tagged(client, old).await?;
    let Some(check) = super::created::oldest(
        &found
            .into_iter()
            .filter(|check| owners(check).next().is_none())
            .collect::<Vec<_>>(),
    )
    .cloned() else {
        return Ok(None);
    };
    if dry_run {
        return Ok(Some(check));
    }
    let mut tags = check.tags.clone();
    for tag in [scope, owner] {
        if !tags.iter().any(|t| t == tag) {
            tags.push(tag.to_owned());
        }
    }
    let body = HeartbeatCheckUpdate {
        tags: Some(tags),
        ..HeartbeatCheckUpdate::default()
    };
    client
        .update_heartbeat_check(&check.id, &body, None)
        .await
        .map_err(|e| e.to_string())?;
    let now = client
        .get_check(&check.id)
        .await
        .map_err(|e| e.to_string())?;
    let ours = owner.strip_prefix(OWNER_TAG_PREFIX).unwrap_or(owner);
    if owners(&now).any(|o| o != ours) {
        // Another agent of this host adopted it at the same moment, and wrote last.
        tracing::info!(job = %job.name, check = %check.id, "another agent adopted the check made under the older tag; creating this agent's own");
        return Ok(None);
    }
    tracing::info!(job = %job.name, check = %check.id, old_tag = old, tag = scope, "adopted the check an older agent created for this job: it now carries the scope and owner tags");
    Ok(Some(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(owner: Option<&str>) -> Job {
        let text = "[[jobs]]\nname = \"b\"\nschedule = \"0 3 * * *\"\ncommand = [\"true\"]\n";
        let config = Config::from_text(Path::new("c.toml"), text)
            .expect("config")
            .config;
        let mut job = (*config.jobs[0]).clone();
        Arc::make_mut(&mut job.check).owner_tag = owner.map(|o| format!("{OWNER_TAG_PREFIX}{o}"));
        job
    }

    fn check(id: &str, tags: &[&str]) -> HeartbeatCheck {
        serde_json::from_value(serde_json::json!({
            "id": id,
            "name": "b",
            "tags": tags,
        }))
        .expect("check")
    }

    #[test]
    fn a_check_is_the_jobs_when_it_names_no_owner_or_this_agent() {
        let ours = job(Some("aaaaaaaaaaaaaaaa"));
        let metrics = MetricsRegistry::default();
        let other = format!("{OWNER_TAG_PREFIX}bbbbbbbbbbbbbbbb");
        assert!(claim(&ours, &check("c0", &[other.as_str()]), &metrics).is_err());
        assert!(claim(&ours, &check("c1", &["x"]), &metrics).is_ok());
        assert!(
            !metrics.owner_conflicts().contains_key("b"),
            "the conflict is over"
        );
        let own = format!("{OWNER_TAG_PREFIX}aaaaaaaaaaaaaaaa");
        assert!(claim(&ours, &check("c1", &[own.as_str()]), &metrics).is_ok());
        assert!(!metrics.owner_conflicts().contains_key("b"));
        assert_eq!(metrics.owner_conflict_counts(), vec![("b".to_owned(), 1)]);
    }

    #[test]
    fn another_agents_check_is_refused_naming_the_job_the_check_and_the_owner() {
        let mut ours = job(Some("aaaaaaaaaaaaaaaa"));
        ours.name = "conflicted".to_owned();
        let other = format!("{OWNER_TAG_PREFIX}bbbbbbbbbbbbbbbb");
        let metrics = MetricsRegistry::default();
        let message = claim(&ours, &check("c9", &[other.as_str()]), &metrics).expect_err("foreign");
        assert!(
            message.starts_with("job \"conflicted\": check c9 carries the job's scope tag but is owned by agent bbbbbbbbbbbbbbbb (this agent is aaaaaaaaaaaaaaaa)"),
            "{message}"
        );
        let found = metrics.owner_conflicts();
        assert_eq!(
            found.get("conflicted"),
            Some(&OwnerConflict {
                check_id: "c9".to_owned(),
                owner: "bbbbbbbbbbbbbbbb".to_owned(),
            })
        );
        assert_eq!(
            metrics.owner_conflict_counts(),
            vec![("conflicted".to_owned(), 1)]
        );
        // Without an owner of its own (a cluster), any check of the scope is the job's.
        assert!(claim(&job(None), &check("c9", &[other.as_str()]), &metrics).is_ok());
    }
}
