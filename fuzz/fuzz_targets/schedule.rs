//! The schedule parser on arbitrary text: never panics; what it accepts displays as an
//! expression that parses to the same schedule (same next fire times), and next fire times
//! strictly increase.
#![no_main]

use chrono::{TimeZone, Utc};
use heartbeat_agent::schedule::{Schedule, Zone};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(expr) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(schedule) = Schedule::parse(expr) else {
        return;
    };
    let shown = schedule.to_string();
    let again = Schedule::parse(&shown)
        .unwrap_or_else(|e| panic!("{expr:?} parsed, its display {shown:?} did not: {e}"));
    let zones = ["UTC", "Europe/Berlin", "Australia/Lord_Howe"]
        .map(|name| Zone::named(name).expect("a zone every database knows"));
    let zone = zones[data.len() % zones.len()];
    // 2026-03-29 00:30 UTC: a daylight-saving change in Berlin within the day.
    let mut at = Utc
        .timestamp_opt(1_774_744_200, 0)
        .single()
        .expect("a valid time");
    for _ in 0..3 {
        let next = schedule.next_after(at, zone);
        assert_eq!(
            next,
            again.next_after(at, zone),
            "{expr:?} does not round-trip via {shown:?}"
        );
        match next {
            Some(next) => {
                assert!(next > at, "{expr:?}: next fire {next} is not after {at}");
                at = next;
            }
            None => break,
        }
    }
});
