//! The ping host: `GET`/`POST /{pingToken}` records a heartbeat event whose state follows the
//! check's timer (see `checks`), with `source` from `Origin` (else `Referer`) and `userAgent`
//! from `User-Agent`. Pings from the eight bots the service documents (link previews) are
//! ignored, as the real service does; `PUT`, `PATCH` and `DELETE` are answered 405 and not
//! recorded.

use axum::http::{header, HeaderMap, Method};
use serde_json::json;
use tracing::debug;

use super::server::{ApiError, Reply};
use super::state::{timestamp, Shared};

/// The user agents whose pings the service ignores, exactly as documented: "**Blocked user
/// agents**: Twitterbot, Slackbot, Googlebot, Discordbot, Facebot, TelegramBot, WhatsApp,
/// LinkedInBot" (`checkly/docs` 28f32985, `detect/uptime-monitoring/heartbeat-monitors/
/// examples.mdx`). Any other agent, `Dependabot` or `my-backup-bot/1.0` included, pings.
const BOT_AGENTS: &[&str] = &[
    "twitterbot",
    "slackbot",
    "googlebot",
    "discordbot",
    "facebot",
    "telegrambot",
    "whatsapp",
    "linkedinbot",
];

/// Whether a User-Agent names one of the documented bots. Matching is a case-insensitive
/// substring (assumption: the documentation gives names, not a matching rule; real agents
/// carry them inside longer strings such as `Slackbot-LinkExpanding 1.0`).
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
        assert!(is_bot("WhatsApp/2.23.20.0"));
        assert!(is_bot("LinkedInBot/1.0 (compatible; Mozilla/5.0)"));
        for bot in [
            "Twitterbot/1.0",
            "Discordbot/2.0",
            "Facebot",
            "TelegramBot (like TwitterBot)",
        ] {
            assert!(is_bot(bot), "{bot}");
        }
        // Not on the documented list: these ping.
        assert!(!is_bot("facebookexternalhit/1.1"));
        assert!(!is_bot("Dependabot/1.0"));
        assert!(!is_bot("my-backup-bot/1.0"));
        assert!(!is_bot("Mozilla/5.0 (compatible; bingbot/2.0)"));
        assert!(!is_bot("heartbeat-agent/0.1.0"));
        assert!(!is_bot("curl/8.0"));
    }
}
