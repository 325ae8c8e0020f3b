//! The emulator checks itself against the client: an answer of an operation must decode with
//! the client's own model type (`crate::api::model`). Debug builds run this on every answer,
//! so the tests and the schemathesis fuzzing prove that the two sides agree on field names,
//! types, date formats and nullability.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::model::{
    CheckGroup, CheckStatus, ErrorGroup, HeartbeatCheck, HeartbeatEventList,
    HeartbeatEventWithStats, Maintenance, StatusPageService, StatusPageServicePage,
};
use crate::api::Operation;

/// Whether `answer` decodes as the client's type for `operation`; the serde message if not.
pub(crate) fn readable(operation: Operation, answer: &Value) -> Result<(), String> {
    match operation {
        Operation::CreateStatusPageService => decode::<StatusPageService>(answer),
        Operation::ListStatusPageServices => decode::<StatusPageServicePage>(answer),
        Operation::GetMaintenance | Operation::UpdateMaintenanceDates => {
            decode::<Maintenance>(answer)
        }
        Operation::UpdateHeartbeatCheck | Operation::GetCheck | Operation::CreateHeartbeatCheck => {
            decode::<HeartbeatCheck>(answer)
        }
        Operation::ListChecks => decode::<Vec<HeartbeatCheck>>(answer),
        Operation::GetHeartbeatEvent => decode::<HeartbeatEventWithStats>(answer),
        Operation::ListHeartbeatEvents => decode::<Vec<HeartbeatEventList>>(answer),
        Operation::GetCheckGroup | Operation::UpdateCheckGroup => decode::<CheckGroup>(answer),
        Operation::ListCheckStatuses => decode::<Vec<Option<CheckStatus>>>(answer),
        Operation::ListErrorGroups => decode::<Vec<ErrorGroup>>(answer),
        Operation::DeleteSnippet | Operation::DeleteCheck => Ok(()),
    }
}

fn decode<T: DeserializeOwned>(answer: &Value) -> Result<(), String> {
    T::deserialize(answer)
        .map(drop)
        .map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_the_client_cannot_read_is_named() {
        let group = json!({"id": 7, "name": "g", "concurrency": -1});
        let err = readable(Operation::GetCheckGroup, &group).expect_err("negative u32");
        assert!(err.contains("-1"), "{err}");
        assert!(readable(Operation::GetCheckGroup, &json!({"id": 7, "name": "g"})).is_ok());
    }
}
