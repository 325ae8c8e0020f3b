//! Which proxy a request goes through: the same rule for every request (pings over `http://`
//! and `https://`, the API, `http` watches), as curl and Go apply it.
//!
//! - `[api] proxy = "URL"` sends every request through URL; `proxy = "none"` sends none through
//!   a proxy, whatever the environment says.
//! - Else the environment: `https_proxy`/`HTTPS_PROXY` for `https://` URLs, `http_proxy`/
//!   `HTTP_PROXY` for `http://` URLs, `all_proxy`/`ALL_PROXY` for both when the first is unset
//!   (the lower-case form wins when both are set, as in curl).
//! - `no_proxy`/`NO_PROXY` (a comma-separated list) exempts hosts from any proxy: `*` (every
//!   host), a domain and its subdomains (`example.com` or `.example.com`), an IP address, or a
//!   CIDR block (`10.0.0.0/8`, `fd00::/8`); any entry may carry a `:port` (`10.0.0.5:8443`,
//!   `127.0.0.0/8:18466`, `[fd00::1]:80`), which then exempts only that port. An entry that is
//!   none of these is reported and ignored.
//!
//! Home-made, small, on purpose: reqwest applies the environment itself, but the built-in
//! HTTP/1.1 client of `http://` pings must make the same decision (it connects only when the
//! rule says "direct"), and reqwest does not expose its matcher; one rule here, given to reqwest
//! as its only proxy ([`super::Net::client_builder`]), keeps both the same. A proxy's password
//! is a secret: [`Proxy::redacted`] is what is shown.
//!
//! A proxy that wants credentials answers 407 (to a forwarded `http://` request, or to the
//! `CONNECT` of an `https://` one): [`refused_credentials`] recognises both, and
//! [`wants_credentials`] is what every caller says then, naming the proxy and never the service.

use std::net::IpAddr;

/// `[api] proxy` as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxySetting {
    /// `"none"`: no proxy for any request.
    None,
    /// A proxy for every request.
    Url(reqwest::Url),
}

impl ProxySetting {
    /// Parses the value of `[api] proxy`: `none`, or an `http://` or `https://` proxy URL
    /// (`host:port` alone means `http://host:port`).
    pub fn parse(text: &str) -> Result<ProxySetting, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(ProxySetting::None);
        }
        parse_url(text).map(ProxySetting::Url)
    }
}

/// A proxy URL from the config or the environment; the error never shows a password.
fn parse_url(text: &str) -> Result<reqwest::Url, String> {
    let with_scheme = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|e| {
        format!(
            "{} is not a proxy URL ({e}); expected http://HOST:PORT",
            shown(text)
        )
    })?;
    match url.scheme() {
        "http" | "https" if url.host_str().is_some() => Ok(url),
        "http" | "https" => Err(format!("{} names no host", redacted(&url))),
        other => Err(format!(
            "{}: proxy scheme \"{other}\" is not supported; use an http:// or https:// proxy",
            redacted(&url)
        )),
    }
}

/// The proxy rule of a process.
#[derive(Debug, Clone, Default)]
pub struct Proxy {
    http: Option<reqwest::Url>,
    https: Option<reqwest::Url>,
    no_proxy: Vec<Exempt>,
    /// What was ignored, for the log (an unparsable variable).
    pub problems: Vec<String>,
}

impl Proxy {
    /// The rule from `[api] proxy` (when set) and the environment read through `env`.
    pub fn from_env(setting: Option<ProxySetting>, env: impl Fn(&str) -> Option<String>) -> Proxy {
        let mut rule = Proxy::default();
        let var = |lower: &str, upper: &str| {
            env(lower)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (lower.to_owned(), v))
                .or_else(|| {
                    env(upper)
                        .filter(|v| !v.trim().is_empty())
                        .map(|v| (upper.to_owned(), v))
                })
        };
        let mut read = |name_value: Option<(String, String)>| {
            let (name, value) = name_value?;
            parse_url(value.trim())
                .map_err(|e| rule.problems.push(format!("{name} ignored: {e}")))
                .ok()
        };
        match setting {
            Some(ProxySetting::None) => return rule,
            Some(ProxySetting::Url(url)) => {
                rule.http = Some(url.clone());
                rule.https = Some(url);
            }
            None => {
                let all = read(var("all_proxy", "ALL_PROXY"));
                rule.http = read(var("http_proxy", "HTTP_PROXY")).or_else(|| all.clone());
                rule.https = read(var("https_proxy", "HTTPS_PROXY")).or(all);
            }
        }
        if let Some((name, list)) = var("no_proxy", "NO_PROXY") {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                match Exempt::parse(entry) {
                    Some(exempt) => rule.no_proxy.push(exempt),
                    None => rule.problems.push(format!(
                        "{name} entry \"{entry}\" ignored: not a host, IP address or CIDR block \
                         (each may end in :PORT)"
                    )),
                }
            }
        }
        rule
    }

    /// The proxy for `url`, or `None` for a direct connection.
    pub fn for_url(&self, url: &reqwest::Url) -> Option<&reqwest::Url> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" => self.http.as_ref(),
            _ => None,
        }?;
        let host = url.host_str()?;
        let port = url.port_or_known_default();
        if self.no_proxy.iter().any(|e| e.matches(host, port)) {
            return None;
        }
        Some(proxy)
    }

    /// The proxies in use, passwords hidden, for `config check` and the log.
    pub fn describe(&self) -> String {
        match (&self.http, &self.https) {
            (None, None) => "none (direct connections)".to_owned(),
            (http, https) => {
                let show =
                    |u: &Option<reqwest::Url>| u.as_ref().map_or("direct".to_owned(), redacted);
                let mut text = format!("http: {}, https: {}", show(http), show(https));
                if !self.no_proxy.is_empty() {
                    text.push_str(&format!(
                        ", except {} NO_PROXY entries",
                        self.no_proxy.len()
                    ));
                }
                text
            }
        }
    }

    /// A proxy URL with its password replaced by `…`.
    pub fn redacted(url: &reqwest::Url) -> String {
        redacted(url)
    }
}

fn redacted(url: &reqwest::Url) -> String {
    let user = match (url.username(), url.password()) {
        ("", None) => String::new(),
        (user, None) => format!("{user}@"),
        (user, Some(_)) => format!("{user}:…@"),
    };
    let host = url.host_str().unwrap_or("");
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!("{}://{user}{host}{port}", url.scheme())
}

/// Text that failed to parse as a URL, shown without anything that may be a password.
fn shown(text: &str) -> String {
    match text.rsplit_once('@') {
        Some((_, host)) => format!("…@{host}"),
        None => text.to_owned(),
    }
}

/// One `NO_PROXY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Exempt {
    All,
    Domain {
        name: String,
        port: Option<u16>,
    },
    Ip {
        ip: IpAddr,
        port: Option<u16>,
    },
    Cidr {
        net: IpAddr,
        bits: u8,
        port: Option<u16>,
    },
}

impl Exempt {
    fn parse(entry: &str) -> Option<Exempt> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        if entry == "*" {
            return Some(Exempt::All);
        }
        // `10.0.0.0/8`, `127.0.0.0/8:18466`, `[fd00::]/8:80`, `fd00::/8`.
        if let Some((net, bits)) = entry.split_once('/') {
            let net: IpAddr = net.trim_matches(|c| c == '[' || c == ']').parse().ok()?;
            let (bits, port) = match bits.split_once(':') {
                Some((bits, port)) => (bits, Some(port.parse().ok()?)),
                None => (bits, None),
            };
            let bits: u8 = bits.parse().ok()?;
            let max = if net.is_ipv4() { 32 } else { 128 };
            return (bits <= max).then_some(Exempt::Cidr { net, bits, port });
        }
        // `[::1]:8080`, `[::1]`, `::1`, `10.0.0.1:80`, `host:80`, `.example.com`.
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (ip, after) = rest.split_once(']')?;
            (ip, after.strip_prefix(':').and_then(|p| p.parse().ok()))
        } else if entry.parse::<IpAddr>().is_ok() {
            (entry, None)
        } else {
            match entry.rsplit_once(':') {
                Some((host, port)) => (host, Some(port.parse().ok()?)),
                None => (entry, None),
            }
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Exempt::Ip { ip, port });
        }
        let name = host.trim_start_matches("*.").trim_start_matches('.');
        Some(Exempt::Domain {
            name: name.to_ascii_lowercase(),
            port,
        })
    }

    fn matches(&self, host: &str, port: Option<u16>) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port_ok = |want: &Option<u16>| want.is_none() || *want == port;
        match self {
            Exempt::All => true,
            Exempt::Domain { name, port: want } => {
                let host = host.to_ascii_lowercase();
                port_ok(want)
                    && (host == *name
                        || host
                            .strip_suffix(name.as_str())
                            .is_some_and(|rest| rest.ends_with('.')))
            }
            Exempt::Ip { ip, port: want } => {
                port_ok(want) && host.parse::<IpAddr>().is_ok_and(|h| h == *ip)
            }
            Exempt::Cidr {
                net,
                bits,
                port: want,
            } => {
                port_ok(want)
                    && host
                        .parse::<IpAddr>()
                        .is_ok_and(|h| in_block(h, *net, *bits))
            }
        }
    }
}

fn in_block(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(ip), IpAddr::V4(net)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(net) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(net)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(net) & mask
        }
        _ => false,
    }
}

/// What to say when a proxy refused a request with HTTP `status` because it wants credentials
/// (the caller names the proxy, redacted): the answer is the proxy's, not the server's, so
/// nothing reached the server.
pub(crate) fn wants_credentials(status: u16) -> String {
    format!(
        "the proxy refused the request with HTTP {status} (it wants credentials); give it its \
         user and password in its URL ([api] proxy, HTTP_PROXY or HTTPS_PROXY), or exempt the \
         host with NO_PROXY"
    )
}

/// Whether `err` is a proxy's 407 to the `CONNECT` of an `https://` request. hyper-util's tunnel
/// error type is not exported, so its words are what can be matched.
pub(crate) fn refused_credentials(err: &reqwest::Error) -> bool {
    super::causes(err).any(|inner| {
        inner
            .to_string()
            .ends_with("tunnel error: proxy authorization required")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(vars: &[(&str, &str)], setting: Option<ProxySetting>) -> Proxy {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Proxy::from_env(setting, move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    fn via(rule: &Proxy, url: &str) -> Option<String> {
        rule.for_url(&reqwest::Url::parse(url).expect("url"))
            .map(ToString::to_string)
    }

    #[test]
    fn the_environment_applies_per_scheme_with_all_proxy_as_fallback() {
        let r = rule(
            &[("HTTP_PROXY", "http://p1:3128"), ("ALL_PROXY", "p2:8080")],
            None,
        );
        assert_eq!(
            via(&r, "http://ping.example/t").as_deref(),
            Some("http://p1:3128/")
        );
        assert_eq!(
            via(&r, "https://ping.example/t").as_deref(),
            Some("http://p2:8080/")
        );
        let lower_wins = rule(
            &[
                ("http_proxy", "http://low:1"),
                ("HTTP_PROXY", "http://up:2"),
            ],
            None,
        );
        assert_eq!(
            via(&lower_wins, "http://h/").as_deref(),
            Some("http://low:1/")
        );
    }

    #[test]
    fn no_proxy_exempts_domains_ips_blocks_and_ports() {
        let r = rule(
            &[
                ("HTTPS_PROXY", "http://p:3128"),
                ("HTTP_PROXY", "http://p:3128"),
                (
                    "NO_PROXY",
                    "example.com, .corp, 10.0.0.0/8, ::1, 192.168.1.5:8443,[fd00::1]:80,\
                     127.0.0.0/8:18466, fd00::/16:443",
                ),
            ],
            None,
        );
        for direct in [
            "https://example.com/",
            "https://api.example.com/",
            "https://x.corp/",
            "http://10.2.3.4/",
            "http://[::1]:9/",
            "https://192.168.1.5:8443/",
            "http://[fd00::1]/",
            "http://127.0.0.9:18466/",
            "https://[fd00::7]/",
        ] {
            assert_eq!(via(&r, direct), None, "{direct}");
        }
        for proxied in [
            "https://notexample.com/",
            "http://11.0.0.1/",
            "https://192.168.1.5/",
            "http://[fd00::1]:81/",
            "http://127.0.0.9:18467/",
            "http://[fd00::7]:80/",
        ] {
            assert!(via(&r, proxied).is_some(), "{proxied}");
        }
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let bad = rule(
            &[
                ("HTTP_PROXY", "http://p:1"),
                ("NO_PROXY", "10.0.0.0/8:port,h"),
            ],
            None,
        );
        assert_eq!(
            bad.problems,
            ["NO_PROXY entry \"10.0.0.0/8:port\" ignored: not a host, IP address or CIDR block (each may end in :PORT)"]
        );
        let all = rule(&[("HTTP_PROXY", "http://p:1"), ("no_proxy", "*")], None);
        assert_eq!(via(&all, "http://anything/"), None);
    }

    #[test]
    fn the_config_overrides_the_environment_and_none_turns_it_off() {
        let env = [("HTTPS_PROXY", "http://env:1")];
        let set = ProxySetting::parse("http://cfg:2").expect("parse");
        assert_eq!(
            via(&rule(&env, Some(set)), "https://h/").as_deref(),
            Some("http://cfg:2/")
        );
        let none = ProxySetting::parse("none").expect("parse");
        assert_eq!(via(&rule(&env, Some(none)), "https://h/"), None);
    }

    #[test]
    fn a_proxy_password_is_never_shown() {
        let r = rule(&[("HTTPS_PROXY", "http://user:s3cret@p:3128")], None);
        assert!(!r.describe().contains("s3cret"), "{}", r.describe());
        assert!(r.describe().contains("user:…@p:3128"), "{}", r.describe());
        let bad = rule(&[("HTTPS_PROXY", "socks5://user:s3cret@p:1080")], None);
        assert_eq!(bad.problems.len(), 1);
        assert!(!bad.problems[0].contains("s3cret"), "{:?}", bad.problems);
        assert!(
            bad.problems[0].contains("not supported"),
            "{:?}",
            bad.problems
        );
        let err = ProxySetting::parse("http://user:s3cret@").expect_err("no host");
        assert!(!err.contains("s3cret"), "{err}");
    }
}
