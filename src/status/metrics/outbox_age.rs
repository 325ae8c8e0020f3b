//! How long the oldest ping has waited in the outbox: what an alert on pings stuck there
//! (a ping host down or unreachable for long) compares with a threshold, since the depth alone
//! says nothing of how long they have waited.

use std::time::Duration;

use super::Text;

/// `heartbeat_agent_outbox_oldest_age_seconds`: the age of the oldest pending or in-flight
/// entry (since the success it carries happened), 0 when the outbox is empty. A newer success
/// for the same target replaces an older waiting one (only the newest is worth sending), so
/// for a job that runs more often than the age grows it is the age of its latest success.
pub(super) fn families(out: &mut Text, oldest: Duration) {
    out.family(
        "heartbeat_agent_outbox_oldest_age_seconds",
        "gauge",
        "Seconds the oldest ping waiting in the outbox has waited (0 when none waits).",
    );
    out.sample(
        "heartbeat_agent_outbox_oldest_age_seconds",
        &[],
        oldest.as_secs_f64(),
    );
}
