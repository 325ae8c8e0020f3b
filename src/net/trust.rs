//! The certificate authorities every TLS connection trusts: the system's store by default, as
//! curl and Go read it, plus an extra bundle from `[api] ca_file` (or `run --ca-file`).
//!
//! - `SSL_CERT_FILE` (a PEM bundle) and `SSL_CERT_DIR` (directories of PEM files, `:`-separated)
//!   replace the system's defaults when set, as for curl, OpenSSL and Go.
//! - Else the first system bundle found: `/etc/ssl/certs/ca-certificates.crt` (Debian, Ubuntu,
//!   Alpine with ca-certificates), `/etc/pki/tls/certs/ca-bundle.crt` (RHEL, Fedora),
//!   `/etc/ssl/ca-bundle.pem` (SUSE), `/etc/ssl/cert.pem` (Alpine, macOS); without one, the
//!   directory `/etc/ssl/certs`.
//! - When none of these holds a certificate (a `scratch` or distroless image), the Mozilla roots
//!   compiled into the binary (webpki-roots) are used, and the description says so.
//! - Bundles are read as every file the user names ([`crate::persist::file::read_named`]):
//!   symbolic links followed (RHEL's bundle and Kubernetes secret mounts are links), a FIFO or
//!   a device refused at once with its kind named, at most 16 MiB.
//!
//! Why not `rustls-native-certs` (reqwest's `rustls-tls-native-roots`): on Linux it reads the
//! bundle *and* every file of `/etc/ssl/certs` (each certificate two or three times through its
//! hash links), several times the work of the single bundle; one file, parsed once, is the
//! cheapest correct way, and directories are read only when named or when no
//! bundle exists. Certificates are deduplicated.
//!
//! The count of refused certificates by host ([`error_counts`]) is process-wide, as every
//! counter of `/metrics`: any client of the process adds to it and the endpoint reads it
//! without being handed each client.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// The system bundles looked for, in order.
const SYSTEM_FILES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The system directory read when no bundle exists.
const SYSTEM_DIR: &str = "/etc/ssl/certs";

/// The largest file read as a bundle (a full system bundle is about 200 KiB).
const MAX_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;

/// Where trusted certificates came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Source {
    /// What named it: `SSL_CERT_FILE`, `SSL_CERT_DIR`, `system bundle`, `ca_file`.
    what: &'static str,
    path: PathBuf,
    count: usize,
}

/// The trusted certificates of a [`super::Net`]: the system's (or the environment's) store
/// and `ca_file`.
#[derive(Debug)]
pub struct Trust {
    certs: Vec<reqwest::Certificate>,
    sources: Vec<Source>,
    /// The compiled-in roots are used (no system store was found).
    built_in: bool,
    /// What could not be read (logged when loaded, shown by `config check`).
    pub problems: Vec<String>,
}

impl Trust {
    /// Loads the store: the environment (read through `env`) or the system's, then `ca_file`.
    pub fn load(ca_file: Option<&Path>, env: impl Fn(&str) -> Option<OsString>) -> Trust {
        let mut loader = Loader::default();
        let file = env("SSL_CERT_FILE").filter(|v| !v.is_empty());
        let dirs = env("SSL_CERT_DIR").filter(|v| !v.is_empty());
        if let Some(file) = &file {
            loader.file("SSL_CERT_FILE", Path::new(file));
        }
        if let Some(dirs) = &dirs {
            for dir in std::env::split_paths(dirs) {
                loader.dir("SSL_CERT_DIR", &dir);
            }
        }
        if file.is_none() && dirs.is_none() {
            match SYSTEM_FILES.iter().map(Path::new).find(|p| p.is_file()) {
                Some(bundle) => loader.file("system bundle", bundle),
                None => loader.dir("system directory", Path::new(SYSTEM_DIR)),
            }
        }
        let built_in = loader.ders.is_empty();
        if let Some(extra) = ca_file {
            loader.file("ca_file", extra);
        }
        let certs = loader
            .ders
            .iter()
            .filter_map(|der| reqwest::Certificate::from_der(der).ok())
            .collect();
        Trust {
            certs,
            sources: loader.sources,
            built_in,
            problems: loader.problems,
        }
    }

    /// Sets `builder` to trust exactly this store.
    pub fn apply(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let builder = builder.tls_built_in_root_certs(self.built_in);
        self.certs
            .iter()
            .fold(builder, |b, cert| b.add_root_certificate(cert.clone()))
    }

    /// How many certificates are trusted besides the compiled-in roots.
    pub fn len(&self) -> usize {
        self.certs.len()
    }

    /// Whether no certificate was loaded (the compiled-in roots only).
    pub fn is_empty(&self) -> bool {
        self.certs.is_empty()
    }

    /// The sources in words: `SSL_CERT_FILE /x.pem (146 certificates) + ca_file /y (1)`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .sources
            .iter()
            .map(|s| format!("{} {} ({} certificates)", s.what, s.path.display(), s.count))
            .collect();
        if self.built_in {
            parts.insert(
                0,
                "the Mozilla roots built into the agent (no system CA store found)".to_owned(),
            );
        }
        parts.join(" + ")
    }
}

/// Certificates as they are read, deduplicated.
#[derive(Default)]
struct Loader {
    ders: Vec<Vec<u8>>,
    seen: HashSet<Vec<u8>>,
    sources: Vec<Source>,
    problems: Vec<String>,
}

impl Loader {
    /// Reads a PEM bundle; returns how many certificates it held.
    fn read(&mut self, path: &Path) -> Result<usize, String> {
        let bytes =
            crate::persist::file::read_named(path, MAX_BUNDLE_BYTES, "a certificate bundle")
                .map_err(|e| e.to_string())?;
        let mut count = 0;
        for cert in CertificateDer::pem_slice_iter(&bytes) {
            let cert = cert.map_err(|e| format!("not a PEM certificate bundle ({e})"))?;
            count += 1;
            let der = cert.as_ref().to_vec();
            if self.seen.insert(der.clone()) {
                self.ders.push(der);
            }
        }
        Ok(count)
    }

    fn file(&mut self, what: &'static str, path: &Path) {
        match self.read(path) {
            Ok(0) => self.problems.push(format!(
                "{what} {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
                path.display()
            )),
            Ok(count) => self.sources.push(Source {
                what,
                path: path.to_owned(),
                count,
            }),
            Err(err) => self
                .problems
                .push(format!("{what} {}: {err}", path.display())),
        }
    }

    fn dir(&mut self, what: &'static str, dir: &Path) {
        let Ok(items) = std::fs::read_dir(dir) else {
            if what == "SSL_CERT_DIR" {
                self.problems.push(format!(
                    "{what} {}: not a readable directory",
                    dir.display()
                ));
            }
            return;
        };
        let before = self.ders.len();
        let mut names: Vec<PathBuf> = items.filter_map(|i| i.ok().map(|i| i.path())).collect();
        names.sort();
        for path in names {
            // Links (the hash names) are followed: they point at the same certificates, which
            // the deduplication drops. Anything unreadable is skipped.
            if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
                let _ = self.read(&path);
            }
        }
        self.sources.push(Source {
            what,
            path: dir.to_owned(),
            count: self.ders.len() - before,
        });
    }
}

/// Certificate errors by host since start (for `/metrics`).
static ERRORS: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);

/// Counts a refused certificate of `host`; true the first time (log it in full then).
pub(crate) fn count_error(host: &str) -> bool {
    let mut errors = ERRORS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let counts = errors.get_or_insert_with(HashMap::new);
    let count = counts.entry(host.to_owned()).or_insert(0);
    *count += 1;
    *count == 1
}

/// Certificate errors by host, for `/metrics`.
pub fn error_counts() -> Vec<(String, u64)> {
    let errors = ERRORS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut counts: Vec<(String, u64)> = errors
        .as_ref()
        .map(|c| c.iter().map(|(h, n)| (h.clone(), *n)).collect())
        .unwrap_or_default();
    counts.sort();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test CA (read at run time: a test file the binary need not embed).
    fn ca() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls/ca.pem");
        std::fs::read_to_string(path).expect("tests/data/tls/ca.pem")
    }

    fn env(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, OsString)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn ssl_cert_file_replaces_the_system_bundle_and_ca_file_adds_to_it() {
        let dir = tempfile::tempdir().expect("dir");
        let bundle = dir.path().join("bundle.pem");
        std::fs::write(&bundle, format!("{}\n{}", ca(), ca())).expect("write");
        let trust = Trust::load(Some(&bundle), env(&[("SSL_CERT_FILE", &bundle)]));
        assert_eq!(trust.len(), 1, "deduplicated");
        assert!(!trust.built_in);
        let text = trust.describe();
        assert!(text.starts_with("SSL_CERT_FILE "), "{text}");
        assert!(text.contains("+ ca_file "), "{text}");
        assert!(trust.problems.is_empty(), "{:?}", trust.problems);
    }

    #[test]
    fn ssl_cert_dir_is_read_and_bad_sources_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("a.pem"), ca()).expect("write");
        std::os::unix::fs::symlink(dir.path().join("a.pem"), dir.path().join("1234abcd.0"))
            .expect("link");
        let garbage = dir.path().join("garbage.txt");
        std::fs::write(&garbage, "not a certificate").expect("write");
        let trust = Trust::load(Some(&garbage), env(&[("SSL_CERT_DIR", dir.path())]));
        assert_eq!(trust.len(), 1);
        assert!(
            trust.describe().contains("SSL_CERT_DIR"),
            "{}",
            trust.describe()
        );
        assert_eq!(trust.problems.len(), 1, "{:?}", trust.problems);
        assert!(
            trust.problems[0].contains("ca_file"),
            "{:?}",
            trust.problems
        );
        assert!(
            trust.problems[0].contains("no certificate"),
            "{:?}",
            trust.problems
        );
    }

    #[test]
    fn the_system_bundle_is_the_default() {
        let trust = Trust::load(None, |_| None);
        if SYSTEM_FILES.iter().any(|p| Path::new(p).is_file()) {
            assert!(trust.len() > 50, "{}", trust.describe());
            assert!(
                trust.describe().starts_with("system bundle"),
                "{}",
                trust.describe()
            );
        } else {
            assert!(
                trust.describe().contains("no system CA store"),
                "{}",
                trust.describe()
            );
        }
    }
}
