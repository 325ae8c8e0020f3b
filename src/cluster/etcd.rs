//! An etcd v3 client over etcd's JSON gateway (`POST /v3/kv/range`, `/v3/kv/put`,
//! `/v3/kv/txn`, `/v3/kv/deleterange`, `/v3/lease/grant`, `/v3/lease/keepalive`,
//! `/v3/lease/revoke`, `/v3/auth/authenticate`), which every etcd from 3.4 serves on its client
//! URLs. Keys and values travel base64-encoded, int64 fields as JSON strings.
//!
//! Why not the maintained gRPC crate `etcd-client`: its build needs `protoc` (Debian's
//! `protobuf-compiler`) on every machine that builds the agent, and it links tonic and prost
//! into the one binary that every agent process maps, and the gateway needs nothing the tree
//! does not already have: the reqwest client of [`crate::net::Net::client_builder`] (the
//! daemon's connections: same trust store, same proxy rule as every other request),
//! serde_json and base64 (already linked through reqwest). Only the daemon reaches this code;
//! `run` never calls it, so its start-up path does not grow.
//!
//! An [`Etcd`] tries the endpoints in order, starting from the last one that answered: a member
//! that is down, times out, answers something that is not etcd, fails TLS, or says it has no
//! leader is skipped, and the next one asked. Answers that every member would give alike (bad
//! credentials, permission denied) are returned at once. With `user` set, the client
//! authenticates and sends etcd's token; an expired token is renewed once per request.
//! Credentials etcd refused are not tried again at every request (each try costs the member a
//! bcrypt): until a backoff (1 s doubling to 60 s, jittered) has passed, requests fail with the
//! same refusal; the log says so when the refusals start and when they end. Every
//! failure is counted by endpoint ([`Etcd::errors_by_endpoint`]) for `status` and `/metrics`.
//! Messages name the endpoint and what to do; the password and the token are [`Secret`]s and
//! appear in none.
//!
//! This file holds the client, its endpoint turn and the key-value and lease operations; the
//! authentication and its refusal backoff are in `etcd/auth.rs`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::gateway::{garbage, int64, prefix_end, shown, Failure, Next, RangeAnswer};
use crate::config::ClusterSettings;
use crate::net::Net;
use crate::redact::Secret;

mod auth;

use auth::Refused;

/// An etcd lease id.
pub type LeaseId = i64;

/// Whether a txn's compares held (its `success` ops ran).
#[derive(Deserialize)]
struct Succeeded {
    #[serde(default)]
    succeeded: bool,
}

/// A key as etcd holds it ([`Etcd::entry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its value.
    pub value: Vec<u8>,
    /// The lease it is bound to, `None` when it is bound to none.
    pub lease: Option<LeaseId>,
    /// The revision of its last change.
    pub revision: i64,
}

/// How long a TCP (and TLS) connection to a member may take before the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A client of one etcd cluster; clones share the connection pool, the token and the counters.
#[derive(Clone)]
pub struct Etcd {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    endpoints: Vec<reqwest::Url>,
    /// The index of the endpoint that answered last.
    current: AtomicUsize,
    user: Option<String>,
    password: Option<Secret>,
    /// The auth token, once authenticated (a secret too).
    token: Mutex<Option<Secret>>,
    /// Since etcd last refused the credentials: no new try before its `until`.
    refused: Mutex<Option<Refused>>,
    health: Mutex<Health>,
}

/// What the status page and `/metrics` show about etcd.
#[derive(Debug, Default, Clone)]
struct Health {
    errors: BTreeMap<String, u64>,
    reachable: Option<bool>,
    last_error: Option<String>,
}

/// Why an etcd request failed. `Display` names the endpoint and what to do, never a secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint gave a usable answer: each one's reason.
    #[error(
        "etcd is unavailable: {}; check that the members run and that [cluster] endpoints lists \
         their client URLs",
        list(.0)
    )]
    Unavailable(Vec<Failure>),
    /// The user or password was refused.
    #[error(
        "etcd at {endpoint} refused the credentials of user \"{user}\" ({message}); check \
         [cluster] user and its password (password_file, password_env or the credential \
         etcd-password)"
    )]
    Credentials {
        /// The endpoint that refused.
        endpoint: String,
        /// The configured user.
        user: String,
        /// etcd's words.
        message: String,
    },
    /// etcd has authentication enabled and no user is configured.
    #[error(
        "etcd at {endpoint} requires a user ({message}); set [cluster] user and password_file"
    )]
    NeedsUser {
        /// The endpoint that refused.
        endpoint: String,
        /// etcd's words.
        message: String,
    },
    /// The user may not touch the key.
    #[error(
        "etcd at {endpoint} denied access to {key} ({message}); grant the user's role readwrite \
         on the cluster's prefix (etcdctl role grant-permission ROLE --prefix=true readwrite \
         NAME/)"
    )]
    PermissionDenied {
        /// The endpoint that refused.
        endpoint: String,
        /// The key (or `lease` for lease requests).
        key: String,
        /// etcd's words.
        message: String,
    },
    /// etcd refused the request for another reason.
    #[error("etcd at {endpoint} refused {path}: {message} (gRPC code {code})")]
    Refused {
        /// The endpoint that refused.
        endpoint: String,
        /// The gateway path.
        path: String,
        /// etcd's words.
        message: String,
        /// The gRPC status code.
        code: i64,
    },
    /// The `[cluster]` TLS files cannot be used.
    #[error("[cluster] {key} {path}: {detail}")]
    Setup {
        /// `ca_file`, `cert_file` or `key_file`.
        key: &'static str,
        /// The file.
        path: String,
        /// What is wrong and what to do.
        detail: String,
    },
}

fn list(failures: &[Failure]) -> String {
    let parts: Vec<String> = failures.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

impl Etcd {
    /// A client for `settings` through `net`, after one read of `<name>/leader` proved that an
    /// endpoint answers and takes the credentials.
    pub async fn connect(settings: &ClusterSettings, net: &Net) -> Result<Etcd, EtcdError> {
        let etcd = Etcd::new(settings, net)?;
        etcd.get(&crate::cluster::Keys::new(&settings.name).leader())
            .await?;
        Ok(etcd)
    }

    /// A client for `settings` through `net` without asking etcd anything (the daemon starts
    /// even while etcd is down); fails only when the TLS files cannot be used.
    pub fn new(settings: &ClusterSettings, net: &Net) -> Result<Etcd, EtcdError> {
        let https = settings.endpoints.iter().any(|u| u.scheme() == "https");
        // Long enough for a member to see a new raft leader elected (a request waits for it).
        let timeout = (settings.lease / 3).clamp(Duration::from_secs(2), Duration::from_secs(5));
        let mut extra = Vec::new();
        if let Some(path) = &settings.ca_file {
            let bundle = read_pem("ca_file", path)?;
            // reqwest's reading words the refusal as before; rustls is handed the same DERs.
            let certs = reqwest::Certificate::from_pem_bundle(&bundle)
                .map_err(|err| setup("ca_file", path, format!("not PEM certificates ({err})")))?;
            if certs.is_empty() {
                return Err(setup("ca_file", path, "holds no certificate".to_owned()));
            }
            extra = CertificateDer::pem_slice_iter(&bundle)
                .collect::<Result<_, _>>()
                .map_err(|err| setup("ca_file", path, format!("not PEM certificates ({err})")))?;
        }
        let mut client_auth = None;
        if let (Some(cert), Some(key)) = (&settings.cert_file, &settings.key_file) {
            let cert_pem = read_pem("cert_file", cert)?;
            let key_pem = read_pem("key_file", key)?;
            let mut pem = cert_pem.clone();
            pem.push(b'\n');
            pem.extend(&key_pem);
            let refused = |err: &dyn std::fmt::Display| {
                let detail = format!(
                    "with key_file {}, not a PEM certificate and its private key ({err})",
                    key.display()
                );
                setup("cert_file", cert, detail)
            };
            reqwest::Identity::from_pem(&pem).map_err(|err| refused(&err))?;
            let certs = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| refused(&err))?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|err| refused(&err))?;
            client_auth = Some((certs, key));
        }
        let tls_refused = |err: &dyn std::fmt::Display| EtcdError::Setup {
            key: "ca_file",
            path: String::new(),
            detail: format!("the TLS settings cannot be used: {err}"),
        };
        let builder = if https {
            net.tls_client_builder(&extra, client_auth)
                .map_err(|err| tls_refused(&err))?
        } else {
            net.client_builder(false)
        };
        let builder = builder.connect_timeout(CONNECT_TIMEOUT).timeout(timeout);
        let client = builder.build().map_err(|err| tls_refused(&err))?;
        Ok(Etcd {
            inner: Arc::new(Inner {
                client,
                endpoints: settings.endpoints.clone(),
                current: AtomicUsize::new(0),
                user: settings.user.clone(),
                password: settings.password.clone(),
                token: Mutex::new(None),
                refused: Mutex::new(None),
                health: Mutex::new(Health::default()),
            }),
        })
    }

    /// A new lease of `ttl` (whole seconds).
    pub async fn grant(&self, ttl: Duration) -> Result<LeaseId, EtcdError> {
        #[derive(Deserialize)]
        struct Granted {
            #[serde(rename = "ID", deserialize_with = "int64")]
            id: i64,
        }
        let body = json!({ "TTL": ttl.as_secs().max(1).to_string() });
        let granted: Granted = self.call("/v3/lease/grant", "lease", &body).await?;
        Ok(granted.id)
    }

    /// Remaining TTL; Ok(None) when the lease is gone (expired or revoked).
    pub async fn keep_alive(&self, lease: LeaseId) -> Result<Option<Duration>, EtcdError> {
        #[derive(Deserialize)]
        struct Kept {
            result: Option<Ttl>,
        }
        #[derive(Deserialize)]
        struct Ttl {
            #[serde(rename = "TTL", default, deserialize_with = "int64")]
            ttl: i64,
        }
        let body = json!({ "ID": lease.to_string() });
        let kept: Kept = self.call("/v3/lease/keepalive", "lease", &body).await?;
        let ttl = kept.result.map_or(0, |r| r.ttl);
        Ok((ttl > 0).then(|| Duration::from_secs(ttl.unsigned_abs())))
    }

    /// Revokes `lease`, deleting every key bound to it; a lease already gone is not an error.
    pub async fn revoke(&self, lease: LeaseId) -> Result<(), EtcdError> {
        let body = json!({ "ID": lease.to_string() });
        match self.call::<Value>("/v3/lease/revoke", "lease", &body).await {
            Err(EtcdError::Refused { code: 5, .. }) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Create-if-absent in one txn (compare create_revision == 0); true when this call created it.
    pub async fn create(
        &self,
        key: &str,
        value: &[u8],
        lease: Option<LeaseId>,
    ) -> Result<bool, EtcdError> {
        let body = json!({
            "compare": [{
                "key": BASE64.encode(key),
                "target": "CREATE",
                "result": "EQUAL",
                "create_revision": "0",
            }],
            "success": [{ "request_put": put_body(key, value, lease) }],
        });
        let txn: Succeeded = self.call("/v3/kv/txn", key, &body).await?;
        Ok(txn.succeeded)
    }

    /// The value of `key`, `None` when there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, EtcdError> {
        let body = json!({ "key": BASE64.encode(key) });
        let mut pairs = self.range(key, &body).await?;
        Ok(pairs.pop().map(|(_, value)| value))
    }

    /// `key` with its value, its lease and its revision, `None` when there is none.
    pub async fn entry(&self, key: &str) -> Result<Option<Entry>, EtcdError> {
        let body = json!({ "key": BASE64.encode(key) });
        let range: RangeAnswer = self.call("/v3/kv/range", key, &body).await?;
        let Some(kv) = range.kvs.into_iter().next() else {
            return Ok(None);
        };
        let value = BASE64.decode(&kv.value).map_err(|_| {
            let endpoint = self.endpoints().get(self.current()).cloned();
            let detail = "answered a value that is not base64".to_owned();
            EtcdError::Unavailable(vec![garbage(&endpoint.unwrap_or_default(), detail)])
        })?;
        Ok(Some(Entry {
            value,
            lease: (kv.lease != 0).then_some(kv.lease),
            revision: kv.mod_revision,
        }))
    }

    /// Deletes `key` if it was not changed since `revision` (its `mod_revision`); true when
    /// this call deleted it.
    pub async fn delete_unchanged(&self, key: &str, revision: i64) -> Result<bool, EtcdError> {
        let body = json!({
            "compare": [{
                "key": BASE64.encode(key),
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": revision.to_string(),
            }],
            "success": [{ "request_delete_range": { "key": BASE64.encode(key) } }],
        });
        let txn: Succeeded = self.call("/v3/kv/txn", key, &body).await?;
        Ok(txn.succeeded)
    }

    /// Every key under `prefix`, with its value, in key order.
    pub async fn get_prefix(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, EtcdError> {
        let body = json!({
            "key": BASE64.encode(prefix),
            "range_end": BASE64.encode(prefix_end(prefix.as_bytes())),
        });
        self.range(prefix, &body).await
    }

    /// Sets `key` to `value`, bound to `lease` when given.
    pub async fn put(
        &self,
        key: &str,
        value: &[u8],
        lease: Option<LeaseId>,
    ) -> Result<(), EtcdError> {
        let body = put_body(key, value, lease);
        self.call::<Value>("/v3/kv/put", key, &body).await.map(drop)
    }

    /// Deletes `key` (nothing happens when it does not exist).
    pub async fn delete(&self, key: &str) -> Result<(), EtcdError> {
        let body = json!({ "key": BASE64.encode(key) });
        self.call::<Value>("/v3/kv/deleterange", key, &body)
            .await
            .map(drop)
    }

    /// Deletes every key under `prefix`.
    pub async fn delete_prefix(&self, prefix: &str) -> Result<(), EtcdError> {
        let body = json!({
            "key": BASE64.encode(prefix),
            "range_end": BASE64.encode(prefix_end(prefix.as_bytes())),
        });
        self.call::<Value>("/v3/kv/deleterange", prefix, &body)
            .await
            .map(drop)
    }

    /// Failed requests per endpoint since start (each endpoint that failed once is listed).
    pub fn errors_by_endpoint(&self) -> Vec<(String, u64)> {
        let health = self.health();
        health.errors.iter().map(|(e, n)| (e.clone(), *n)).collect()
    }

    /// Whether the last request got an answer from etcd; `None` before the first request.
    pub fn reachable(&self) -> Option<bool> {
        self.health().reachable
    }

    /// The last error, as shown to users (no secret in it).
    pub fn last_error(&self) -> Option<String> {
        self.health().last_error.clone()
    }

    /// The configured endpoints, as shown in messages.
    pub fn endpoints(&self) -> Vec<String> {
        self.inner.endpoints.iter().map(shown).collect()
    }

    fn health(&self) -> MutexGuard<'_, Health> {
        self.inner.health.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn range(&self, key: &str, body: &Value) -> Result<Vec<(String, Vec<u8>)>, EtcdError> {
        let range: RangeAnswer = self.call("/v3/kv/range", key, body).await?;
        let endpoint = self
            .endpoints()
            .get(self.current())
            .cloned()
            .unwrap_or_default();
        range
            .kvs
            .into_iter()
            .map(|kv| {
                let key = BASE64
                    .decode(&kv.key)
                    .ok()
                    .and_then(|k| String::from_utf8(k).ok());
                let value = BASE64.decode(&kv.value).ok();
                key.zip(value).ok_or_else(|| {
                    let detail = "answered a key or value that is not base64".to_owned();
                    EtcdError::Unavailable(vec![garbage(&endpoint, detail)])
                })
            })
            .collect()
    }

    fn current(&self) -> usize {
        self.inner.current.load(Ordering::Relaxed) % self.inner.endpoints.len().max(1)
    }

    /// `path` with `body` at the endpoints in turn, from the last good one; `key` names what is
    /// touched in a permission error.
    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        path: &str,
        key: &str,
        body: &Value,
    ) -> Result<T, EtcdError> {
        let count = self.inner.endpoints.len();
        let start = self.current();
        let mut failures = Vec::new();
        for step in 0..count {
            let index = (start + step) % count;
            let endpoint = &self.inner.endpoints[index];
            let result = match self.ask_authenticated(endpoint, path, key, body).await {
                Ok(value) => serde_json::from_value::<T>(value).map_err(|err| {
                    garbage(
                        &shown(endpoint),
                        format!("answered {path} without the expected fields ({err})"),
                    )
                }),
                Err(Next::Fail(failure)) => Err(failure),
                Err(Next::Stop(err)) => {
                    // etcd answered: it is reachable, and the request is wrong everywhere.
                    self.inner.current.store(index, Ordering::Relaxed);
                    let mut health = self.health();
                    health.reachable = Some(true);
                    *health.errors.entry(shown(endpoint)).or_default() += 1;
                    health.last_error = Some(err.to_string());
                    return Err(err);
                }
            };
            match result {
                Ok(value) => {
                    self.inner.current.store(index, Ordering::Relaxed);
                    let mut health = self.health();
                    health.reachable = Some(true);
                    return Ok(value);
                }
                Err(failure) => {
                    tracing::debug!(%failure, "etcd endpoint failed; trying the next");
                    *self
                        .health()
                        .errors
                        .entry(failure.endpoint.clone())
                        .or_default() += 1;
                    failures.push(failure);
                }
            }
        }
        let err = EtcdError::Unavailable(failures);
        let mut health = self.health();
        health.reachable = Some(false);
        health.last_error = Some(err.to_string());
        Err(err)
    }
}

fn setup(key: &'static str, path: &std::path::Path, detail: String) -> EtcdError {
    EtcdError::Setup {
        key,
        path: path.display().to_string(),
        detail,
    }
}

/// Reads a certificate or key file the config names, as every named file is read (never
/// blocking on a FIFO, bounded, links followed).
fn read_pem(key: &'static str, path: &std::path::Path) -> Result<Vec<u8>, EtcdError> {
    use crate::config::cluster::{PEM_FILE, PEM_FILE_MAX};
    crate::persist::file::read_named(path, PEM_FILE_MAX, PEM_FILE)
        .map_err(|err| setup(key, path, format!("cannot read it: {err}")))
}

/// The body of a put of `key` (bound to `lease` when given).
pub(super) fn put_body(key: &str, value: &[u8], lease: Option<LeaseId>) -> Value {
    let mut body = json!({ "key": BASE64.encode(key), "value": BASE64.encode(value) });
    if let Some(lease) = lease {
        body["lease"] = Value::String(lease.to_string());
    }
    body
}
