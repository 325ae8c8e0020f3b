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
//! hash links), several times the work of the single bundle; directories are read only when
//! named or when no bundle exists.
//!
//! Why not every certificate handed to reqwest as a root: a TLS connection needs only the
//! roots whose subject is the issuer of a certificate the server presents, and parsing all of
//! them was most of an https `run` (callgrind: 36.0 M of its 42.7 M instructions, with a
//! bundle and `/etc/ssl/certs` named; the handshake itself 2.6 M). So the agent gives reqwest
//! its own rustls configuration, whose verifier ([`verifier`]) asks the store for the roots by
//! the issuers of the presented chain, once per issuer per process (the whole run: 7.1 M
//! instructions, 3.1 M of them reading the system bundle; with `SSL_CERT_DIR` set, 3,902
//! syscalls became 422):
//! - bundles are read at load (a malformed one is a problem at once, as before), quickly
//!   ([`pem`]: the `base64` crate, not rustls-pki-types' constant-time decoder), and only the
//!   subject of each certificate is looked at;
//! - directories are not read: a root is found by its subject hash, as OpenSSL finds it
//!   ([`hashed_dir`]: `HASH.0`, `HASH.1`, ... as `c_rehash` and `update-ca-certificates`
//!   name them);
//! - when the roots found do not verify the chain, it is verified again against the whole
//!   store, read once as before (every file of each directory, duplicates dropped): a root
//!   kept in a directory under another name still counts, and a refusal is the whole store's.
//!   So exactly the same roots are trusted; only a refused certificate (and
//!   [`Trust::describe`], which counts a directory's certificates) pays for reading it all.
//!
//! A certificate that webpki cannot take as a root is skipped (reqwest refused to build a
//! client for any such root of the store).
//!
//! Refused certificates are counted by host in the registry of the `Net` whose client met them
//! ([`crate::metrics_registry`]).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::pki_types::{CertificateDer, TrustAnchor};
use rustls::RootCertStore;

mod hashed_dir;
mod pem;
mod verifier;

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

/// A client certificate chain and its private key, presented when a server asks (etcd's
/// `cert_file` and `key_file`).
pub type ClientAuth = (
    Vec<CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// Where trusted certificates came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Source {
    /// What named it: `SSL_CERT_FILE`, `SSL_CERT_DIR`, `system bundle`, `ca_file`.
    what: &'static str,
    path: PathBuf,
    /// How many certificates a bundle holds; `None` for a directory, whose count (the
    /// certificates it adds) is known once it is read in full ([`Store::complete`]).
    count: Option<usize>,
}

/// The trusted certificates of a [`super::Net`]: the system's (or the environment's) store
/// and `ca_file`.
#[derive(Debug)]
pub struct Trust {
    store: Arc<Store>,
    /// What could not be read (logged when loaded, shown by `config check`).
    pub problems: Vec<String>,
}

/// A certificate of a bundle with where its subject lies in it.
#[derive(Debug)]
struct Cert {
    der: Vec<u8>,
    subject: std::ops::Range<usize>,
}

impl Cert {
    fn new(der: Vec<u8>) -> Cert {
        let subject = pem::names(&der).map_or(0..0, |names| {
            let start = names.subject.as_ptr() as usize - der.as_ptr() as usize;
            start..start + names.subject.len()
        });
        Cert { der, subject }
    }

    fn subject(&self) -> &[u8] {
        &self.der[self.subject.clone()]
    }
}

/// What a [`Trust`] and the verifiers of its clients share.
#[derive(Debug)]
struct Store {
    sources: Vec<Source>,
    /// The certificates of the bundles, in order: the store's (`SSL_CERT_FILE` or the system
    /// bundle), then `ca_file`'s from `ca_file_from` on.
    bundles: Vec<Cert>,
    ca_file_from: usize,
    /// The directories of the store (`SSL_CERT_DIR`'s, or the system's without a bundle),
    /// each with what named it; looked up by hash, read in full only by [`Store::complete`].
    dirs: Vec<(&'static str, PathBuf)>,
    /// Whether the store holds no certificate, so the compiled-in roots are trusted; `None`
    /// while only reading its directories in full can tell.
    built_in: Option<bool>,
    /// The anchors found for an issuer (the daemon verifies many times).
    found: Mutex<HashMap<Vec<u8>, Vec<TrustAnchor<'static>>>>,
    complete: OnceLock<Complete>,
}

/// The whole store, read as a directory of certificates is read by curl's and Go's peers that
/// take every file: what [`Trust::describe`] counts and the second try of a refused chain.
#[derive(Debug)]
struct Complete {
    roots: Vec<TrustAnchor<'static>>,
    /// The certificates each directory of [`Store::dirs`] added (duplicates not counted).
    dir_counts: Vec<usize>,
    built_in: bool,
}

impl Trust {
    /// Loads the store: the environment (read through `env`) or the system's, then `ca_file`.
    /// Bundles are read (their problems are known at once); directories are only opened.
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
        let ca_file_from = loader.bundles.len();
        let built_in = match ca_file_from {
            0 if loader.dirs_hold_entries => None,
            0 => Some(true),
            _ => Some(false),
        };
        if let Some(extra) = ca_file {
            loader.file("ca_file", extra);
        }
        Trust {
            store: Arc::new(Store {
                sources: loader.sources,
                bundles: loader.bundles,
                ca_file_from,
                dirs: loader.dirs,
                built_in,
                found: Mutex::new(HashMap::new()),
                complete: OnceLock::new(),
            }),
            problems: loader.problems,
        }
    }

    /// A rustls configuration that trusts exactly this store plus `extra` (a cluster's own
    /// `ca_file`), presents `client_auth` (certificates and key) when given, and offers
    /// HTTP/1.1 as reqwest's own configuration does.
    pub fn tls_config(
        &self,
        extra: &[CertificateDer<'_>],
        client_auth: Option<ClientAuth>,
    ) -> Result<rustls::ClientConfig, rustls::Error> {
        // As reqwest: a provider the process installed, else ring.
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let mut anchors = RootCertStore::empty();
        for cert in extra {
            anchors.add(cert.clone())?;
        }
        let verifier = verifier::Verifier {
            store: Arc::clone(&self.store),
            extra: anchors.roots,
            provider: Arc::clone(&provider),
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::ALL_VERSIONS)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let mut config = match client_auth {
            Some((certs, key)) => builder.with_client_auth_cert(certs, key)?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// How many certificates are trusted besides the compiled-in roots (reads the whole store).
    pub fn len(&self) -> usize {
        let complete = self.store.complete();
        complete.roots.len()
            - if complete.built_in {
                webpki_roots::TLS_SERVER_ROOTS.len()
            } else {
                0
            }
    }

    /// Whether no certificate was loaded (the compiled-in roots only).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sources in words: `SSL_CERT_FILE /x.pem (146 certificates) + ca_file /y (1)`.
    /// A store with directories is read in full for their counts (once).
    pub fn describe(&self) -> String {
        let store = &self.store;
        let complete = store
            .sources
            .iter()
            .any(|s| s.count.is_none())
            .then(|| store.complete());
        let mut dir_counts = complete.iter().flat_map(|c| c.dir_counts.iter());
        let mut parts: Vec<String> = store
            .sources
            .iter()
            .map(|s| {
                let count = s.count.or_else(|| dir_counts.next().copied()).unwrap_or(0);
                format!("{} {} ({count} certificates)", s.what, s.path.display())
            })
            .collect();
        let built_in = store
            .built_in
            .unwrap_or_else(|| complete.is_some_and(|c| c.built_in));
        if built_in {
            parts.insert(
                0,
                "the Mozilla roots built into the agent (no system CA store found)".to_owned(),
            );
        }
        parts.join(" + ")
    }
}

impl Store {
    /// The anchors whose subject is the issuer of a certificate of `chain`: from the bundles,
    /// from each directory by hash, from the compiled-in roots when they are trusted.
    fn anchors_for<'a>(
        &self,
        chain: impl Iterator<Item = &'a CertificateDer<'a>>,
    ) -> RootCertStore {
        let mut issuers: Vec<&[u8]> = chain
            .filter_map(|cert| pem::names(cert.as_ref()).map(|n| n.issuer))
            .collect();
        issuers.sort_unstable();
        issuers.dedup();
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut roots = RootCertStore::empty();
        for issuer in issuers {
            let anchors = found
                .entry(issuer.to_vec())
                .or_insert_with(|| self.look_up(issuer));
            roots.roots.extend(anchors.iter().cloned());
        }
        roots
    }

    fn look_up(&self, issuer: &[u8]) -> Vec<TrustAnchor<'static>> {
        let mut roots = RootCertStore::empty();
        let bundled = self.bundles.iter().filter(|c| c.subject() == issuer);
        roots.add_parsable_certificates(bundled.map(|c| CertificateDer::from(c.der.as_slice())));
        if let (false, Some(hash)) = (self.dirs.is_empty(), hashed_dir::subject_hash(issuer)) {
            for (_, dir) in &self.dirs {
                let before = roots.len();
                for n in 0.. {
                    let Ok(text) = read_bundle(&hashed_dir::path(dir, hash, n)) else {
                        break;
                    };
                    let ders = pem::certificates(&text).ders.into_iter();
                    let matching =
                        ders.filter(|d| pem::names(d).is_some_and(|n| n.subject == issuer));
                    roots.add_parsable_certificates(matching.map(CertificateDer::from));
                }
                tracing::debug!(
                    dir = %dir.display(),
                    hash = %format!("{hash:08x}"),
                    found = roots.len() - before,
                    "trusted CA certificates looked up by subject hash"
                );
            }
        }
        if self.built_in == Some(true) {
            let built_in = webpki_roots::TLS_SERVER_ROOTS.iter();
            roots
                .roots
                .extend(built_in.filter(|a| a.subject.as_ref() == issuer).cloned());
        }
        roots.roots
    }

    /// The whole store, read once: the bundles, every file of every directory (names sorted,
    /// links followed, duplicates dropped), the compiled-in roots when nothing else is there.
    fn complete(&self) -> &Complete {
        self.complete.get_or_init(|| {
            tracing::debug!("trusted CA certificates: the whole store is read");
            let mut unique = Unique::default();
            for cert in &self.bundles[..self.ca_file_from] {
                unique.add(&cert.der);
            }
            let mut dir_counts = Vec::with_capacity(self.dirs.len());
            for (_, dir) in &self.dirs {
                let before = unique.ders.len();
                for der in read_dir_whole(dir) {
                    unique.add(&der);
                }
                dir_counts.push(unique.ders.len() - before);
            }
            let built_in = unique.ders.is_empty();
            for cert in &self.bundles[self.ca_file_from..] {
                unique.add(&cert.der);
            }
            let unique = unique.ders;
            let mut roots = RootCertStore::empty();
            roots.add_parsable_certificates(
                unique.iter().map(|d| CertificateDer::from(d.as_slice())),
            );
            if built_in {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            Complete {
                roots: roots.roots,
                dir_counts,
                built_in,
            }
        })
    }
}

/// Certificates in the order first seen, each once.
#[derive(Default)]
struct Unique {
    ders: Vec<Vec<u8>>,
    seen: HashSet<Vec<u8>>,
}

impl Unique {
    fn add(&mut self, der: &[u8]) {
        if self.seen.insert(der.to_vec()) {
            self.ders.push(der.to_vec());
        }
    }
}

/// Every certificate of the files of `dir`, names sorted. Links (the hash names) are followed:
/// they point at the same certificates, which the caller's deduplication drops. Anything
/// unreadable is skipped.
fn read_dir_whole(dir: &Path) -> Vec<Vec<u8>> {
    let Ok(items) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = items.filter_map(|i| i.ok().map(|i| i.path())).collect();
    names.sort();
    let mut ders = Vec::new();
    for path in names {
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            if let Ok(bytes) = read_bundle(&path) {
                ders.extend(pem::certificates(&bytes).ders);
            }
        }
    }
    ders
}

fn read_bundle(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::persist::file::read_named(path, MAX_BUNDLE_BYTES, "a certificate bundle")
}

/// The sources as they are named, their bundles read.
#[derive(Default)]
struct Loader {
    bundles: Vec<Cert>,
    dirs: Vec<(&'static str, PathBuf)>,
    /// A directory of the store lists at least one entry.
    dirs_hold_entries: bool,
    sources: Vec<Source>,
    problems: Vec<String>,
}

impl Loader {
    /// Reads a PEM bundle; returns how many certificates it held. The certificates before an
    /// error in it are kept.
    fn read(&mut self, path: &Path) -> Result<usize, String> {
        let bytes = read_bundle(path).map_err(|e| e.to_string())?;
        let read = pem::certificates(&bytes);
        let count = read.ders.len();
        self.bundles.extend(read.ders.into_iter().map(Cert::new));
        match read.error {
            Some(e) => Err(format!("not a PEM certificate bundle ({e})")),
            None => Ok(count),
        }
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
                count: Some(count),
            }),
            Err(err) => self
                .problems
                .push(format!("{what} {}: {err}", path.display())),
        }
    }

    fn dir(&mut self, what: &'static str, dir: &Path) {
        let Ok(mut items) = std::fs::read_dir(dir) else {
            if what == "SSL_CERT_DIR" {
                self.problems.push(format!(
                    "{what} {}: not a readable directory",
                    dir.display()
                ));
            }
            return;
        };
        self.dirs_hold_entries |= items.next().is_some();
        self.dirs.push((what, dir.to_owned()));
        self.sources.push(Source {
            what,
            path: dir.to_owned(),
            count: None,
        });
    }
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
        assert_eq!(trust.store.built_in, Some(false));
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
