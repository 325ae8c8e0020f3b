//! Certificates out of PEM text, and the two names of a certificate (issuer and subject) out of
//! its DER, without parsing the rest.
//!
//! Why a reader of its own: rustls-pki-types' PEM reader decodes base64 in constant time (it
//! also reads private keys), about 50 instructions a byte; the 146 roots of Debian's bundle
//! (220 KB) cost 5.7 M instructions there (22.8 M when `/etc/ssl/certs` was read too), 40 %
//! of a whole `run` with an https ping. The `base64` crate's decoder does the same work in
//! about 7 instructions a byte (1.5 M). The fast reader
//! takes only the plain shape every CA bundle has (`-----BEGIN CERTIFICATE-----`, base64
//! lines, `-----END CERTIFICATE-----`, text between sections ignored); anything else (another
//! section kind, spaces in a line, padding the strict decoder refuses, a section left open)
//! is read again by rustls-pki-types, so what is accepted and the error text stay theirs.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
const END: &str = "-----END CERTIFICATE-----";

/// The certificates of a PEM text in order, and the error that stopped the reading (the
/// certificates before it are kept, as rustls-pki-types' reader hands them out one by one).
pub(super) struct Certificates {
    pub ders: Vec<Vec<u8>>,
    pub error: Option<String>,
}

/// Reads every certificate of `text` (other PEM sections are skipped).
pub(super) fn certificates(text: &[u8]) -> Certificates {
    match fast(text) {
        Some(ders) => Certificates { ders, error: None },
        None => exact(text),
    }
}

/// The plain shape only; `None` for anything else. Markers and line ends are found with
/// `str::find` and `split` (memchr), not byte by byte: 4 instructions a byte of a bundle less
/// (callgrind: 3.96 M to 3.08 M for Debian's bundle, of which 1.51 M is the base64 decoder).
fn fast(text: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut rest = std::str::from_utf8(text).ok()?;
    let mut ders = Vec::new();
    let mut base64 = Vec::with_capacity(2048);
    let line_end = |s: &str| s.is_empty() || s.starts_with(['\n', '\r']);
    // Text outside sections is skipped, as rustls-pki-types skips it; any `-----BEGIN ` must
    // start a line and begin a certificate.
    while let Some(at) = rest.find("-----BEGIN ") {
        if at > 0 && !rest[..at].ends_with(['\n', '\r']) {
            return None;
        }
        let after = rest[at..].strip_prefix(BEGIN)?;
        let end = after.find("-----END ")?;
        let (body, tail) = after.split_at(end);
        let tail = tail.strip_prefix(END)?;
        if !line_end(after) || !body.ends_with(['\n', '\r']) || !line_end(tail) {
            return None;
        }
        // Lines end at `\n`; a `\r` before it is dropped, any other reaches the decoder,
        // which refuses it (then rustls-pki-types reads the text).
        base64.clear();
        for line in body.split('\n') {
            base64.extend_from_slice(line.strip_suffix('\r').unwrap_or(line).as_bytes());
        }
        ders.push(STANDARD.decode(&base64).ok()?);
        rest = tail;
    }
    Some(ders)
}

/// rustls-pki-types' reader: every shape it accepts, its error text.
fn exact(text: &[u8]) -> Certificates {
    let mut ders = Vec::new();
    for cert in CertificateDer::pem_slice_iter(text) {
        match cert {
            Ok(cert) => ders.push(cert.as_ref().to_vec()),
            Err(err) => {
                return Certificates {
                    ders,
                    error: Some(err.to_string()),
                }
            }
        }
    }
    Certificates { ders, error: None }
}

/// The issuer and subject of a certificate: the contents of each `Name` (without the
/// `SEQUENCE` header), the form webpki compares a certificate's issuer with a trust anchor's
/// subject in, byte for byte.
pub(super) struct Names<'a> {
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
}

/// The names of the certificate `der`, or `None` when it is not shaped as a certificate.
pub(super) fn names(der: &[u8]) -> Option<Names<'_>> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, certificate, _) = tlv(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = tlv(certificate)? else {
        return None;
    };
    let (mut tag, _, mut rest) = tlv(tbs)?;
    if tag == 0xA0 {
        // [0] version, then the serial number.
        (tag, _, rest) = tlv(rest)?;
    }
    if tag != 0x02 {
        return None;
    }
    let (SEQUENCE, _signature, rest) = tlv(rest)? else {
        return None;
    };
    let (SEQUENCE, issuer, rest) = tlv(rest)? else {
        return None;
    };
    let (SEQUENCE, _validity, rest) = tlv(rest)? else {
        return None;
    };
    let (SEQUENCE, subject, _) = tlv(rest)? else {
        return None;
    };
    Some(Names { issuer, subject })
}

/// One DER element at the start of `input`: its tag, its contents and what follows it
/// (single-byte tags and definite lengths of up to four bytes, all a certificate uses).
pub(super) fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b))
    };
    (rest.len() >= len).then(|| {
        let (contents, after) = rest.split_at(len);
        (tag, contents, after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> Vec<u8> {
        let path = format!("{}/tests/data/tls/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(path).expect("test data")
    }

    #[test]
    fn the_fast_reader_gives_what_rustls_pki_types_gives() {
        let mut text = data("ca.pem");
        text.extend(b"some text between\r\n");
        text.extend(data("server.pem"));
        let fast_read = fast(&text).expect("the plain shape");
        assert_eq!(fast_read.len(), 2);
        assert_eq!(fast_read, exact(&text).ders);
        let crlf = String::from_utf8(text)
            .expect("ascii")
            .replace('\n', "\r\n");
        let fast_read = fast(crlf.as_bytes()).expect("CRLF lines");
        assert_eq!(fast_read, exact(crlf.as_bytes()).ders);
    }

    #[test]
    fn other_shapes_are_left_to_rustls_pki_types_with_its_error() {
        let key = data("server.key");
        let mut mixed = data("ca.pem");
        mixed.extend(&key);
        assert!(fast(&mixed).is_none(), "a key section");
        assert_eq!(certificates(&mixed).ders.len(), 1);
        let open = b"-----BEGIN CERTIFICATE-----\nMIIB\n";
        assert!(fast(open).is_none());
        let read = certificates(open);
        assert!(read.error.is_some(), "a section left open");
        let bad = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let read = certificates(bad);
        assert!(read.ders.is_empty());
        assert!(read.error.is_some());
    }

    #[test]
    fn names_are_read_as_webpki_compares_them() {
        let ca = certificates(&data("ca.pem")).ders.remove(0);
        let server = certificates(&data("server.pem")).ders.remove(0);
        let ca = names(&ca).expect("ca names");
        let server = names(&server).expect("server names");
        assert_eq!(ca.issuer, ca.subject, "self-signed");
        assert_eq!(server.issuer, ca.subject);
        assert_ne!(server.subject, ca.subject);
    }
}
