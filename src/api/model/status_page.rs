//! Status page services (create, list with cursor pagination) and maintenances of maintenance
//! windows (get, update dates).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// A status page service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusPageService {
    /// Assigned by the service (guid).
    pub id: String,
    /// Name.
    pub name: String,
    /// The owning account (guid).
    pub account_id: String,
    /// Creation date.
    #[serde(rename = "created_at", with = "super::date")]
    pub created_at: NaiveDate,
    /// Last change.
    #[serde(rename = "updated_at", default, with = "super::opt_date")]
    pub updated_at: Option<NaiveDate>,
}

/// The body of `POST /v1/status-pages/services`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateStatusPageService {
    /// Required.
    pub name: String,
}

/// One page of `GET /v1/status-pages/services`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusPageServicePage {
    /// How many entries this page holds.
    pub length: u64,
    /// The services.
    pub entries: Vec<StatusPageService>,
    /// Cursor of the next page; null on the last.
    #[serde(default)]
    pub next_id: Option<String>,
}

/// Query of `GET /v1/status-pages/services`; `None` leaves the service's default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListStatusPageServices {
    /// Page size, 1 to 100 (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Cursor from the previous page's `nextId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_id: Option<String>,
    /// `false` asks for everything in one answer (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paginated: Option<bool>,
}

/// A maintenance of a maintenance window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    /// Maintenance id.
    pub id: String,
    /// The parent window.
    pub maintenance_window_id: i64,
    /// First day.
    #[serde(with = "super::date")]
    pub starts_at: NaiveDate,
    /// Last day.
    #[serde(with = "super::date")]
    pub ends_at: NaiveDate,
    /// Status (values not shown by the spec).
    pub status: String,
    /// Creation date.
    #[serde(rename = "created_at", with = "super::date")]
    pub created_at: NaiveDate,
    /// Last change.
    #[serde(rename = "updated_at", default, with = "super::opt_date")]
    pub updated_at: Option<NaiveDate>,
    /// History of changes, newest last.
    #[serde(default)]
    pub updates: Vec<MaintenanceUpdate>,
}

/// An entry of a maintenance's `updates`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceUpdate {
    /// Update id.
    #[serde(default)]
    pub id: String,
    /// The window.
    #[serde(default)]
    pub maintenance_window_id: Option<i64>,
    /// The maintenance.
    #[serde(default)]
    pub maintenance_id: Option<String>,
    /// Status after the update.
    #[serde(default)]
    pub status: Option<String>,
    /// What changed.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether subscribers were told.
    #[serde(default)]
    pub notify_subscribers: Option<bool>,
    /// When.
    #[serde(rename = "created_at", default, with = "super::opt_date")]
    pub created_at: Option<NaiveDate>,
    /// Status before.
    #[serde(default)]
    pub previous_status: Option<String>,
    /// Start before.
    #[serde(default, with = "super::opt_date")]
    pub previous_starts_at: Option<NaiveDate>,
    /// End before.
    #[serde(default, with = "super::opt_date")]
    pub previous_ends_at: Option<NaiveDate>,
    /// The new dates.
    #[serde(default)]
    pub date_adjustments: Option<DateAdjustments>,
}

/// `dateAdjustments` of a maintenance update; also the body of the dates `PATCH`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DateAdjustments {
    /// New first day.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::opt_date"
    )]
    pub starts_at: Option<NaiveDate>,
    /// New last day.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "super::opt_date"
    )]
    pub ends_at: Option<NaiveDate>,
}

/// The body of `PATCH /v1/maintenance-windows/{id}/maintenances/{maintenanceId}`.
pub type MaintenanceDates = DateAdjustments;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_page_uses_snake_case_dates_and_camel_case_cursor() {
        let page: StatusPageServicePage = serde_json::from_str(
            r#"{"length":1,"nextId":"abc","entries":[{"id":"s1","name":"API","accountId":"a1",
                "created_at":"2026-01-02","updated_at":null}]}"#,
        )
        .unwrap();
        assert_eq!(page.next_id.as_deref(), Some("abc"));
        assert_eq!(page.entries[0].updated_at, None);
        let back = serde_json::to_value(&page.entries[0]).unwrap();
        assert_eq!(back["created_at"], "2026-01-02");
        assert_eq!(back["accountId"], "a1");
    }

    #[test]
    fn maintenance_dates_body_and_updates() {
        let body = MaintenanceDates {
            starts_at: NaiveDate::from_ymd_opt(2026, 5, 1),
            ends_at: None,
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            serde_json::json!({"startsAt": "2026-05-01"})
        );
        let m: Maintenance = serde_json::from_str(
            r#"{"id":"m1","maintenanceWindowId":3,"startsAt":"2026-05-01","endsAt":"2026-05-02",
               "status":"scheduled","created_at":"2026-04-01","updated_at":"2026-04-02",
               "updates":[{"id":"u1","previousStartsAt":"2026-04-30",
                 "dateAdjustments":{"startsAt":"2026-05-01","endsAt":"2026-05-02"}}]}"#,
        )
        .unwrap();
        assert_eq!(
            m.updates[0].previous_starts_at,
            NaiveDate::from_ymd_opt(2026, 4, 30)
        );
        let bad = serde_json::from_str::<Maintenance>(
            r#"{"id":"m1","maintenanceWindowId":3,"startsAt":"May 1st","endsAt":"2026-05-02",
               "status":"s","created_at":"2026-04-01","updated_at":"2026-04-02"}"#,
        )
        .unwrap_err();
        assert!(bad.to_string().contains("May 1st"), "{bad}");
    }
}
