//! Read-only reports: check statuses (`GET /v1/check-statuses`, whose items may be null) and
//! test session error groups of a project.

use chrono::{DateTime, FixedOffset, NaiveDate};
use serde::{Deserialize, Serialize};

/// The current status of one check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckStatus {
    /// Check name.
    pub name: String,
    /// Check id.
    #[serde(default)]
    pub check_id: Option<String>,
    /// Currently failing.
    #[serde(default)]
    pub has_failures: bool,
    /// Failing because of an error outside normal operation.
    #[serde(default)]
    pub has_errors: bool,
    /// Slower than its degraded response time (API checks).
    #[serde(default)]
    pub is_degraded: bool,
    /// Longest recorded response time.
    #[serde(default)]
    pub longest_run: Option<f64>,
    /// Shortest recorded response time.
    #[serde(default)]
    pub shortest_run: Option<f64>,
    /// Where it last ran.
    #[serde(default)]
    pub last_run_location: Option<String>,
    /// Its last run.
    #[serde(default)]
    pub last_check_run_id: Option<String>,
    /// Days until the SSL certificate expires.
    #[serde(default)]
    pub ssl_days_remaining: Option<i64>,
    /// Creation date.
    #[serde(rename = "created_at", default, with = "super::opt_date")]
    pub created_at: Option<NaiveDate>,
    /// Last change.
    #[serde(rename = "updated_at", default)]
    pub updated_at: Option<DateTime<FixedOffset>>,
}

/// A test session error group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorGroup {
    /// Group id (uuid).
    pub id: String,
    /// Environments where the error was seen.
    #[serde(default)]
    pub environments: Option<Vec<String>>,
    /// Hash of the cleaned message, for deduplication.
    pub error_hash: String,
    /// The message as raised.
    #[serde(default)]
    pub raw_error_message: Option<String>,
    /// Cleaned, sanitized message used for grouping.
    pub cleaned_error_message: String,
    /// First occurrence.
    pub first_seen: DateTime<FixedOffset>,
    /// Last occurrence.
    pub last_seen: DateTime<FixedOffset>,
    /// Archived until it happens again.
    pub archived_until_next_event: bool,
    /// Playwright test metadata.
    #[serde(default)]
    pub pwt_metadata: Option<Vec<PwtMetadata>>,
    /// The project (uuid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Root cause analyses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_cause_analyses: Option<Vec<RootCauseAnalysis>>,
}

/// Playwright metadata of an error group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PwtMetadata {
    /// Playwright project.
    #[serde(default)]
    pub project_name: Option<String>,
    /// Test file.
    #[serde(default)]
    pub test_file: Option<String>,
    /// Test title.
    #[serde(default)]
    pub test_title: Option<String>,
    /// Describe blocks around the test.
    #[serde(default)]
    pub suite_path: Vec<String>,
    /// Spec id.
    #[serde(default)]
    pub spec_id: Option<String>,
}

/// A root cause analysis of an error group.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootCauseAnalysis {
    /// Analysis id.
    #[serde(default)]
    pub id: String,
    /// When.
    #[serde(rename = "created_at", default)]
    pub created_at: Option<DateTime<FixedOffset>>,
    /// The analysis (shape not shown by the spec).
    #[serde(default)]
    pub analysis: Option<serde_json::Value>,
    /// Who analysed.
    #[serde(default)]
    pub provider: Option<String>,
    /// Which model.
    #[serde(default)]
    pub model: Option<String>,
    /// How long it took.
    #[serde(default)]
    pub duration_ms: Option<f64>,
    /// Context given by the user (shape not shown).
    #[serde(default)]
    pub user_context: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_statuses_may_hold_nulls() {
        let list: Vec<Option<CheckStatus>> = serde_json::from_str(
            r#"[null,{"name":"a","checkId":"c","hasFailures":true,"longestRun":null,
                "created_at":"2026-01-01","updated_at":"2026-01-01T00:00:00Z"}]"#,
        )
        .unwrap();
        assert!(list[0].is_none());
        assert!(list[1].as_ref().unwrap().has_failures);
    }

    #[test]
    fn error_group_parses_times() {
        let group: ErrorGroup = serde_json::from_str(
            r#"{"id":"g","environments":null,"errorHash":"h","rawErrorMessage":null,
               "cleanedErrorMessage":"boom","firstSeen":"2026-01-01T00:00:00Z",
               "lastSeen":"2026-01-02T00:00:00.5+02:00","archivedUntilNextEvent":false,
               "pwtMetadata":[{"suitePath":["a"],"testTitle":"t"}]}"#,
        )
        .unwrap();
        assert!(group.last_seen > group.first_seen);
        assert_eq!(group.pwt_metadata.unwrap()[0].suite_path, vec!["a"]);
    }
}
