//! One request to one etcd member through its JSON gateway, and what the answer means: etcd's
//! JSON, an error etcd gave (with its gRPC code), or a [`Failure`] of that member (down,
//! timed out, TLS refused, an answer that is not etcd's) after which [`super::etcd::Etcd`]
//! asks the next one. Also the gateway's encodings: int64 fields as strings, key ranges.

use serde::Deserialize;
use serde_json::Value;

use super::etcd::EtcdError;
use crate::net::BodyError;
use crate::redact::Secret;

/// The most a response body may hold; a larger one is not etcd's answer to anything we ask.
const BODY_MAX: usize = 16 * 1024 * 1024;

/// Why one endpoint gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The endpoint (its URL, never with credentials: the config refuses those).
    pub endpoint: String,
    /// What went wrong, with what to do.
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.endpoint, self.detail)
    }
}

/// An endpoint's answer to one request: etcd's JSON, an etcd error, or a failure to move on
/// from.
pub(super) enum EtcdAnswer {
    /// etcd's JSON answer.
    Json(Value),
    /// An error etcd gave: its gRPC code and message.
    Refusal {
        /// The gRPC status code.
        code: i64,
        /// etcd's words (scrubbed).
        message: String,
    },
}

/// What `call` does after one endpoint's attempt failed.
pub(super) enum Next {
    /// Try the next endpoint.
    Fail(Failure),
    /// Stop: every endpoint would answer the same.
    Stop(EtcdError),
}

/// The endpoint as shown: its URL without the trailing slash.
pub(super) fn shown(endpoint: &reqwest::Url) -> String {
    endpoint.as_str().trim_end_matches('/').to_owned()
}

pub(super) fn garbage(endpoint: &str, detail: String) -> Failure {
    Failure {
        endpoint: endpoint.to_owned(),
        detail: format!(
            "{detail}; is it an etcd client URL (port 2379 by default, etcd 3.4 or later)?"
        ),
    }
}

/// What an etcd error answer means: the next endpoint for "no leader"-like errors (gRPC
/// Unavailable, DeadlineExceeded), else an error every member would give.
pub(super) fn refusal(endpoint: &str, path: &str, key: &str, code: i64, message: String) -> Next {
    let endpoint = endpoint.to_owned();
    match code {
        4 | 14 => Next::Fail(Failure {
            endpoint,
            detail: format!("{message}; the member may be cut off from the others"),
        }),
        7 => Next::Stop(EtcdError::PermissionDenied {
            endpoint,
            key: key.to_owned(),
            message,
        }),
        3 | 16 if message.contains("user name is empty") || message.contains("token") => {
            Next::Stop(EtcdError::NeedsUser { endpoint, message })
        }
        _ => Next::Stop(EtcdError::Refused {
            endpoint,
            path: path.to_owned(),
            message,
            code,
        }),
    }
}

/// POSTs `body` to `endpoint` + `path`; a transport, TLS or format problem is a [`Failure`].
pub(super) async fn ask(
    client: &reqwest::Client,
    endpoint: &reqwest::Url,
    path: &str,
    body: &Value,
    token: Option<&Secret>,
) -> Result<EtcdAnswer, Next> {
    let name = shown(endpoint);
    let fail = |detail: String| {
        Next::Fail(Failure {
            endpoint: name.clone(),
            detail,
        })
    };
    let url = endpoint
        .join(path.trim_start_matches('/'))
        .map_err(|err| fail(err.to_string()))?;
    let request = || {
        let request = client.post(url.clone()).json(body);
        match token {
            Some(token) => request.header(reqwest::header::AUTHORIZATION, token.expose()),
            None => request,
        }
    };
    // A pooled connection the member closed while idle fails the request before it was read
    // (hyper's "connection closed before message completed"): asked once more on a new one.
    // A txn that did arrive the first time is then answered as already done (a claim holds
    // this node's name; see `node`).
    let response = match request().send().await {
        Err(err) if closed_early(&err) => request().send().await,
        other => other,
    };
    let response = response.map_err(|err| fail(transport(&err, endpoint.scheme())))?;
    let status = response.status();
    let bytes = match crate::net::read_body(response, BODY_MAX).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge(limit)) => {
            let detail = format!("answered more than {limit} bytes");
            return Err(Next::Fail(garbage(&name, detail)));
        }
        Err(BodyError::Transport(err)) => return Err(fail(transport(&err, endpoint.scheme()))),
    };
    // The gateway streams some answers (keepalive) as one JSON object per line: the first is
    // the answer.
    let first = serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Value>()
        .next();
    let value = match first {
        Some(Ok(value @ Value::Object(_))) => value,
        _ => {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
            let text: String = text
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            let text = crate::redact::scrub(text.trim());
            let detail = if text.contains("HTTPS server") {
                format!("answered HTTP {status}: \"{text}\": the member serves https; write https:// in [cluster] endpoints and set ca_file")
            } else {
                format!("answered HTTP {status} with something that is not etcd's JSON: \"{text}\"")
            };
            return Err(Next::Fail(garbage(&name, detail)));
        }
    };
    if let Some(code) = value.get("code").and_then(Value::as_i64) {
        if value.get("error").is_some() || value.get("message").is_some() {
            let message = value
                .get("message")
                .or_else(|| value.get("error"))
                .and_then(Value::as_str)
                .unwrap_or("no message")
                .to_owned();
            return Ok(EtcdAnswer::Refusal {
                code,
                message: crate::redact::scrub(&message),
            });
        }
    }
    if !status.is_success() {
        let detail = format!("answered HTTP {status} without etcd's error fields");
        return Err(Next::Fail(garbage(&name, detail)));
    }
    Ok(EtcdAnswer::Json(value))
}

/// Whether `err` is a connection closed before the answer began.
fn closed_early(err: &reqwest::Error) -> bool {
    crate::net::causes(err).any(|inner| {
        inner
            .to_string()
            .contains("connection closed before message completed")
    })
}

/// A transport error in words: a refused TLS handshake says what to check.
fn transport(err: &reqwest::Error, scheme: &str) -> String {
    let text = crate::redact::reqwest_error(err);
    if crate::net::is_tls_failure(err) {
        format!(
            "TLS failed ({text}); check [cluster] ca_file (the CA that signed the members' \
             certificates), cert_file and key_file, and that the URL's scheme is what the member \
             serves"
        )
    } else if scheme == "http" && closed_early(err) {
        // A member serving https closes a plain-http connection without a word.
        format!(
            "{text}; if the member serves https, write https:// in [cluster] endpoints and set \
             ca_file"
        )
    } else {
        text
    }
}

/// The answer to a range request (also inside a txn's responses): keys and values in base64.
#[derive(Debug, Deserialize)]
pub(super) struct RangeAnswer {
    /// The pairs found (absent when none).
    #[serde(default)]
    pub kvs: Vec<KeyValue>,
}

/// One pair of a [`RangeAnswer`].
#[derive(Debug, Deserialize)]
pub(super) struct KeyValue {
    /// The key, base64.
    #[serde(default)]
    pub key: String,
    /// The value, base64.
    #[serde(default)]
    pub value: String,
    /// The lease the key is bound to; 0 (absent) when none.
    #[serde(default, deserialize_with = "int64")]
    pub lease: i64,
    /// The revision of the key's last change.
    #[serde(default, deserialize_with = "int64")]
    pub mod_revision: i64,
}

/// The end of the range of keys that start with `prefix`: its last byte below 0xff plus one.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff (or empty): to the end of the key space.
    vec![0]
}

/// An int64 field: a JSON string (as the gateway writes them) or a number.
pub(super) fn int64<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Text(String),
        Number(i64),
    }
    match Int::deserialize(deserializer)? {
        Int::Number(n) => Ok(n),
        Int::Text(text) => text.parse().map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"hb/claims/a/"), b"hb/claims/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn int64_fields_are_strings_or_numbers() {
        #[derive(Deserialize)]
        struct F {
            #[serde(deserialize_with = "int64")]
            v: i64,
        }
        let s: F = serde_json::from_str(r#"{"v":"7587870000000000001"}"#).expect("string");
        assert_eq!(s.v, 7_587_870_000_000_000_001);
        let n: F = serde_json::from_str(r#"{"v":12}"#).expect("number");
        assert_eq!(n.v, 12);
        assert!(serde_json::from_str::<F>(r#"{"v":"x"}"#).is_err());
    }

    #[test]
    fn errors_name_the_endpoint_and_what_to_do() {
        let err = EtcdError::Unavailable(vec![Failure {
            endpoint: "http://127.0.0.1:1".to_owned(),
            detail: "connection failed: Connection refused".to_owned(),
        }]);
        let text = err.to_string();
        assert!(
            text.contains("http://127.0.0.1:1: connection failed"),
            "{text}"
        );
        assert!(text.contains("check that the members run"), "{text}");
    }
}
