//! Authentication with etcd: each request carries etcd's token when `[cluster] user` is set;
//! a missing token is fetched with the user and password, an expired one renewed once per
//! request. Credentials etcd refused are not tried again at every request (each try costs the
//! member a bcrypt): until a backoff (1 s doubling to 60 s, equal jitter) has passed, requests
//! fail with the same refusal, and the log says so when the refusals start and when they end.
//!
//! Its own file because it is the one part of the client that keeps state across requests
//! besides the endpoint turn (the token and the refusal), and the only one that handles the
//! password.

use std::sync::MutexGuard;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::{Etcd, EtcdError};
use crate::cluster::gateway::{ask, garbage, refusal, shown, EtcdAnswer, Next};
use crate::redact::Secret;

/// The first wait before credentials etcd refused are tried again; it doubles with each
/// refusal up to [`AUTH_BACKOFF_CAP`] (equal jitter, [`crate::backoff::equal_jitter`]). Each
/// try costs the member a bcrypt of the password.
const AUTH_BACKOFF_BASE: Duration = Duration::from_secs(1);

/// The longest wait between two tries of refused credentials.
const AUTH_BACKOFF_CAP: Duration = Duration::from_secs(60);

/// Credentials etcd refused, and when they may be tried again.
pub(super) struct Refused {
    /// The refusal, answered to every request until `until`.
    error: EtcdError,
    /// Refusals in a row.
    refusals: u32,
    until: std::time::Instant,
}

impl Etcd {
    /// One request at `endpoint`, authenticated when a user is configured: a missing token is
    /// fetched first, an expired one renewed once.
    pub(super) async fn ask_authenticated(
        &self,
        endpoint: &reqwest::Url,
        path: &str,
        key: &str,
        body: &Value,
    ) -> Result<Value, Next> {
        for attempt in 0..2 {
            let token = match &self.inner.user {
                Some(user) => Some(self.token(endpoint, user, attempt > 0).await?),
                None => None,
            };
            match ask(&self.inner.client, endpoint, path, body, token.as_ref()).await? {
                EtcdAnswer::Json(value) => return Ok(value),
                EtcdAnswer::Refusal { code: 16, .. } if attempt == 0 && token.is_some() => continue,
                EtcdAnswer::Refusal { code, message } => {
                    return Err(refusal(&shown(endpoint), path, key, code, message))
                }
            }
        }
        let detail = "refused a freshly issued auth token twice".to_owned();
        Err(Next::Fail(garbage(&shown(endpoint), detail)))
    }

    /// The auth token: the one held, or a new one from `endpoint` (always when `renew`).
    async fn token(
        &self,
        endpoint: &reqwest::Url,
        user: &str,
        renew: bool,
    ) -> Result<Secret, Next> {
        if !renew {
            if let Some(token) = self
                .inner
                .token
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Ok(token);
            }
        }
        if let Some(err) = self.still_refused() {
            return Err(Next::Stop(err));
        }
        #[derive(Deserialize)]
        struct Token {
            token: String,
        }
        let password = self.inner.password.as_ref().map_or("", |p| p.expose());
        let body = json!({ "name": user, "password": password });
        let answer = ask(
            &self.inner.client,
            endpoint,
            "/v3/auth/authenticate",
            &body,
            None,
        )
        .await?;
        let value = match answer {
            EtcdAnswer::Json(value) => value,
            EtcdAnswer::Refusal { code, message } if code == 3 || code == 16 => {
                let err = EtcdError::Credentials {
                    endpoint: shown(endpoint),
                    user: user.to_owned(),
                    message,
                };
                self.note_refused(&err);
                return Err(Next::Stop(err));
            }
            EtcdAnswer::Refusal { code, message } => {
                return Err(refusal(
                    &shown(endpoint),
                    "/v3/auth/authenticate",
                    "auth",
                    code,
                    message,
                ))
            }
        };
        let token = match serde_json::from_value::<Token>(value) {
            Ok(t) => Secret::new(t.token),
            Err(err) => {
                let detail = format!("answered /v3/auth/authenticate without a token ({err})");
                return Err(Next::Fail(garbage(&shown(endpoint), detail)));
            }
        };
        *self.inner.token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token.clone());
        if self.refused().take().is_some() {
            tracing::info!(user, "etcd accepted the credentials again");
        }
        Ok(token)
    }

    fn refused(&self) -> MutexGuard<'_, Option<Refused>> {
        self.inner.refused.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last refusal of the credentials while they may not be tried again yet.
    fn still_refused(&self) -> Option<EtcdError> {
        let refused = self.refused();
        let refused = refused.as_ref()?;
        (std::time::Instant::now() < refused.until).then(|| refused.error.clone())
    }

    /// Counts a refusal of the credentials and sets when they are tried again; says so once
    /// when the refusals start.
    fn note_refused(&self, err: &EtcdError) {
        let mut refused = self.refused();
        let refusals = refused.as_ref().map_or(0, |r| r.refusals) + 1;
        let wait = crate::backoff::equal_jitter(refusals - 1, AUTH_BACKOFF_BASE, AUTH_BACKOFF_CAP);
        if refusals == 1 {
            tracing::warn!("{err}; the credentials are tried again after {wait:.1?}, then at doubling intervals up to {AUTH_BACKOFF_CAP:?} apart (each try costs etcd a bcrypt); until then every etcd request fails with this error");
        }
        *refused = Some(Refused {
            error: err.clone(),
            refusals,
            until: std::time::Instant::now() + wait,
        });
    }
}
