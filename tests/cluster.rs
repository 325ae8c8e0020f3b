//! Cluster mode (issue 17) against a real etcd cluster on 127.0.0.1 (`util::etcd`): the etcd
//! client itself, then agents sharing jobs: `sync`, one agent syncs (leader election, shared
//! ping URLs, accepted pings through etcd).

use std::path::Path;

use heartbeat_agent::cluster::Etcd;
use heartbeat_agent::config::{ClusterSettings, Config};
use heartbeat_agent::net::Net;

mod agents;
mod alert_rules;
mod bad_input;
mod client;
mod history;
mod identity;
mod outage;
mod promise;
mod reload;
mod slots;
mod sync;

/// The `[cluster]` settings of a config with `cluster` as the section's body (written as if
/// in `dir/config.toml`).
pub fn settings(dir: &Path, cluster: &str) -> ClusterSettings {
    let text = format!("[cluster]\n{cluster}\n");
    let loaded = Config::from_text(&dir.join("config.toml"), &text)
        .unwrap_or_else(|e| panic!("a valid [cluster]:\n{text}\n{e}"));
    loaded.config.cluster.expect("a [cluster] section")
}

/// A client of the endpoints in `endpoints` (a TOML line) with the cluster name `name`.
pub async fn client(endpoints: &str, extra: &str) -> Etcd {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = settings(
        dir.path(),
        &format!("{endpoints}\nname = \"t\"\nnode = \"a\"\n{extra}"),
    );
    Etcd::connect(&settings, &Net::default())
        .await
        .expect("connect to etcd")
}
