//! The 11 operations of the spec as values, plus those the real service publishes outside it
//! (the heartbeat events list, the check read `GET /v1/checks/{id}`, the checks list
//! `GET /v1/checks`, `POST /v1/checks/heartbeat` and `DELETE /v1/checks/{id}`): their names
//! (for messages, logs and per-route rate limits), HTTP methods, and whether repeating one is
//! safe.

use std::fmt;

/// One operation of the monitoring API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// `POST /v1/status-pages/services`.
    CreateStatusPageService,
    /// `GET /v1/status-pages/services`.
    ListStatusPageServices,
    /// `GET /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
    GetMaintenance,
    /// `PATCH /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
    UpdateMaintenanceDates,
    /// `PUT /v1/checks/heartbeat/{id}`.
    UpdateHeartbeatCheck,
    /// `GET /v1/checks/heartbeats/{checkId}/events/{id}`.
    GetHeartbeatEvent,
    /// `GET /v1/check-groups/{id}`.
    GetCheckGroup,
    /// `PUT /v2/check-groups/{id}`.
    UpdateCheckGroup,
    /// `GET /v1/check-statuses`.
    ListCheckStatuses,
    /// `GET /v1/test-session-error-groups/projects/{projectId}`.
    ListErrorGroups,
    /// `DELETE /v1/snippets/{id}`.
    DeleteSnippet,
    /// `GET /v1/checks/heartbeats/{checkId}/events`: not in the spec, but served by the real
    /// service and the emulator; the way to discover event ids.
    ListHeartbeatEvents,
    /// `GET /v1/checks/{id}`: not in the spec, but published by the service (its `getV1ChecksId`;
    /// the Go SDK's `GetHeartbeatMonitor` and the Terraform provider's read use it); what sync
    /// reads to notice a check edited or deleted elsewhere.
    GetCheck,
    /// `GET /v1/checks`: not in the spec, but published by the service (its `getV1Checks`):
    /// one page of checks, filtered by `tag` and `checkType`; how sync finds a check it created.
    ListChecks,
    /// `POST /v1/checks/heartbeat`: not in the spec, but published by the service (its
    /// `postV1ChecksHeartbeat`, answer 201, 402 when the plan allows no more checks).
    CreateHeartbeatCheck,
    /// `DELETE /v1/checks/{id}`: not in the spec, but published by the service (its
    /// `deleteV1ChecksId`, answer 204); sync deletes a duplicate it created.
    DeleteCheck,
}

impl Operation {
    /// A stable snake_case name, used in messages, logs and rate-limit settings.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Operation::CreateStatusPageService => "create_status_page_service",
            Operation::ListStatusPageServices => "list_status_page_services",
            Operation::GetMaintenance => "get_maintenance",
            Operation::UpdateMaintenanceDates => "update_maintenance_dates",
            Operation::UpdateHeartbeatCheck => "update_heartbeat_check",
            Operation::GetHeartbeatEvent => "get_heartbeat_event",
            Operation::GetCheckGroup => "get_check_group",
            Operation::UpdateCheckGroup => "update_check_group",
            Operation::ListCheckStatuses => "list_check_statuses",
            Operation::ListErrorGroups => "list_error_groups",
            Operation::DeleteSnippet => "delete_snippet",
            Operation::ListHeartbeatEvents => "list_heartbeat_events",
            Operation::GetCheck => "get_check",
            Operation::ListChecks => "list_checks",
            Operation::CreateHeartbeatCheck => "create_heartbeat_check",
            Operation::DeleteCheck => "delete_check",
        }
    }

    /// The HTTP method.
    pub(crate) fn method(self) -> reqwest::Method {
        match self {
            Operation::CreateStatusPageService | Operation::CreateHeartbeatCheck => {
                reqwest::Method::POST
            }
            Operation::UpdateMaintenanceDates => reqwest::Method::PATCH,
            Operation::UpdateHeartbeatCheck | Operation::UpdateCheckGroup => reqwest::Method::PUT,
            Operation::DeleteSnippet | Operation::DeleteCheck => reqwest::Method::DELETE,
            _ => reqwest::Method::GET,
        }
    }

    /// Whether sending it twice has the effect of sending it once. Only the creations are not:
    /// a repeated POST makes a second status page service or check. (The dates PATCH sets
    /// absolute dates, so it counts as idempotent even though the service logs each update.)
    pub(crate) fn is_idempotent(self) -> bool {
        !matches!(
            self,
            Operation::CreateStatusPageService | Operation::CreateHeartbeatCheck
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
