//! [`ApiClient`]: one async method per operation of the spec. Every request carries the bearer
//! key, the account header and the agent's `User-Agent`, goes through the shared rate limiter,
//! and is retried by the one loop of [`crate::net::retry`] when [`super::retry`] allows;
//! redirects and answer sizes are bounded by [`super::limits`]. This file holds the client, its
//! configuration and the operations; how one request is sent and its answer read is in
//! `client/send.rs`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::Url;

use super::model::*;
use super::{ApiError, Operation, Priority, RateLimiter};
use crate::net::{Net, RetryPolicy};
use crate::redact::Secret;

mod send;

/// The header that names the account.
pub const ACCOUNT_HEADER: &str = "x-service-account";

/// Everything a client needs. [`ApiClientConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct ApiClientConfig {
    /// `{base_url}` of the spec, e.g. `https://api.example.com` (a path prefix is kept).
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer <key>`.
    pub api_key: Secret,
    /// Sent as `x-service-account` when set.
    pub account_id: Option<String>,
    /// Limit on establishing the connection (default 10 s).
    pub connect_timeout: Duration,
    /// Limit on one whole attempt, connect to last body byte (default 30 s).
    pub request_timeout: Duration,
    /// How failures are retried.
    pub retry: RetryPolicy,
    /// The limiter shared by every client of the process (default [`RateLimiter::shared`]).
    pub rate_limiter: Arc<RateLimiter>,
    /// The priority of this client's requests in the limiter.
    pub priority: Priority,
    /// The trusted CAs and the proxy rule (default: the environment alone; a command sets
    /// the one it built from the config).
    pub net: Net,
}

impl ApiClientConfig {
    /// A configuration with default timeouts, retries, the process-wide rate limiter and the
    /// environment's connections ([`Net::default`]).
    pub fn new(base_url: impl Into<String>, api_key: Secret) -> Self {
        ApiClientConfig {
            base_url: base_url.into(),
            api_key,
            account_id: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            rate_limiter: RateLimiter::shared(),
            priority: Priority::Normal,
            net: Net::default(),
        }
    }
}

/// A client of the monitoring API. Cheap to clone; clones share connections and the limiter.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    key: Secret,
    retry: RetryPolicy,
    limiter: Arc<RateLimiter>,
    priority: Priority,
    net: Net,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("base", &self.base.as_str())
            .field("key", &self.key)
            .field("retry", &self.retry)
            .field("priority", &self.priority)
            .finish()
    }
}

impl ApiClient {
    /// What this client counts for `/metrics`: the registry of its connections
    /// ([`Net::metrics`]).
    pub fn metrics(&self) -> &crate::metrics_registry::MetricsRegistry {
        self.net.metrics()
    }

    /// Builds a client. Fails on a base URL that is not http(s) or an unusable header value.
    pub fn new(config: ApiClientConfig) -> Result<Self, ApiError> {
        let base = Url::parse(config.base_url.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base())
            .ok_or_else(|| {
                ApiError::Setup(format!(
                    "base URL {:?} is not an http(s) URL",
                    config.base_url
                ))
            })?;
        let mut headers = HeaderMap::new();
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", config.api_key.expose()))
            .map_err(|_| {
                ApiError::Setup("the API key holds characters not allowed in a header".into())
            })?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        if let Some(account) = &config.account_id {
            let value = HeaderValue::from_str(account).map_err(|_| {
                ApiError::Setup(format!(
                    "account id {account:?} is not a valid header value"
                ))
            })?;
            headers.insert(ACCOUNT_HEADER, value);
        }
        let http = config
            .net
            .client_builder(base.scheme() == "https")
            .default_headers(headers)
            .redirect(super::limits::redirect_policy())
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .build()
            .map_err(|e| ApiError::Setup(crate::redact::reqwest_error(&e)))?;
        Ok(ApiClient {
            http,
            base,
            key: config.api_key,
            retry: config.retry,
            limiter: config.rate_limiter,
            priority: config.priority,
            net: config.net,
        })
    }

    /// The same client with another retry policy (e.g. single attempts for the daemon's sync
    /// task, which retries whole passes itself).
    pub(crate) fn with_retry(&self, retry: RetryPolicy) -> Self {
        ApiClient {
            retry,
            ..self.clone()
        }
    }

    /// The API's host and port (`api.example.com:443`), for messages about an API that cannot
    /// be reached.
    pub fn host(&self) -> String {
        let host = self.base.host_str().unwrap_or_default();
        match self.base.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }

    /// The retry policy of this client.
    pub(crate) fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The rate limiter this client uses.
    pub fn rate_limiter(&self) -> &Arc<RateLimiter> {
        &self.limiter
    }

    /// `POST /v1/status-pages/services`. Not retried once it may have reached the service.
    pub async fn create_status_page_service(
        &self,
        body: &CreateStatusPageService,
    ) -> Result<StatusPageService, ApiError> {
        let url = self.url(&["v1", "status-pages", "services"], &[]);
        self.call(Operation::CreateStatusPageService, url, Some(body))
            .await
    }

    /// `GET /v1/status-pages/services`: one page.
    pub async fn list_status_page_services(
        &self,
        query: &ListStatusPageServices,
    ) -> Result<StatusPageServicePage, ApiError> {
        let mut pairs = Vec::new();
        if let Some(limit) = query.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(next) = &query.next_id {
            pairs.push(("nextId", next.clone()));
        }
        if let Some(paginated) = query.paginated {
            pairs.push(("paginated", paginated.to_string()));
        }
        let url = self.url(&["v1", "status-pages", "services"], &pairs);
        self.call(Operation::ListStatusPageServices, url, None::<&()>)
            .await
    }

    /// Every status page service, following `nextId` page by page (`limit` per page).
    pub async fn list_all_status_page_services(
        &self,
        limit: Option<u32>,
    ) -> Result<Vec<StatusPageService>, ApiError> {
        let mut all = Vec::new();
        let mut seen = HashSet::new();
        let mut query = ListStatusPageServices {
            limit,
            ..ListStatusPageServices::default()
        };
        loop {
            let page = self.list_status_page_services(&query).await?;
            all.extend(page.entries);
            match page.next_id {
                Some(next) if !seen.insert(next.clone()) => {
                    return Err(ApiError::Decode {
                        operation: Operation::ListStatusPageServices,
                        status: 200,
                        detail: "the nextId cursor repeated; stopped to avoid a loop".into(),
                    });
                }
                Some(next) => query.next_id = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// The address of one maintenance: `/v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
    fn maintenance_url(&self, window_id: i64, maintenance_id: &str) -> Url {
        let window = window_id.to_string();
        let path = [
            "v1",
            "maintenance-windows",
            &window,
            "maintenances",
            maintenance_id,
        ];
        self.url(&path, &[])
    }

    /// `GET /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
    pub async fn get_maintenance(
        &self,
        window_id: i64,
        maintenance_id: &str,
    ) -> Result<Maintenance, ApiError> {
        let url = self.maintenance_url(window_id, maintenance_id);
        self.call(Operation::GetMaintenance, url, None::<&()>).await
    }

    /// `PATCH /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`: new dates.
    pub async fn update_maintenance_dates(
        &self,
        window_id: i64,
        maintenance_id: &str,
        dates: &MaintenanceDates,
    ) -> Result<Maintenance, ApiError> {
        let url = self.maintenance_url(window_id, maintenance_id);
        self.call(Operation::UpdateMaintenanceDates, url, Some(dates))
            .await
    }

    /// `PUT /v1/checks/heartbeat/{id}`; `auto_assign_alerts` is sent only when given.
    pub async fn update_heartbeat_check(
        &self,
        check_id: &str,
        body: &HeartbeatCheckUpdate,
        auto_assign_alerts: Option<bool>,
    ) -> Result<HeartbeatCheck, ApiError> {
        let query = auto_assign_query(auto_assign_alerts);
        let url = self.url(&["v1", "checks", "heartbeat", check_id], &query);
        self.call(Operation::UpdateHeartbeatCheck, url, Some(body))
            .await
    }

    /// `GET /v1/checks/{id}`, outside the seed spec (published by the service): the check as
    /// the service has it now, whoever changed it last. A service without the route answers
    /// 404 or 405 ([`ApiError::is_not_found`] cannot tell that from a deleted check: a `PUT` of
    /// the same check can).
    pub async fn get_check(&self, check_id: &str) -> Result<HeartbeatCheck, ApiError> {
        let url = self.url(&["v1", "checks", check_id], &[]);
        self.call(Operation::GetCheck, url, None::<&()>).await
    }

    /// `GET /v1/checks`, outside the seed spec (published by the service): one page of checks.
    /// Without a `checkType` filter the page may hold checks of every type; they decode as
    /// [`HeartbeatCheck`] with what they share (id, name, tags, `checkType`, dates).
    pub async fn list_checks(&self, query: &ListChecks) -> Result<Vec<HeartbeatCheck>, ApiError> {
        let url = self.url(&["v1", "checks"], &query.query());
        self.call(Operation::ListChecks, url, None::<&()>).await
    }

    /// Every check `query` matches, following `page` from `query.page` (else 1) until a page
    /// holds fewer than the limit (`query.limit`, else 100, the service's maximum). A page that
    /// repeats the ids of the one before ends the walk with an error, so a service that ignores
    /// `page` cannot loop it forever.
    pub async fn list_all_checks(
        &self,
        query: &ListChecks,
    ) -> Result<Vec<HeartbeatCheck>, ApiError> {
        let limit = query.limit.unwrap_or(100);
        let mut query = ListChecks {
            limit: Some(limit),
            page: Some(query.page.unwrap_or(1)),
            ..query.clone()
        };
        let mut all: Vec<HeartbeatCheck> = Vec::new();
        let mut seen = HashSet::new();
        loop {
            let page = self.list_checks(&query).await?;
            let full = page.len() >= limit as usize;
            for check in page {
                if !seen.insert(check.id.clone()) {
                    return Err(ApiError::Decode {
                        operation: Operation::ListChecks,
                        status: 200,
                        detail: format!(
                            "page {} repeats a check of an earlier page; stopped to avoid a loop",
                            query.page.unwrap_or(1)
                        ),
                    });
                }
                all.push(check);
            }
            if !full {
                return Ok(all);
            }
            query.page = query.page.map(|p| p + 1);
        }
    }

    /// `POST /v1/checks/heartbeat`, outside the seed spec (published by the service): creates
    /// a heartbeat check (201). Never retried once it may have reached the service: a second
    /// attempt could make a second check (sync looks the check up by its tag instead).
    /// `auto_assign_alerts` is sent only when given.
    pub async fn create_heartbeat_check(
        &self,
        body: &HeartbeatCheckCreate,
        auto_assign_alerts: Option<bool>,
    ) -> Result<HeartbeatCheck, ApiError> {
        let query = auto_assign_query(auto_assign_alerts);
        let url = self.url(&["v1", "checks", "heartbeat"], &query);
        self.call(Operation::CreateHeartbeatCheck, url, Some(body))
            .await
    }

    /// `DELETE /v1/checks/{id}`, outside the seed spec (published by the service; 204).
    pub async fn delete_check(&self, check_id: &str) -> Result<(), ApiError> {
        let url = self.url(&["v1", "checks", check_id], &[]);
        self.execute(Operation::DeleteCheck, url, None).await?;
        Ok(())
    }

    /// `GET /v1/checks/heartbeats/{checkId}/events/{id}`.
    pub async fn get_heartbeat_event(
        &self,
        check_id: &str,
        event_id: &str,
    ) -> Result<HeartbeatEventWithStats, ApiError> {
        let url = self.url(
            &["v1", "checks", "heartbeats", check_id, "events", event_id],
            &[],
        );
        self.call(Operation::GetHeartbeatEvent, url, None::<&()>)
            .await
    }

    /// `GET /v1/checks/heartbeats/{checkId}/events`, outside the seed spec (published by the
    /// service): the events of a check in `window` (newest first, at most its limit) with the
    /// check's statistics, so callers can learn event ids. The service's defaults are at most
    /// 10 events of the last 24 hours.
    pub async fn list_heartbeat_events(
        &self,
        check_id: &str,
        window: &EventsWindow,
    ) -> Result<Vec<HeartbeatEventList>, ApiError> {
        let url = self.url(
            &["v1", "checks", "heartbeats", check_id, "events"],
            &window.query(),
        );
        self.call(Operation::ListHeartbeatEvents, url, None::<&()>)
            .await
    }

    /// `GET /v1/check-groups/{id}`.
    pub async fn get_check_group(&self, group_id: i64) -> Result<CheckGroup, ApiError> {
        let url = self.url(&["v1", "check-groups", &group_id.to_string()], &[]);
        self.call(Operation::GetCheckGroup, url, None::<&()>).await
    }

    /// `PUT /v2/check-groups/{id}`; `auto_assign_alerts` is sent only when given.
    pub async fn update_check_group(
        &self,
        group_id: i64,
        body: &CheckGroupUpdate,
        auto_assign_alerts: Option<bool>,
    ) -> Result<CheckGroup, ApiError> {
        let query = auto_assign_query(auto_assign_alerts);
        let url = self.url(&["v2", "check-groups", &group_id.to_string()], &query);
        self.call(Operation::UpdateCheckGroup, url, Some(body))
            .await
    }

    /// `GET /v1/check-statuses` (items may be null).
    pub async fn list_check_statuses(&self) -> Result<Vec<Option<CheckStatus>>, ApiError> {
        let url = self.url(&["v1", "check-statuses"], &[]);
        self.call(Operation::ListCheckStatuses, url, None::<&()>)
            .await
    }

    /// `GET /v1/test-session-error-groups/projects/{projectId}`.
    pub async fn list_error_groups(&self, project_id: &str) -> Result<Vec<ErrorGroup>, ApiError> {
        let url = self.url(
            &["v1", "test-session-error-groups", "projects", project_id],
            &[],
        );
        self.call(Operation::ListErrorGroups, url, None::<&()>)
            .await
    }

    /// `DELETE /v1/snippets/{id}` (204, no body).
    pub async fn delete_snippet(&self, snippet_id: i64) -> Result<(), ApiError> {
        let url = self.url(&["v1", "snippets", &snippet_id.to_string()], &[]);
        self.execute(Operation::DeleteSnippet, url, None).await?;
        Ok(())
    }
}

fn auto_assign_query(auto_assign_alerts: Option<bool>) -> Vec<(&'static str, String)> {
    auto_assign_alerts
        .map(|value| vec![("autoAssignAlerts", value.to_string())])
        .unwrap_or_default()
}
