//! The OpenAPI 3 document of the emulated surface, served without authentication at
//! `GET /openapi.json`: written from the spec, plus the emulator's documented extensions (400 for
//! invalid input, 404 where a resource the path names does not exist, the events list).

use serde_json::Value;

/// The document's text, kept as a JSON file next to this module.
const DOCUMENT: &str = include_str!("openapi.json");

/// The OpenAPI document as JSON.
pub(crate) fn document() -> Value {
    serde_json::from_str(DOCUMENT).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    #[test]
    fn document_parses() {
        let doc = super::document();
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    }
}
