//! What the subcommands share, resolved once from the global flags, the environment and the
//! config file: the configuration (strict or lenient), the state directory and its outbox, the
//! outgoing connections ([`Net`], built once per command and handed to every client), the API
//! client and credentials, the status endpoint, the ping options `run` and `ping` both take,
//! and the async runtime of one-shot commands. Subcommand files use this module instead of one
//! another's helpers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use tracing::warn;

use super::{print_error, GlobalArgs};
use crate::api::{ApiClient, ApiClientConfig};
use crate::config::secrets::API_KEY_ENV;
use crate::config::Config;
use crate::exit;
use crate::net::{Net, NetSettings};
use crate::ping::outbox::{self, Outbox};
use crate::ping::PingMethod;
use crate::redact::Secret;
use crate::status::client::Endpoint;
use crate::status::owner::Expected;

/// The account id when there is no config file (or the config has none).
pub(crate) const ACCOUNT_ENV: &str = "HEARTBEAT_AGENT_ACCOUNT";

/// Loads the config when `run` may need it: always with `--job`, else only when a file exists
/// (its `state_dir` and `api_key_env` still matter). Problems are warnings.
pub(super) fn load_config(global: &GlobalArgs, job: Option<&str>) -> Option<Config> {
    let path = crate::paths::config_file(global.config.as_ref());
    if job.is_none() && !config_wanted(global, &path) {
        return None;
    }
    match Config::load(&path) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                warn!("{warning}");
            }
            Some(loaded.config)
        }
        Err(err) => {
            let what = job.map_or(String::new(), |j| format!(" (for job \"{j}\")"));
            warn!(
                "configuration {} not used{what}; running the command anyway:\n{err}",
                path.display()
            );
            None
        }
    }
}

/// Whether the config at `path` is to be used: named (`--config`, `$HEARTBEAT_AGENT_CONFIG`)
/// or present at the default place. A command that works without a config (`run`, `history`)
/// goes on without one only when this is false; otherwise the config must load.
pub(super) fn config_wanted(global: &GlobalArgs, path: &Path) -> bool {
    global.config.is_some()
        || std::env::var_os(crate::paths::CONFIG_ENV).is_some_and(|v| !v.is_empty())
        || path.exists()
}

/// The state directory: `--state-dir`, else the config's, else the user's default.
pub(super) fn state_dir(global: &GlobalArgs, config: Option<&Config>) -> PathBuf {
    crate::paths::state_dir(
        global.state_dir.as_deref(),
        config.and_then(|c| c.agent.state_dir.as_deref()),
    )
}

/// The ping options `run` and `ping` share.
#[derive(Debug, Args)]
pub struct PingOptions {
    /// HTTP method of the pings
    #[arg(long, value_enum, default_value_t = MethodArg::Get, value_name = "METHOD")]
    pub ping_method: MethodArg,

    /// Sent as the ping's Origin header, shown as the event's source [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,

    /// Total time for one ping, all attempts and pauses included
    #[arg(long, value_parser = crate::duration::parse, default_value = "30s", value_name = "DUR")]
    pub ping_timeout: Duration,

    /// Also trust the CA certificates (PEM) in FILE for https pings, besides the system's
    /// store (SSL_CERT_FILE, SSL_CERT_DIR); overrides [api] ca_file
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl PingOptions {
    /// `--source`, else this host's name.
    pub(crate) fn source(&self) -> String {
        self.source.clone().unwrap_or_else(crate::host::name)
    }
}

/// `--ping-method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    /// GET
    Get,
    /// POST with an empty body
    Post,
}

impl From<MethodArg> for PingMethod {
    fn from(method: MethodArg) -> PingMethod {
        match method {
            MethodArg::Get => PingMethod::Get,
            MethodArg::Post => PingMethod::Post,
        }
    }
}

/// Prints every problem of a config that did not load, one per line, then
/// `configuration PATH is invalid: N problems{consequence}`; returns exit 78. A file that could
/// not be read at all is not called invalid: its one line (not found, permission denied) says
/// what happened and what to do, followed only by the consequence, if any.
pub(crate) fn invalid_config(path: &Path, err: &crate::config::LoadError, consequence: &str) -> u8 {
    for problem in &err.problems {
        crate::logging::write_err(problem);
    }
    if err.unread {
        let consequence = consequence.trim_start_matches([':', ';', ' ']);
        if !consequence.is_empty() {
            print_error(consequence);
        }
        return exit::CONFIG;
    }
    let count = err.problems.len();
    let noun = if count == 1 { "problem" } else { "problems" };
    print_error(format!(
        "configuration {} is invalid: {count} {noun}{consequence}",
        path.display()
    ));
    exit::CONFIG
}

/// The context of the commands that work with or without a valid config (`run`, `ping`,
/// `outbox`): the config when it loads, the state directory and the outgoing connections.
pub(crate) struct Lenient {
    /// The configuration, when one was found and is valid (problems were logged as warnings).
    pub config: Option<Config>,
    /// `--state-dir`, else the config's `state_dir`, else the user's default.
    pub state_dir: PathBuf,
    /// The config's `ca_file` and `proxy` (`--ca-file` wins); nothing is read or loaded
    /// before the first request.
    pub net: Net,
}

impl Lenient {
    /// Resolves the context; `job` is the `--job` the command was given, if any, and
    /// `ca_file` its `--ca-file`.
    pub(crate) fn resolve(
        global: &GlobalArgs,
        job: Option<&str>,
        ca_file: Option<&Path>,
    ) -> Lenient {
        let config = load_config(global, job);
        let state_dir = state_dir(global, config.as_ref());
        let ca_file = ca_file.map(Path::to_path_buf);
        let net = Net::new(match &config {
            Some(config) => config.api.net(ca_file),
            None => NetSettings {
                ca_file,
                ..NetSettings::default()
            },
        });
        Lenient {
            config,
            state_dir,
            net,
        }
    }

    /// How this command's pings leave the process (through [`Lenient::net`]).
    pub(crate) fn pings(&self) -> crate::ping::Sender {
        crate::ping::Sender::new(self.net.clone())
    }

    /// The outbox under the state directory, bounded by the config's `outbox_max_entries`.
    pub(crate) fn outbox(&self) -> Outbox {
        let failures = self.net.metrics().persist_failures();
        Outbox::new(&self.state_dir, self.outbox_max_entries(), failures)
    }

    /// `[agent] outbox_max_entries`, else the default.
    pub(crate) fn outbox_max_entries(&self) -> usize {
        self.config
            .as_ref()
            .map_or(outbox::DEFAULT_MAX_ENTRIES, |c| c.agent.outbox_max_entries)
    }
}

/// A tokio runtime on the current thread (start-up cost matters for `run` and one-shot
/// commands); when none can be made, says why and gives the exit code.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, u8> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            print_error(format!("cannot start the async runtime: {err}"));
            exit::FAILURE
        })
}

/// Where to call and with what key.
pub(super) struct Credentials {
    base_url: String,
    api_key: Secret,
    account_id: Option<String>,
    net: Net,
}

impl Credentials {
    /// The API client of these credentials.
    pub(super) fn client(self) -> Result<ApiClient, (u8, String)> {
        let mut config = ApiClientConfig::new(self.base_url, self.api_key);
        config.account_id = self.account_id;
        config.net = self.net;
        ApiClient::new(config).map_err(|e| (exit::FAILURE, e.to_string()))
    }
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The config's `[api]` table when a config file exists (or was named), else `--base-url` and
/// the environment. `--base-url` always wins.
pub(super) fn credentials(global: &GlobalArgs) -> Result<Credentials, (u8, String)> {
    let path = crate::paths::config_file(global.config.as_ref());
    let named = global.config.is_some() || env_value(crate::paths::CONFIG_ENV).is_some();
    if !named && !path.exists() {
        let shown = path.display();
        let base_url = global.base_url.clone().ok_or_else(|| {
            let msg = format!(
                "no API base URL: pass --base-url URL, or create {shown} with [api] base_url"
            );
            (exit::FAILURE, msg)
        })?;
        let api_key = env_value(API_KEY_ENV).map(Secret::new).ok_or_else(|| {
            let msg = format!(
                "no API key: set {API_KEY_ENV}, or create {shown} with [api] api_key_file or api_key_env"
            );
            (exit::FAILURE, msg)
        })?;
        return Ok(Credentials {
            base_url,
            api_key,
            account_id: env_value(ACCOUNT_ENV),
            net: Net::default(),
        });
    }
    let loaded = Config::load_for_reading(&path).map_err(|e| (exit::CONFIG, e.to_string()))?;
    for warning in &loaded.warnings {
        tracing::warn!(config = %path.display(), "{warning}");
    }
    let net = Net::new(loaded.config.api.net(None));
    config_credentials(loaded.config.api, &path, global, net)
}

/// The client of a loaded config's `[api]` table (`--base-url` wins), going through `net`, for
/// every command that works from the config file (`api`, `sync`, the daemon). The error is an
/// exit code and a message naming what to set.
pub(crate) fn config_client(
    api: crate::config::ApiSettings,
    path: &Path,
    global: &GlobalArgs,
    net: Net,
) -> Result<ApiClient, (u8, String)> {
    config_credentials(api, path, global, net)?.client()
}

fn config_credentials(
    api: crate::config::ApiSettings,
    path: &Path,
    global: &GlobalArgs,
    net: Net,
) -> Result<Credentials, (u8, String)> {
    let shown = path.display();
    let base_url = global.base_url.clone().or(api.base_url).ok_or_else(|| {
        let msg = format!("no API base URL: set [api] base_url in {shown}, or pass --base-url URL");
        (exit::FAILURE, msg)
    })?;
    let api_key = crate::config::read_api_key(&api.api_key)
        .map_err(|e| (exit::FAILURE, e.to_string()))?
        .ok_or_else(|| {
            let msg = format!(
                "no API key: set [api] api_key_file or api_key_env in {shown}, or {API_KEY_ENV}"
            );
            (exit::FAILURE, msg)
        })?;
    Ok(Credentials {
        base_url,
        api_key,
        account_id: api.account_id.or_else(|| env_value(ACCOUNT_ENV)),
        net,
    })
}

/// How long a command waits for the endpoint (the remote view may take up to 10 s to fetch).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(15);

/// The endpoint, the token to send and whose daemon must answer: `--url` (the config's token
/// when it loads; no daemon compared), else the config's `[status]` (its daemon must answer,
/// with the id kept in its state directory when that can be read: see
/// [`crate::status::owner`]). Errors carry the exit code.
pub(crate) fn endpoint(
    url: Option<&str>,
    global: &GlobalArgs,
) -> Result<(Endpoint, Option<Secret>, Expected), (u8, String)> {
    let path = crate::paths::config_file(global.config.as_ref());
    let loaded = Config::load_for_reading(&path).map(|l| l.config);
    match url {
        Some(url) => {
            let endpoint = Endpoint::parse(url).map_err(|e| (exit::USAGE, e.to_string()))?;
            Ok((
                endpoint,
                loaded.ok().and_then(|c| c.status.token),
                Expected::default(),
            ))
        }
        None => {
            let config = loaded.map_err(|err| {
                (
                    exit::CONFIG,
                    format!("{err}\nthe endpoint is read from [status] listen of this config; fix it or pass --url"),
                )
            })?;
            let expected = Expected::daemon_of(&path, &config, global.state_dir.as_deref());
            Ok((
                Endpoint::from_listen(&config.status.listen),
                config.status.token,
                expected,
            ))
        }
    }
}

/// [`endpoint`], with the bearer token read from `token_file` (`--token-file` of `trigger`,
/// `pause`, `resume`) in place of the config's `[status] token` when one is given: the way to
/// pass the token with `--url` and no config.
pub(crate) fn endpoint_with_token(
    url: Option<&str>,
    token_file: Option<&Path>,
    global: &GlobalArgs,
) -> Result<(Endpoint, Option<Secret>, Expected), (u8, String)> {
    let (endpoint, token, expected) = endpoint(url, global)?;
    let Some(path) = token_file else {
        return Ok((endpoint, token, expected));
    };
    let what = "write the status endpoint's token (its [status] token) into it, on one line";
    let text = crate::config::secrets::read_secret_file(path).map_err(|err| {
        (
            exit::USAGE,
            format!(
                "--token-file: cannot read {}: {err}; {what}",
                path.display()
            ),
        )
    })?;
    let token = text.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err((
            exit::USAGE,
            format!(
                "--token-file: {} holds no token (one word of printable ASCII); {what}",
                path.display()
            ),
        ));
    }
    Ok((endpoint, Some(Secret::new(token)), expected))
}

/// What the daemon's status endpoint needs from the config: the remote view's client (low
/// priority in the shared rate limiter, one attempt, short timeouts, through `net`). `None`
/// when no API is configured.
pub(crate) fn remote_client(
    config: &Config,
    global: &GlobalArgs,
    net: &Net,
) -> Option<crate::api::ApiClient> {
    use crate::api::{ApiClient, ApiClientConfig, Priority};
    use crate::net::RetryPolicy;
    let key = crate::config::read_api_key(&config.api.api_key)
        .ok()
        .flatten();
    let base = global
        .base_url
        .clone()
        .or_else(|| config.api.base_url.clone());
    let (Some(base), Some(key)) = (base, key) else {
        return None;
    };
    let mut settings = ApiClientConfig::new(base, key);
    settings.account_id.clone_from(&config.api.account_id);
    settings.connect_timeout = Duration::from_secs(3);
    settings.request_timeout = Duration::from_secs(8);
    settings.retry = RetryPolicy::none();
    settings.priority = Priority::Low;
    settings.net = net.clone();
    match ApiClient::new(settings) {
        Ok(client) => Some(client),
        Err(err) => {
            tracing::warn!(error = %err, "the status endpoint's remote view is off");
            None
        }
    }
}
