//! The dashboard: server-rendered HTML pages of the status endpoint (docs/status.md,
//! "Dashboard"), for a person with a browser, next to the JSON routes that stay as they are.
//!
//! Routes: `GET /` (every job), `GET /jobs/{name}` (one job and its history with output
//! tails), `POST /login` and `POST /logout`. The pages are read-only: they show, they change
//! nothing (running a job or pausing it stays with the bearer-token routes).
//!
//! **Access** is the rule of `/status`: open on a loopback or unix-socket bind; on any other
//! bind a request needs the `[status] token`, either as `Authorization: Bearer` (a proxy in
//! front adds it) or as the session cookie that `POST /login` sets after the token was typed
//! into the login form. The cookie holds a SHA-256 digest of the token under a fixed label,
//! not the token: it is worth the token on this endpoint (until the token changes) and nothing
//! elsewhere; it is `HttpOnly` and `SameSite=Strict`. `POST /login` and `POST /logout` take
//! forms only from the page itself: a request whose `Sec-Fetch-Site` is another site, or whose
//! `Origin` is not this endpoint's `Host`, is refused (login CSRF).
//!
//! **What a page holds**: the `/status` document ([`super::build::document`], every text
//! already scrubbed of the API key, the token and ping URLs) and the history files
//! ([`runs`]: only the lines shown are read, one run at a time, in `spawn_blocking`; a job's
//! page keeps the last 4 KiB of each run's output and links to the rest; the overview's marks
//! of the last 24 hours are kept in the router's own [`Pages`] until a job's history changes;
//! scrubbed when recorded and again when read), each text HTML-escaped ([`html::esc`]). Pages
//! and the history's JSON answers take turns, two at a time, from when they are read until
//! they are sent ([`super::turns`]), so readers at once, however slow, cannot multiply what one
//! page holds. Every answer carries a strict Content-Security-Policy ([`html::csp`]),
//! `X-Frame-Options: DENY`, `no-store` and `no-referrer`.
//!
//! Modules by what they draw: [`render`] the pages, [`cells`] each state's words, [`charts`]
//! the timeline, the durations and the legend, [`html`] the frame and the escape; [`runs`]
//! reads the history for them.
//!
//! Hand-written HTML rather than a template crate (maud, askama): three small pages and one
//! escape function do not pay for a dependency, and only the daemon reaches this code.

mod cells;
mod charts;
mod html;
mod render;
mod runs;

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use sha2::{Digest, Sha256};

use super::remote::Refresh;
use super::server::App;
use super::turns::in_turn;
use crate::redact::Secret;

/// The session cookie's name.
const COOKIE: &str = "heartbeat_agent_session";

/// The dashboard's state: the endpoint's, and the overview's marks kept between requests.
struct Pages {
    /// The endpoint's state: the config, the daemon's context, the sources of `/status`.
    app: Arc<App>,
    /// Each job's runs of the last day as the timelines draw them, read again only when the
    /// job's history changed: the overview of many idle jobs reads next to nothing.
    marks: runs::Marks,
}

/// The dashboard's routes on `app`, with their own state (made here, when the endpoint is
/// assembled).
pub(super) fn routes(app: Arc<App>) -> Router {
    let pages = Arc::new(Pages {
        app,
        marks: runs::Marks::default(),
    });
    Router::new()
        .route("/", get(overview))
        .route("/jobs/{name}", get(job))
        .route("/login", post(login))
        .route("/logout", post(logout))
        .with_state(pages)
}

/// The session cookie's value for `token`: a digest of it under a label of this use.
fn session(token: &Secret) -> String {
    let digest = Sha256::new()
        .chain_update(b"heartbeat-agent dashboard session\0")
        .chain_update(token.expose().as_bytes())
        .finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of the request's cookie `name`, if any.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim())
}

/// Whether the request may see the pages: always on loopback and unix sockets; otherwise with
/// the bearer token or the session cookie.
fn allowed(app: &App, headers: &HeaderMap) -> bool {
    let config = app.config();
    let status = &config.status;
    let Some(token) = status
        .token
        .as_ref()
        .filter(|_| status.token_required_for_all())
    else {
        return true;
    };
    if crate::bearer::carries(headers, token) {
        return true;
    }
    let given = cookie(headers, COOKIE).unwrap_or_default();
    Sha256::digest(given.as_bytes()) == Sha256::digest(session(token).as_bytes())
}

/// Whether a form post comes from a page of this endpoint: no `Sec-Fetch-Site` but
/// `same-origin` (or `none`: typed by the user), and no `Origin` but this `Host`'s.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if text(header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|site| !matches!(site, "same-origin" | "none"))
    {
        return false;
    }
    match text(header::ORIGIN) {
        None => true,
        Some(origin) => {
            let host = text(header::HOST).unwrap_or_default();
            !host.is_empty()
                && (origin == format!("http://{host}") || origin == format!("https://{host}"))
        }
    }
}

/// An HTML answer with the page's security headers.
fn page(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let Ok(csp) = HeaderValue::from_str(html::csp()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn login_page(message: Option<&str>) -> Response {
    page(StatusCode::UNAUTHORIZED, render::login(message))
}

fn redirect(to: &'static str, cookie: Option<String>) -> Response {
    let mut response = page(StatusCode::SEE_OTHER, String::new());
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(to));
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `GET /`: every job.
async fn overview(State(pages): State<Arc<Pages>>, headers: HeaderMap) -> Response {
    let app = &pages.app;
    if !allowed(app, &headers) {
        return login_page(None);
    }
    let Some(turn) = app.turns.history_turn().await else {
        return page(StatusCode::SERVICE_UNAVAILABLE, String::new());
    };
    let doc = super::build::document(app, Refresh::Cached).await;
    let config = app.config();
    let jobs: Vec<(String, usize)> = doc
        .jobs
        .iter()
        .map(|j| {
            let limit = config.job(&j.name).map_or(0, |c| c.history);
            (j.name.clone(), limit.min(runs::TIMELINE_RUNS))
        })
        .collect();
    let history = app.history();
    let now = doc.generated_at;
    let reader = Arc::clone(&pages);
    // Reading the marks and drawing a page of 1,000 timelines (0.1 s at 288 runs each) happen
    // off the daemon's one runtime thread, so fires are not held up by a reader.
    let drawn = tokio::task::spawn_blocking(move || {
        let marks = reader.marks.of(&history, &jobs, now);
        let read = jobs.iter().map(|(_, limit)| *limit);
        let marks: Vec<_> = marks.into_iter().zip(read).collect();
        render::overview(&doc, &marks)
    })
    .await;
    match drawn {
        Ok(html) => in_turn(page(StatusCode::OK, String::new()), html, turn),
        Err(_) => page(StatusCode::INTERNAL_SERVER_ERROR, String::new()),
    }
}

/// `GET /jobs/{name}`: one job and its history (its configured `history` runs).
async fn job(
    State(pages): State<Arc<Pages>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let app = &pages.app;
    if !allowed(app, &headers) {
        return login_page(None);
    }
    let Some(limit) = app.config().job(&name).map(|j| j.history) else {
        return page(StatusCode::NOT_FOUND, render::no_such_job(&name));
    };
    // The turn covers the document too: it holds each job's last output tail.
    let Some(turn) = app.turns.history_turn().await else {
        return page(StatusCode::SERVICE_UNAVAILABLE, String::new());
    };
    let doc = super::build::document(app, Refresh::Cached).await;
    let history = app.history();
    let runs = runs::shown(history, name.clone(), limit).await;
    match doc.jobs.iter().find(|j| j.name == name) {
        Some(job) => {
            let html = render::job_page(&doc, job, &runs, limit);
            in_turn(page(StatusCode::OK, String::new()), html, turn)
        }
        None => page(StatusCode::NOT_FOUND, String::new()),
    }
}

/// The login form's fields.
#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

/// `POST /login`: with the right token, sets the session cookie and goes to `/`; otherwise
/// shows the form again, saying why.
async fn login(
    State(pages): State<Arc<Pages>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !same_origin(&headers) {
        return page(
            StatusCode::FORBIDDEN,
            render::login(Some(
                "this form was sent from another site: log in from this endpoint's own page",
            )),
        );
    }
    let config = pages.app.config();
    let Some(token) = config.status.token.as_ref() else {
        return redirect("/", None);
    };
    let given = Sha256::digest(form.token.trim().as_bytes());
    if given != Sha256::digest(token.expose().as_bytes()) {
        return super::attempts::refused(login_page(Some(
            "wrong token: type the value of [status] token (or of the file token_file names)",
        )));
    }
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        session(token)
    );
    redirect("/", Some(cookie))
}

/// `POST /logout`: clears the session cookie.
async fn logout(headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return page(StatusCode::FORBIDDEN, String::new());
    }
    let cookie = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    redirect("/", Some(cookie))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).expect("a value"));
        }
        headers
    }

    #[test]
    fn forms_from_other_sites_are_refused() {
        assert!(same_origin(&headers(&[("host", "10.0.0.5:9465")])));
        assert!(same_origin(&headers(&[
            ("host", "10.0.0.5:9465"),
            ("origin", "http://10.0.0.5:9465"),
            ("sec-fetch-site", "same-origin"),
        ])));
        for bad in [
            vec![("host", "10.0.0.5:9465"), ("origin", "http://evil.example")],
            vec![("host", "10.0.0.5:9465"), ("origin", "null")],
            vec![("host", "10.0.0.5:9465"), ("sec-fetch-site", "cross-site")],
            vec![("host", "10.0.0.5:9465"), ("sec-fetch-site", "same-site")],
            vec![("origin", "http://10.0.0.5:9465")],
        ] {
            assert!(!same_origin(&headers(&bad)), "{bad:?}");
        }
    }

    #[test]
    fn the_cookie_is_read_among_others_and_is_not_the_token() {
        let h = headers(&[("cookie", "a=1; heartbeat_agent_session=abc ; b=2")]);
        assert_eq!(cookie(&h, COOKIE), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "x=1")]), COOKIE), None);
        let token = Secret::new("t0k");
        assert!(!session(&token).contains("t0k"));
        assert_eq!(session(&token).len(), 64);
    }
}
