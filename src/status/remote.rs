//! The remote view: what the service thinks of each bound check (a job's `check_id`, or the
//! check sync created for a `create = true` job: the caller gives the ids), fetched only when someone
//! asks (a `/status` request), cached for 60 s, at the lowest priority of the shared rate
//! limiter. A request can ask for a fresh view (`?refresh=1`); without the status token such a
//! request fetches at most once per [`REFRESH_EVERY`] (else it gets the cached view), so no
//! local user can spend the account's API quota through the endpoint. One `GET
//! /v1/check-statuses` per refresh, plus one events request per bound check (`GET
//! /v1/checks/heartbeats/{id}/events?limit=1&startTime=<24 h ago>`: its newest event, and the
//! event's statistics from `GET .../events/{id}` when the list carries none). The agent's ping
//! code does not keep the `eventId` of ping answers, so the events list is where ids come from.
//!
//! The events list only covers a window (the service's default is the last 24 hours), so an
//! empty answer does not mean "never pinged": a check with no event in the last day is asked
//! again over the last 365 days (the longest heartbeat period), and only an empty answer to
//! that is reported as never pinged. A daily job pinged 30 hours ago shows its last event.
//!
//! Failures are data: an API that is down makes the view `unavailable` with the reason. A check
//! whose events the service answers 404 for is remembered as gone ([`RemoteView::gone`]) until a
//! later fetch finds it, so `/status` and `/metrics` call it missing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::doc::{EventDoc, Heartbeat, Remote};
use crate::api::model::{CheckStatus, EventsWindow, HeartbeatEvent, HeartbeatStats};
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
    /// The checks whose events the service answered 404 for.
    gone: BTreeSet<String>,
}

/// The remote view's cache and client (`None` when no API is configured: every check is then
/// `unavailable` with that reason).
#[derive(Debug, Clone)]
pub(crate) struct RemoteView {
    client: Option<ApiClient>,
    cache: Arc<Mutex<Option<Fetched>>>,
    /// The check ids the last fetch found gone (their events answered 404), readable without
    /// waiting for a fetch (the metrics).
    gone: Arc<std::sync::Mutex<BTreeSet<String>>>,
}

impl RemoteView {
    /// A view fetched through `client` (give it `Priority::Low` and a single attempt).
    pub(crate) fn new(client: Option<ApiClient>) -> RemoteView {
        RemoteView {
            client,
            cache: Arc::new(Mutex::new(None)),
            gone: Arc::default(),
        }
    }

    /// The check ids the last fetch found gone.
    pub(crate) fn gone(&self) -> BTreeSet<String> {
        self.gone.lock().unwrap_or_else(|e| e.into_inner()).clone()
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
            if let Ok(view) = &result {
                *self.gone.lock().unwrap_or_else(|e| e.into_inner()) = view.gone.clone();
            }
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
    let mut gone = BTreeSet::new();
    for id in ids {
        let found = heartbeat(client, id).await;
        if found.is_none() {
            gone.insert(id.clone());
        }
        heartbeats.insert(
            id.clone(),
            found.unwrap_or_else(|| Heartbeat::Unavailable {
                reason: format!("the service has no heartbeat check {id}"),
            }),
        );
    }
    Ok(View {
        fetched_at: Utc::now(),
        statuses,
        heartbeats,
        gone,
    })
}

/// How far back a check with no event in the last day is searched before it counts as never
/// pinged: the longest heartbeat period the service accepts.
const NEVER_PINGED_WINDOW_DAYS: i64 = 365;

/// The statistics of check `id` from its newest event; `None` when the service answered 404
/// (it has no such check).
async fn heartbeat(client: &ApiClient, id: &str) -> Option<Heartbeat> {
    let unavailable = |reason: String| Some(Heartbeat::Unavailable { reason });
    let now = Utc::now();
    let mut found = None;
    for days in [1, NEVER_PINGED_WINDOW_DAYS] {
        let window = EventsWindow::newest_since(now - chrono::Duration::days(days));
        let lists = match client.list_heartbeat_events(id, &window).await {
            Ok(lists) => lists,
            Err(err) if err.is_not_found() => return None,
            Err(err) => return unavailable(format!("cannot read the events of check {id}: {err}")),
        };
        found = lists
            .iter()
            .flat_map(|list| list.events.iter().map(move |e| (e, list.stats.as_ref())))
            .max_by_key(|(event, _)| event.timestamp)
            .map(|(event, stats)| (event.clone(), stats.cloned()));
        if found.is_some() {
            break;
        }
    }
    let Some((event, stats)) = found else {
        return Some(Heartbeat::NeverPinged {
            searched_days: NEVER_PINGED_WINDOW_DAYS as u32,
        });
    };
    let stats = match stats {
        Some(stats) => stats,
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
    Some(available(&event, &stats))
}

fn available(event: &HeartbeatEvent, stats: &HeartbeatStats) -> Heartbeat {
    let ratio = |period: &Option<crate::api::model::PeriodStats>| {
        period.as_ref().and_then(|p| p.success_ratio.current_period)
    };
    Heartbeat::Available {
        success_ratio_24h: ratio(&stats.last_24_hours),
        success_ratio_7d: ratio(&stats.last_7_days),
        latest_event: EventDoc {
            id: event.id.clone(),
            state: event.state.as_ref().map(|s| s.as_str().to_owned()),
            time: event.timestamp.map(|t| t.with_timezone(&Utc)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiClientConfig;
    use crate::emulator::{Emulator, EmulatorOptions, Fixtures};
    use crate::redact::Secret;

    /// Against the emulator (its events list is windowed like the service's): a daily job
    /// pinged 30 hours ago shows its last event, a check never pinged says so.
    #[tokio::test]
    async fn a_ping_older_than_a_day_is_not_never_pinged() {
        let emulator = Emulator::start(EmulatorOptions {
            fixtures: Fixtures::default(),
            ..EmulatorOptions::default()
        })
        .await
        .expect("emulator");
        for id in ["daily", "never"] {
            emulator
                .add_heartbeat_check(&serde_json::json!({"id": id, "name": id}))
                .expect("check");
        }
        let ping_30h_ago = Utc::now() - chrono::Duration::hours(30);
        let stamp = ping_30h_ago.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        emulator
            .add_heartbeat_event(
                "daily",
                &serde_json::json!({"state": "RECEIVED", "timestamp": stamp}),
            )
            .expect("event");
        let api = ApiClient::new(ApiClientConfig::new(
            emulator.base_url(),
            Secret::new(emulator.api_key().to_owned()),
        ))
        .expect("client");
        let daily = heartbeat(&api, "daily").await;
        let Some(Heartbeat::Available { latest_event, .. }) = &daily else {
            panic!("{daily:?}");
        };
        assert_eq!(latest_event.state.as_deref(), Some("RECEIVED"));
        let age = Utc::now() - latest_event.time.expect("a time");
        assert!(age > chrono::Duration::hours(29), "{age}");
        assert!(matches!(
            heartbeat(&api, "never").await,
            Some(Heartbeat::NeverPinged { searched_days: 365 })
        ));
        assert!(
            heartbeat(&api, "no-such-check").await.is_none(),
            "a 404 is gone"
        );
        let queries: Vec<String> = emulator
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/events"))
            .filter_map(|r| r.query)
            .collect();
        assert_eq!(queries.len(), 5, "{queries:?}");
        assert!(
            queries.iter().all(|q| q.starts_with("limit=1&startTime=")),
            "{queries:?}"
        );
        emulator.shutdown().await;
    }
}
