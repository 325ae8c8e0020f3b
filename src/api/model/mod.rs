//! The resources of the monitoring API as Rust types, shared by the client, the emulator and
//! the tests: request bodies, responses and the error body.
//!
//! Rules, so that a response the spec did not foresee still decodes: unknown fields are ignored,
//! nullable fields are `Option`, enums are open (see [`enums`]), `date` fields also accept a
//! full date-time (its date is kept). Request bodies leave out absent optional fields, so the
//! service applies its defaults.

pub mod check_group;
pub mod common;
pub mod enums;
pub mod heartbeat;
pub mod limits;
pub mod reports;
pub mod status_page;

pub use check_group::*;
pub use common::*;
pub use enums::*;
pub use heartbeat::*;
pub use reports::*;
pub use status_page::*;

/// How many of the client's answer types `body` parses as (the fuzz target `api_model` and the
/// property tests feed it arbitrary bytes: none of these parses may panic).
pub fn parses_as_answers(body: &[u8]) -> usize {
    macro_rules! parse_all {
        ($($t:ty),*) => {{
            let mut parsed = 0;
            $(parsed += usize::from(serde_json::from_slice::<$t>(body).is_ok());)*
            parsed
        }};
    }
    parse_all!(
        HeartbeatCheck,
        Vec<HeartbeatCheck>,
        ErrorBody,
        Vec<CheckStatus>,
        CheckGroup,
        HeartbeatEventWithStats,
        HeartbeatEventList,
        StatusPageServicePage,
        StatusPageService,
        Maintenance,
        Vec<ErrorGroup>
    )
}

/// `date` fields (`YYYY-MM-DD`), tolerant of a full date-time on input.
pub mod date {
    use chrono::NaiveDate;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Parses `YYYY-MM-DD`, or the date part of an ISO 8601 date-time.
    pub fn parse(text: &str) -> Option<NaiveDate> {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .or_else(|| {
                chrono::DateTime::parse_from_rfc3339(text)
                    .ok()
                    .map(|t| t.date_naive())
            })
    }

    /// Writes `YYYY-MM-DD`.
    pub fn serialize<S: Serializer>(value: &NaiveDate, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&value.format("%Y-%m-%d"))
    }

    /// Reads a date (or the date of a date-time).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("expected a date (YYYY-MM-DD), got {text:?}"))
        })
    }
}

/// Nullable `date` fields; use with `#[serde(default)]`.
pub mod opt_date {
    use chrono::NaiveDate;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `YYYY-MM-DD` or null.
    pub fn serialize<S: Serializer>(value: &Option<NaiveDate>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(date) => super::date::serialize(date, s),
            None => s.serialize_none(),
        }
    }

    /// Reads a date, a date-time (its date) or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDate>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(text) => super::date::parse(&text).map(Some).ok_or_else(|| {
                serde::de::Error::custom(format!("expected a date (YYYY-MM-DD), got {text:?}"))
            }),
        }
    }
}

/// Nullable `date-time` fields that may also come as a bare `date` (read as its midnight UTC);
/// use with `#[serde(default)]`.
pub mod opt_date_time {
    use chrono::{DateTime, FixedOffset};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes RFC 3339 or null.
    pub fn serialize<S: Serializer>(
        value: &Option<DateTime<FixedOffset>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(s)
    }

    /// Reads a date-time, a date (its midnight UTC) or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<DateTime<FixedOffset>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        if let Ok(time) = DateTime::parse_from_rfc3339(&text) {
            return Ok(Some(time));
        }
        chrono::NaiveDate::parse_from_str(&text, "%Y-%m-%d")
            .map(|date| {
                Some(
                    date.and_time(chrono::NaiveTime::MIN)
                        .and_utc()
                        .fixed_offset(),
                )
            })
            .map_err(|_| {
                serde::de::Error::custom(format!(
                    "expected a date-time (RFC 3339) or a date (YYYY-MM-DD), got {text:?}"
                ))
            })
    }
}

/// A request field that can be left out, sent as `null` (clears it: the service's PUT keeps
/// a field not sent), or sent with a value: `Option<Option<T>>` with `None` = not sent,
/// `Some(None)` = `null`, `Some(Some(v))` = `v`. Use with
/// `#[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "clearable::deserialize")]`
/// (plain serde would read `null` back as "not sent").
pub mod clearable {
    use serde::{Deserialize, Deserializer};

    /// Reads a present field: `null` is `Some(None)`.
    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// `serde(default = ...)` helper for booleans whose documented default is true.
pub(crate) fn default_true() -> bool {
    true
}
