//! The API client's model types on arbitrary text: parsing an answer of the monitoring API
//! (a check, a status list, events, an error body, ...) never panics, whatever the service
//! or a proxy in between sends.
#![no_main]

use heartbeat_agent::api::model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The client parses bytes (serde_json::from_slice), as the body arrives.
    let _ = model::parses_as_answers(data);
});
