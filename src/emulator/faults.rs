//! Faults injected per route through the admin API, so tests can prove a client survives a slow,
//! broken or rate-limiting service: added latency, a fixed status, a dropped connection, a hang
//! (before or after the request is carried out), and a 429 storm with or without
//! `Retry-After`.

use serde::{Deserialize, Serialize};

use super::state::Listener;

/// What a matching request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FaultKind {
    /// Only the added latency, then the normal answer.
    Latency,
    /// A fixed status with the spec's error body.
    Status,
    /// The connection is closed without an answer.
    Drop,
    /// No answer at all, until the client gives up or the emulator stops.
    Hang,
    /// The request is carried out (a `POST` creates, a `DELETE` deletes), then no answer at
    /// all, until the client gives up or the emulator stops: a client killed or timed out
    /// after the service acted but before it learned the result.
    ApplyThenHang,
    /// 429 `Too Many Requests`, with `Retry-After` when `retryAfter` is set.
    RateLimit,
}

/// One injected fault, as the admin API takes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fault {
    /// Assigned by the emulator; ignored when sent.
    #[serde(default)]
    pub id: u64,
    /// What happens.
    pub kind: FaultKind,
    /// The listener it applies to; both when absent.
    #[serde(default)]
    pub listener: Option<Listener>,
    /// The HTTP method it applies to; any when absent.
    #[serde(default)]
    pub method: Option<String>,
    /// The path it applies to: exact, or a prefix when it ends in `*`; any when absent.
    #[serde(default)]
    pub path: Option<String>,
    /// Delay before answering (or before dropping), in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// The status of a `status` fault.
    #[serde(default)]
    pub status: Option<u16>,
    /// `Retry-After` value of a `rateLimit` fault: seconds or an HTTP date.
    #[serde(default)]
    pub retry_after: Option<serde_json::Value>,
    /// How many matching requests it applies to before it expires; forever when absent.
    #[serde(default)]
    pub times: Option<u64>,
}

impl Fault {
    /// A fault of `kind` on every route; narrow it with the builder methods.
    pub fn new(kind: FaultKind) -> Self {
        Fault {
            id: 0,
            kind,
            listener: None,
            method: None,
            path: None,
            latency_ms: 0,
            status: None,
            retry_after: None,
            times: None,
        }
    }

    /// Limits the fault to `path` (exact, or a prefix ending in `*`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Limits the fault to one method.
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// Limits the fault to one listener.
    pub fn listener(mut self, listener: Listener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Applies the fault to the next `n` matching requests only.
    pub fn times(mut self, n: u64) -> Self {
        self.times = Some(n);
        self
    }

    fn matches(&self, listener: Listener, method: &str, path: &str) -> bool {
        let path_matches = match self.path.as_deref() {
            None => true,
            Some(pattern) => match pattern.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == pattern,
            },
        };
        self.listener.map_or(true, |l| l == listener)
            && self
                .method
                .as_deref()
                .map_or(true, |m| m.eq_ignore_ascii_case(method))
            && path_matches
    }

    /// Checks what the admin API cannot express in types.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match (self.kind, self.status) {
            (FaultKind::Status, None) => Err("a \"status\" fault needs \"status\"".into()),
            (FaultKind::Status, Some(code)) if !(100..=599).contains(&code) => {
                Err(format!("\"status\" {code} is not an HTTP status"))
            }
            _ => Ok(()),
        }
    }
}

/// The active faults, first match wins.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    active: Vec<Fault>,
    next_id: u64,
}

impl Faults {
    /// Adds a fault; returns its id.
    pub(crate) fn add(&mut self, mut fault: Fault) -> u64 {
        self.next_id += 1;
        fault.id = self.next_id;
        self.active.push(fault);
        self.next_id
    }

    /// The first fault matching the request, counting it against its `times`.
    pub(crate) fn take(&mut self, listener: Listener, method: &str, path: &str) -> Option<Fault> {
        let index = self
            .active
            .iter()
            .position(|f| f.matches(listener, method, path))?;
        let fault = &mut self.active[index];
        let taken = fault.clone();
        if let Some(times) = fault.times.as_mut() {
            *times = times.saturating_sub(1);
            if *times == 0 {
                self.active.remove(index);
            }
        }
        Some(taken)
    }

    /// Removes one fault; false when no fault has that id.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let before = self.active.len();
        self.active.retain(|f| f.id != id);
        before != self.active.len()
    }

    /// Removes every fault.
    pub(crate) fn clear(&mut self) {
        self.active.clear();
    }

    /// The active faults.
    pub(crate) fn list(&self) -> &[Fault] {
        &self.active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_match_by_route_and_expire() {
        let mut faults = Faults::default();
        faults.add(
            Fault::new(FaultKind::Drop)
                .path("/v1/*")
                .method("get")
                .times(2),
        );
        assert!(faults.take(Listener::Api, "POST", "/v1/x").is_none());
        assert!(faults.take(Listener::Api, "GET", "/v2/x").is_none());
        assert!(faults.take(Listener::Api, "GET", "/v1/x").is_some());
        assert!(faults.take(Listener::Ping, "GET", "/v1/y").is_some());
        assert!(faults.take(Listener::Api, "GET", "/v1/x").is_none());
        assert!(faults.list().is_empty());
    }

    #[test]
    fn status_faults_need_a_status() {
        assert!(Fault::new(FaultKind::Status).validate().is_err());
        let mut fault = Fault::new(FaultKind::Status);
        fault.status = Some(503);
        assert!(fault.validate().is_ok());
    }
}
