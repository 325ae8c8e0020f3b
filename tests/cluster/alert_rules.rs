//! The shipped Prometheus alerting rules (`packaging/prometheus/heartbeat-agent.rules.yml`) name
//! only metrics a real daemon exports: every `heartbeat_agent_*` name in them is a family of the
//! `/metrics` of an agent that syncs a check and leads a cluster on real etcd (the widest set of
//! families), so a rename cannot silently break an alert. Their behaviour is promtool's to test
//! (`scripts/check-alert-rules.sh`).

use std::collections::BTreeSet;
use std::path::Path;

use super::agents::Agent;
use super::sync::{emulator, first_put, job, write};
use crate::util::etcd::EtcdCluster;

/// The metric names the rule file uses.
fn rule_metrics() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("packaging/prometheus/heartbeat-agent.rules.yml");
    let text = std::fs::read_to_string(&path).expect("the rule file");
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with("expr:")) {
        let mut rest = line;
        while let Some(at) = rest.find("heartbeat_agent_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            names.insert(name);
        }
    }
    names
}

#[test]
fn every_metric_the_alert_rules_name_is_exported_by_a_syncing_cluster_agent() {
    let names = rule_metrics();
    assert!(names.len() >= 8, "the rules' metrics: {names:?}");
    let Some(etcd) = EtcdCluster::start(1) else {
        return;
    };
    let emulator = emulator();
    let mut agent = Agent::new("a").terminate_on_drop();
    write(&agent, &etcd, &emulator, &job("tags = [\"one\"]"));
    agent.spawn(&[("EMULATOR_KEY".to_owned(), emulator.api_key().to_owned())]);
    first_put(&emulator);
    crate::util::eventually(
        std::time::Duration::from_secs(15),
        "every family the rules name",
        || {
            let metrics = agent.metrics();
            let families: BTreeSet<&str> = metrics
                .lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .filter_map(|l| l.split_whitespace().next())
                .collect();
            let absent: Vec<&String> = names
                .iter()
                .filter(|n| !families.contains(n.as_str()))
                .collect();
            let leader = metrics.contains("heartbeat_agent_cluster_leader{node=\"a\"} 1");
            match (absent.is_empty(), leader) {
                (true, true) => Ok(()),
                _ => Err(format!(
                    "not exported: {absent:?}; leader seen {leader}:\n{metrics}"
                )),
            }
        },
    );
}
