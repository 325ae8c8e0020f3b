//! Network probes: `tcp` (a connection within a timeout) and `http` (a GET that answers the
//! expected status within a timeout). Both are async and need no blocking pool.

use std::time::{Duration, Instant};

use super::Probe;
use crate::duration::human_duration;

/// `tcp`: a TCP connection to `address` (`host:port`; the name is resolved as part of it)
/// succeeds within `timeout`. The connection is closed right away.
pub(super) async fn tcp(address: &str, timeout: Duration) -> Probe {
    let started = Instant::now();
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_stream)) => Probe::healthy(format!(
            "tcp {address}: connected in {}",
            human_duration(started.elapsed())
        )),
        Ok(Err(err)) => Probe::unhealthy(format!("tcp {address}: cannot connect: {err}")),
        Err(_) => Probe::unhealthy(format!(
            "tcp {address}: no connection within {}",
            human_duration(timeout)
        )),
    }
}

/// `http`: `GET url` answers `expect_status` within `timeout` (the whole exchange up to the
/// status line and headers). Redirects are not followed, so a 301 is a 301. The URL is shown
/// redacted in the reason: its path and query may hold a token.
pub(super) async fn http(
    client: &reqwest::Client,
    url: &str,
    expect_status: u16,
    timeout: Duration,
) -> Probe {
    let shown = crate::redact::url(url);
    let started = Instant::now();
    let request = client.get(url).timeout(timeout).send();
    // reqwest's own timeout covers the exchange; the outer one also covers name resolution
    // and is the one that decides on a server that accepts but never answers.
    let answer = match tokio::time::timeout(timeout, request).await {
        Ok(answer) => answer,
        Err(_) => return no_answer(&shown, timeout),
    };
    match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            let took = human_duration(started.elapsed());
            if status == expect_status {
                Probe::healthy(format!("http {shown}: answered {status} in {took}"))
            } else {
                Probe::unhealthy(format!(
                    "http {shown}: answered {status} in {took}, expected {expect_status}"
                ))
            }
        }
        Err(err) if err.is_timeout() => no_answer(&shown, timeout),
        Err(err) => Probe::unhealthy(format!(
            "http {shown}: {}",
            crate::redact::reqwest_error(&err)
        )),
    }
}

/// The reason of an HTTP probe that timed out.
fn no_answer(shown: &str, timeout: Duration) -> Probe {
    Probe::unhealthy(format!(
        "http {shown}: no answer within {}",
        human_duration(timeout)
    ))
}
