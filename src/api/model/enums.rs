//! Open enumerations of the API: every known value is a variant, and a value the spec does not
//! list (a new region, a new event state) survives as `Other(text)` instead of failing the whole
//! response. Validation of requests (which values a request may carry) is the server's business.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares an open string enum: known variants with their wire text, plus `Other(String)`.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value the spec does not list, kept as sent.
            Other(String),
        }

        impl $name {
            /// Every value the spec lists, in its order.
            pub const KNOWN: &'static [&'static str] = &[$($text),+];

            /// The value as it appears on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $text, )+
                    $name::Other(text) => text,
                }
            }

            /// Parses wire text; unknown text becomes `Other`.
            pub fn parse(text: &str) -> Self {
                match text {
                    $( $text => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }

            /// Whether this is a value the spec lists.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Ok($name::parse(&text))
            }
        }
    };
}

open_enum! {
    /// The state of a heartbeat event. The spec shows only `FAILING`; the real service also
    /// records `EARLY`, `RECEIVED`, `GRACE` and `LATE` (docs/api.md, "The contract").
    EventState {
        /// A ping arrived before the period was due.
        Early = "EARLY",
        /// A ping arrived in time.
        Received = "RECEIVED",
        /// A ping arrived after the period, within the grace time.
        Grace = "GRACE",
        /// A ping arrived after period + grace.
        Late = "LATE",
        /// Period + grace passed without a ping.
        Failing = "FAILING",
    }
}

open_enum! {
    /// The unit of a heartbeat `period` or `grace` (`periodUnit`, `graceUnit`).
    TimeUnit {
        /// Seconds.
        Seconds = "seconds",
        /// Minutes.
        Minutes = "minutes",
        /// Hours.
        Hours = "hours",
        /// Days.
        Days = "days",
    }
}

impl TimeUnit {
    /// How many seconds one unit is, `None` for a unit the spec does not list.
    pub fn seconds(&self) -> Option<u64> {
        match self {
            TimeUnit::Seconds => Some(1),
            TimeUnit::Minutes => Some(60),
            TimeUnit::Hours => Some(3_600),
            TimeUnit::Days => Some(86_400),
            TimeUnit::Other(_) => None,
        }
    }
}

open_enum! {
    /// The type of a check. Heartbeat checks answer `HEARTBEAT`.
    CheckType {
        /// A heartbeat check.
        Heartbeat = "HEARTBEAT",
    }
}

open_enum! {
    /// A public location where checks run (`locations`).
    Location {
        /// `us-east-1`.
        UsEast1 = "us-east-1",
        /// `us-east-2`.
        UsEast2 = "us-east-2",
        /// `us-west-1`.
        UsWest1 = "us-west-1",
        /// `us-west-2`.
        UsWest2 = "us-west-2",
        /// `ca-central-1`.
        CaCentral1 = "ca-central-1",
        /// `sa-east-1`.
        SaEast1 = "sa-east-1",
        /// `eu-west-1`.
        EuWest1 = "eu-west-1",
        /// `eu-central-1`.
        EuCentral1 = "eu-central-1",
        /// `eu-west-2`.
        EuWest2 = "eu-west-2",
        /// `eu-west-3`.
        EuWest3 = "eu-west-3",
        /// `eu-north-1`.
        EuNorth1 = "eu-north-1",
        /// `eu-south-1`.
        EuSouth1 = "eu-south-1",
        /// `me-south-1`.
        MeSouth1 = "me-south-1",
        /// `ap-southeast-1`.
        ApSoutheast1 = "ap-southeast-1",
        /// `ap-northeast-1`.
        ApNortheast1 = "ap-northeast-1",
        /// `ap-east-1`.
        ApEast1 = "ap-east-1",
        /// `ap-southeast-2`.
        ApSoutheast2 = "ap-southeast-2",
        /// `ap-southeast-3`.
        ApSoutheast3 = "ap-southeast-3",
        /// `ap-northeast-2`.
        ApNortheast2 = "ap-northeast-2",
        /// `ap-northeast-3`.
        ApNortheast3 = "ap-northeast-3",
        /// `ap-south-1`.
        ApSouth1 = "ap-south-1",
        /// `af-south-1`.
        AfSouth1 = "af-south-1",
    }
}

open_enum! {
    /// A runtime version (`runtimeId`).
    RuntimeId {
        /// `2026.04`.
        V2026_04 = "2026.04",
        /// `2025.04`.
        V2025_04 = "2025.04",
        /// `2024.09`.
        V2024_09 = "2024.09",
        /// `2024.02`.
        V2024_02 = "2024.02",
        /// `2023.09`.
        V2023_09 = "2023.09",
        /// `2023.02`.
        V2023_02 = "2023.02",
        /// `2022.10`.
        V2022_10 = "2022.10",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_event_state_survives_a_round_trip() {
        let state: EventState = serde_json::from_str("\"SNOOZED\"").unwrap();
        assert_eq!(state, EventState::Other("SNOOZED".into()));
        assert!(!state.is_known());
        assert_eq!(serde_json::to_string(&state).unwrap(), "\"SNOOZED\"");
        let known: EventState = serde_json::from_str("\"LATE\"").unwrap();
        assert_eq!(known, EventState::Late);
    }

    #[test]
    fn every_listed_location_and_runtime_parses_to_a_known_variant() {
        for text in Location::KNOWN {
            assert!(Location::parse(text).is_known(), "{text}");
            assert_eq!(Location::parse(text).as_str(), *text);
        }
        for text in RuntimeId::KNOWN {
            assert!(RuntimeId::parse(text).is_known(), "{text}");
        }
        assert_eq!(Location::KNOWN.len(), 22);
        assert_eq!(RuntimeId::KNOWN.len(), 7);
        assert!(!Location::parse("mars-1").is_known());
    }

    #[test]
    fn time_units_know_their_length() {
        assert_eq!(TimeUnit::parse("hours").seconds(), Some(3_600));
        assert_eq!(TimeUnit::parse("weeks").seconds(), None);
    }
}
