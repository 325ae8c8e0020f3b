//! The remote view: what the service thinks of each bound check, fetched only when someone
//! asks (a `/status` request), cached for 60 s, at the lowest priority of the shared rate
//! limiter. A request can ask for a fresh view (`?refresh=1`); without the status token such a
//! request fetches at most once per [`REFRESH_EVERY`] (else it gets the cached view), so no
//! local user can spend the account's API quota through the endpoint. One `GET /v1/check-statuses` per refresh, plus one events request per bound check
//! (`GET /v1/checks/heartbeats/{id}/events`; its newest event's id, and the event's statistics,
//! from `GET .../events/{id}` when the list carries none). The agent's ping code does not keep
//! the `eventId` of ping answers, so the events list is where ids come from.
//!
//! Failures are data: an API that is down makes the view `unavailable` with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::doc::{EventDoc, Heartbeat, Remote};
use crate::api::model::{CheckStatus, HeartbeatEvent, HeartbeatStats};
use crate::api::ApiClient;

/// How long a fetched view is served before the next request fetches again.
pub(crate) const CACHE_FOR: Duration = Duration::from_secs(60);

/// Upper bound of one refresh, so a hanging API cannot hold `/status`.
pub(crate) const FETCH_LIMIT: Duration = Duration::from_secs(10);

/// Least time between two fetches forced by requests without the token.
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Whether a request wants the cached view or a fresh one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refresh {
    /// The cached view while it is younger than [`CACHE_FOR`].
    Cached,
    /// A fresh view unless the cached one is younger than [`REFRESH_EVERY`] (`?refresh=1`
    /// from anyone).
    Limited,
    /// A fresh view (`?refresh=1` with the status token, and the background refresh).
    Now,
}

/// One fetch: the result for every check id asked, or why nothing could be fetched.
#[derive(Debug, Clone)]
struct Fetched {
    at: Instant,
    ids: BTreeSet<String>,
    result: Result<View, String>,
}

#[derive(Debug, Clone)]
struct View {
    fetched_at: DateTime<Utc>,
    statuses: BTreeMap<String, CheckStatus>,
    heartbeats: BTreeMap<String, Heartbeat>,
}

/// The remote view's cache and client (`None` when no API is configured: every check is then
/// `unavailable` with that reason).
#[derive(Debug, Clone)]
pub(crate) struct RemoteView {
    client: Option<ApiClient>,
    cache: Arc<Mutex<Option<Fetched>>>,
}

impl RemoteView {
    /// A view fetched through `client` (give it `Priority::Low` and a single attempt).
    pub(crate) fn new(client: Option<ApiClient>) -> RemoteView {
        RemoteView {
            client,
            cache: Arc::new(Mutex::new(None)),
        }
    }

    /// The view of each of `ids` by check id: from the cache when it covers them and is
    /// young enough for `refresh`, else fetched now.
    pub(crate) async fn get(
        &self,
        ids: &BTreeSet<String>,
        refresh: Refresh,
    ) -> BTreeMap<String, Remote> {
        let Some(client) = &self.client else {
            let reason = "no API configured ([api] base_url and a key)".to_owned();
            return unavailable_all(ids, &reason);
        };
        if ids.is_empty() {
            return BTreeMap::new();
        }
        // Held during the fetch: concurrent requests wait for one fetch instead of each making
        // their own.
        let mut cache = self.cache.lock().await;
        let young_enough = match refresh {
            Refresh::Cached => CACHE_FOR,
            Refresh::Limited => REFRESH_EVERY,
            Refresh::Now => Duration::ZERO,
        };
        let fresh = cache
            .as_ref()
            .is_some_and(|f| f.at.elapsed() < young_enough && ids.is_subset(&f.ids));
        if !fresh {
            let result = match tokio::time::timeout(FETCH_LIMIT, fetch(client, ids)).await {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "the API did not answer within {}s",
                    FETCH_LIMIT.as_secs()
                )),
            };
            *cache = Some(Fetched {
                at: Instant::now(),
                ids: ids.clone(),
                result,
            });
        }
        let fetched = cache.as_ref().expect("filled above");
        match &fetched.result {
            Err(reason) => unavailable_all(ids, reason),
            Ok(view) => ids
                .iter()
                .map(|id| {
                    let heartbeat = view.heartbeats.get(id).cloned().unwrap_or_else(|| {
                        Heartbeat::Unavailable {
                            reason: "not fetched".to_owned(),
                        }
                    });
                    let remote = Remote::Available {
                        fetched_at: view.fetched_at,
                        check_status: view.statuses.get(id).cloned().map(Box::new),
                        heartbeat,
                    };
                    (id.clone(), remote)
                })
                .collect(),
        }
    }
}

fn unavailable_all(ids: &BTreeSet<String>, reason: &str) -> BTreeMap<String, Remote> {
    ids.iter()
        .map(|id| {
            let remote = Remote::Unavailable {
                reason: reason.to_owned(),
            };
            (id.clone(), remote)
        })
        .collect()
}

/// Fetches the statuses list, then each check's latest event and statistics.
async fn fetch(client: &ApiClient, ids: &BTreeSet<String>) -> Result<View, String> {
    let statuses = client
        .list_check_statuses()
        .await
        .map_err(|err| format!("the API is unavailable: {err}"))?;
    let statuses = statuses
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s.check_id.clone()?, s)))
        .filter(|(id, _)| ids.contains(id))
        .collect();
    let mut heartbeats = BTreeMap::new();
    for id in ids {
        heartbeats.insert(id.clone(), heartbeat(client, id).await);
    }
    Ok(View {
        fetched_at: Utc::now(),
        statuses,
        heartbeats,
    })
}

/// The statistics of check `id` from its newest event.
async fn heartbeat(client: &ApiClient, id: &str) -> Heartbeat {
    let unavailable = |reason: String| Heartbeat::Unavailable { reason };
    let lists = match client.list_heartbeat_events(id).await {
        Ok(lists) => lists,
        Err(err) if err.is_not_found() => {
            return unavailable(format!("the service has no heartbeat check {id}"))
        }
        Err(err) => return unavailable(format!("cannot read the events of check {id}: {err}")),
    };
    let newest = lists
        .iter()
        .flat_map(|list| list.events.iter().map(move |e| (e, list.stats.as_ref())))
        .max_by_key(|(event, _)| event.timestamp);
    let Some((event, stats)) = newest else {
        return unavailable("no heartbeat event recorded yet (no ping received)".to_owned());
    };
    let stats = match stats {
        Some(stats) => stats.clone(),
        None => match client.get_heartbeat_event(id, &event.id).await {
            Ok(with_stats) => with_stats.stats,
            Err(err) => {
                return unavailable(format!(
                    "cannot read event {} of check {id}: {err}",
                    event.id
                ))
            }
        },
    };
    available(event, &stats)
}

fn available(event: &HeartbeatEvent, stats: &HeartbeatStats) -> Heartbeat {
    let state = match serde_json::to_value(&event.state) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{:?}", event.state),
    };
    Heartbeat::Available {
        success_ratio_24h: stats.last_24_hours.success_ratio.current_period,
        success_ratio_7d: stats.last_7_days.success_ratio.current_period,
        latest_event: EventDoc {
            id: event.id.clone(),
            state,
            time: event.timestamp.with_timezone(&Utc),
        },
    }
}
