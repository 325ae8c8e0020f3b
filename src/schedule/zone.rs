//! [`Zone`]: an IANA time zone of job schedules, read from the system's zoneinfo
//! (`/usr/share/zoneinfo`) when first named, else from the database compiled into the binary
//! (for a name the system lacks, or a system without zoneinfo such as a minimal container).
//!
//! The compiled-in database is TZif bytes, read only for a name the system lacks: a table of
//! zones with a pointer per transition, as a generated table of Rust values has, would be
//! relocated by the loader at every start of the position-independent binary and so become
//! memory of its own in every process (about 1 MiB for the whole database), whether or not a
//! zone is used. A process resolves each name once: [`Zone`] is a copyable handle to the zone's
//! rules, kept for the life of the process (a process names a few of the about 600 zones).

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, OnceLock};

use chrono::{DateTime, FixedOffset, LocalResult, NaiveDateTime, Utc};
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};

/// An IANA time zone, such as `Europe/Berlin` or `UTC`. Two zones are equal when their names
/// are.
#[derive(Clone, Copy)]
pub struct Zone(&'static Known);

/// A zone's name and rules.
struct Known {
    /// The IANA name as written in the database (case as there).
    name: &'static str,
    /// The offsets and their changes.
    rules: TimeZone,
}

/// UTC, known without reading a database.
static UTC_ZONE: Known = Known {
    name: "UTC",
    rules: TimeZone::UTC,
};

impl Zone {
    /// Coordinated Universal Time, the default zone of schedules.
    pub const UTC: Zone = Zone(&UTC_ZONE);

    /// The zone of an IANA name (exactly as the database writes it: `Europe/Berlin`, not
    /// `europe/berlin`), or `None` for a name that neither the system's zoneinfo nor the
    /// compiled-in database knows.
    pub fn named(name: &str) -> Option<Zone> {
        if name == UTC_ZONE.name {
            return Some(Zone::UTC);
        }
        static RESOLVED: OnceLock<Mutex<HashMap<String, Option<Zone>>>> = OnceLock::new();
        let resolved = RESOLVED.get_or_init(Mutex::default);
        // A poisoned lock only means another thread panicked between two map operations; the
        // map itself is whole.
        let mut map = resolved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(zone) = map.get(name) {
            return *zone;
        }
        let zone = look_up(name).map(|rules| {
            // Leaked on purpose: once per distinct name for the life of the process, so the
            // handle is `Copy` like a name.
            let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
            Zone(Box::leak(Box::new(Known { name, rules })))
        });
        map.insert(name.to_owned(), zone);
        zone
    }

    /// Every name the system's zoneinfo and the compiled-in database know, for suggestions.
    pub fn names() -> Vec<String> {
        let mut names: Vec<String> = jiff::tz::db()
            .available()
            .chain(bundled().available())
            .map(|n| n.as_str().to_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The IANA name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// The zone's offset from UTC at `at`, in seconds (east positive).
    pub fn offset_seconds(&self, at: DateTime<Utc>) -> i32 {
        // Outside jiff's years -9999..=9999 the offset at the nearest end applies.
        let second = at.timestamp().clamp(
            jiff::Timestamp::MIN.as_second(),
            jiff::Timestamp::MAX.as_second(),
        );
        let at = jiff::Timestamp::from_second(second).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        self.0.rules.to_offset(at).seconds()
    }

    /// `at` in this zone's local time, with its offset (as RFC 3339 writes it).
    pub fn local(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = FixedOffset::east_opt(self.offset_seconds(at))
            .unwrap_or_else(|| FixedOffset::east_opt(0).expect("0 is a valid offset"));
        at.with_timezone(&offset)
    }

    /// The instants at which local time `local` occurs: one, none (skipped by a change of
    /// offset, such as spring-forward) or two, earlier first (repeated by fall-back).
    pub fn instants(&self, local: NaiveDateTime) -> LocalResult<DateTime<Utc>> {
        use chrono::{Datelike, Timelike};
        let civil = i16::try_from(local.year()).ok().and_then(|year| {
            jiff::civil::DateTime::new(
                year,
                local.month() as i8,
                local.day() as i8,
                local.hour() as i8,
                local.minute() as i8,
                local.second() as i8,
                0,
            )
            .ok()
        });
        let at = |offset: jiff::tz::Offset| {
            local
                .checked_sub_signed(chrono::TimeDelta::seconds(i64::from(offset.seconds())))
                .map(|t| t.and_utc())
        };
        let Some(civil) = civil else {
            // Outside jiff's years: the offset at the nearest end, which has no changes.
            return at(
                jiff::tz::Offset::from_seconds(self.offset_seconds(local.and_utc()))
                    .unwrap_or(jiff::tz::Offset::UTC),
            )
            .map_or(LocalResult::None, LocalResult::Single);
        };
        match self.0.rules.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => {
                at(offset).map_or(LocalResult::None, LocalResult::Single)
            }
            AmbiguousOffset::Gap { .. } => LocalResult::None,
            AmbiguousOffset::Fold { before, after } => match (at(before), at(after)) {
                (Some(first), Some(second)) => LocalResult::Ambiguous(first, second),
                (Some(one), None) | (None, Some(one)) => LocalResult::Single(one),
                (None, None) => LocalResult::None,
            },
        }
    }
}

/// The rules of `name` from the system's zoneinfo, else the compiled-in database; only a zone
/// whose name is exactly `name` (the databases also answer names in other cases).
fn look_up(name: &str) -> Option<TimeZone> {
    let exact = |rules: TimeZone| (rules.iana_name() == Some(name)).then_some(rules);
    jiff::tz::db()
        .get(name)
        .ok()
        .and_then(exact)
        .or_else(|| bundled().get(name).ok().and_then(exact))
}

/// The database compiled into the binary.
fn bundled() -> &'static TimeZoneDatabase {
    static BUNDLED: OnceLock<TimeZoneDatabase> = OnceLock::new();
    BUNDLED.get_or_init(TimeZoneDatabase::bundled)
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Zone {}

impl Hash for Zone {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl std::str::FromStr for Zone {
    type Err = UnknownZone;

    fn from_str(name: &str) -> Result<Zone, UnknownZone> {
        Zone::named(name).ok_or(UnknownZone)
    }
}

/// A name that no time zone database knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone")]
pub struct UnknownZone;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a valid time")
            .with_timezone(&Utc)
    }

    fn local(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("a valid local time")
    }

    #[test]
    fn a_name_is_known_exactly_as_the_database_writes_it() {
        let berlin = Zone::named("Europe/Berlin").expect("a known zone");
        assert_eq!(berlin.name(), "Europe/Berlin");
        assert_eq!(Zone::named("Europe/Berlin"), Some(berlin));
        assert_eq!("UTC".parse::<Zone>(), Ok(Zone::UTC));
        assert_eq!(Zone::named("europe/berlin"), None);
        assert_eq!(Zone::named("Mars/Olympus"), None);
        assert_eq!("".parse::<Zone>(), Err(UnknownZone));
        assert_eq!(
            format!("{berlin} {berlin:?}"),
            "Europe/Berlin Europe/Berlin"
        );
        let names = Zone::names();
        assert!(names.iter().any(|n| n == "America/New_York"), "{names:?}");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, once each");
    }

    #[test]
    fn offsets_follow_the_zones_changes() {
        let berlin = Zone::named("Europe/Berlin").expect("a known zone");
        assert_eq!(berlin.offset_seconds(at("2026-01-15T12:00:00Z")), 3_600);
        assert_eq!(berlin.offset_seconds(at("2026-07-15T12:00:00Z")), 7_200);
        assert_eq!(berlin.offset_seconds(at("2026-03-29T00:59:59Z")), 3_600);
        assert_eq!(berlin.offset_seconds(at("2026-03-29T01:00:00Z")), 7_200);
        let lord_howe = Zone::named("Australia/Lord_Howe").expect("a known zone");
        assert_eq!(lord_howe.offset_seconds(at("2026-01-15T00:00:00Z")), 39_600);
        assert_eq!(lord_howe.offset_seconds(at("2026-07-15T00:00:00Z")), 37_800);
        assert_eq!(Zone::UTC.offset_seconds(at("2026-07-15T00:00:00Z")), 0);
        assert_eq!(
            berlin.local(at("2026-07-15T12:00:00Z")).to_rfc3339(),
            "2026-07-15T14:00:00+02:00"
        );
        // Beyond the years the database covers, the offset at its end.
        let far = DateTime::from_timestamp(400_000_000_000, 0).expect("in chrono's range");
        assert_eq!(Zone::UTC.offset_seconds(far), 0);
        assert!([3_600, 7_200].contains(&berlin.offset_seconds(far)));
    }

    #[test]
    fn a_skipped_local_time_has_no_instant_and_a_repeated_one_two() {
        let berlin = Zone::named("Europe/Berlin").expect("a known zone");
        assert_eq!(
            berlin.instants(local("2026-03-29 02:30:00")),
            LocalResult::None
        );
        assert_eq!(
            berlin.instants(local("2026-10-25 02:30:00")),
            LocalResult::Ambiguous(at("2026-10-25T00:30:00Z"), at("2026-10-25T01:30:00Z"))
        );
        assert_eq!(
            berlin.instants(local("2026-07-15 14:00:00")),
            LocalResult::Single(at("2026-07-15T12:00:00Z"))
        );
        assert_eq!(
            Zone::UTC.instants(local("2026-03-29 02:30:00")),
            LocalResult::Single(at("2026-03-29T02:30:00Z"))
        );
    }

    #[test]
    fn the_compiled_in_database_knows_what_the_system_knows() {
        for name in [
            "Europe/Berlin",
            "America/New_York",
            "Asia/Kolkata",
            "Etc/GMT+5",
        ] {
            let system = Zone::named(name).expect("a known zone");
            let bundled = bundled().get(name).expect("in the compiled-in database");
            for probe in ["2026-01-15T12:00:00Z", "2026-07-15T12:00:00Z"] {
                let ts = jiff::Timestamp::from_second(at(probe).timestamp()).expect("in range");
                assert_eq!(
                    system.offset_seconds(at(probe)),
                    bundled.to_offset(ts).seconds(),
                    "{name} at {probe}"
                );
            }
        }
    }
}
