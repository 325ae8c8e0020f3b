//! The ping host: `GET`/`POST /{pingToken}` records a heartbeat event whose state follows the
//! check's timer (see `checks`), with `source` from `Origin` (else `Referer`) and `userAgent`
//! from `User-Agent`. Pings from chat or search bots (link previews) are ignored, as the real
//! service does; `PUT`, `PATCH` and `DELETE` are answered 405 and not recorded.

use axum::http::{header, HeaderMap, Method};
use serde_json::json;
use tracing::debug;

use super::server::{ApiError, Reply};
use super::state::{timestamp, Shared};

/// User-Agent fragments (lowercase) of link-preview and crawler bots whose pings are ignored.
const BOT_AGENTS: &[&str] = &[
    "bot",
    "crawler",
    "spider",
    "slurp",
    "facebookexternalhit",
    "whatsapp",
    "skypeuripreview",
    "embedly",
    "preview",
];

/// Whether a User-Agent looks like a chat or search bot.
pub(crate) fn is_bot(user_agent: &str) -> bool {
    let lower = user_agent.to_ascii_lowercase();
    BOT_AGENTS.iter().any(|bot| lower.contains(bot))
}

/// Answers one request on the ping listener.
pub(crate) fn handle(shared: &Shared, method: &Method, path: &str, headers: &HeaderMap) -> Reply {
    let token = path.trim_start_matches('/');
    if token.is_empty() || token.contains('/') {
        return ApiError::not_found().into();
    }
    if *method != Method::GET && *method != Method::POST {
        let mut reply = Reply::from(ApiError::method_not_allowed());
        reply.headers.push((header::ALLOW, "GET, POST".into()));
        return reply;
    }
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let user_agent = text(header::USER_AGENT).unwrap_or_default();
    let source = text(header::ORIGIN)
        .or_else(|| text(header::REFERER))
        .unwrap_or_default();
    let (mut store, now) = shared.store();
    if !store.tokens.contains_key(token) {
        return ApiError::not_found().into();
    }
    if is_bot(&user_agent) {
        debug!(user_agent = %user_agent, "emulator ignored a ping from a bot");
        return Reply::ok(json!({"ok": true, "ignored": true, "reason": "bot user agent"}));
    }
    match store.ping(token, now, source, user_agent) {
        Some((check_id, event)) => Reply::ok(json!({
            "ok": true,
            "checkId": check_id,
            "eventId": event.id,
            "state": event.state,
            "timestamp": timestamp(event.at),
        })),
        None => ApiError::not_found().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bots_are_recognised() {
        assert!(is_bot("Slackbot-LinkExpanding 1.0"));
        assert!(is_bot("Mozilla/5.0 (compatible; Googlebot/2.1)"));
        assert!(is_bot("facebookexternalhit/1.1"));
        assert!(!is_bot("heartbeat-agent/0.1.0"));
        assert!(!is_bot("curl/8.0"));
    }
}
