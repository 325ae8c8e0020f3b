//! OpenSSL's hashed certificate directories (`c_rehash`, `openssl rehash`, Debian's
//! `update-ca-certificates`): a CA certificate whose subject is `NAME` is found at
//! `DIR/HHHHHHHH.0`, `.1`, ... where `HHHHHHHH` is [`subject_hash`] of `NAME`; the first
//! missing number ends the list. So the issuer of a server's certificate is found with one or
//! two file reads instead of reading all of `/etc/ssl/certs` (292 entries on Debian).
//!
//! The hash is OpenSSL's `X509_NAME_hash`: the SHA-1 of the name's canonical encoding, its
//! first four bytes read little-endian. The canonical encoding is each RDN's `SET` (its
//! attributes sorted by their encoding, as DER orders a `SET OF`) one after the other without
//! the outer `SEQUENCE`, each text value turned into a `UTF8String`, lower-cased (ASCII),
//! trimmed and with runs of white space made one space (OpenSSL's `x509_name_canon`).

use std::path::{Path, PathBuf};

use super::pem::tlv;

/// `SET`, `SEQUENCE` and `UTF8String` tags.
const SET: u8 = 0x31;
const SEQUENCE: u8 = 0x30;
const UTF8_STRING: u8 = 0x0c;

/// The name of `DIR/HHHHHHHH.N`.
pub(super) fn path(dir: &Path, hash: u32, n: u32) -> PathBuf {
    dir.join(format!("{hash:08x}.{n}"))
}

/// OpenSSL's subject hash of a name given as the contents of its `SEQUENCE`, or `None` when
/// the name cannot be read (OpenSSL cannot hash it either).
pub(super) fn subject_hash(name: &[u8]) -> Option<u32> {
    let canonical = canonical(name)?;
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &canonical);
    let d = digest.as_ref();
    Some(u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
}

fn canonical(mut name: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(name.len());
    while !name.is_empty() {
        let (tag, mut rdn, rest) = tlv(name)?;
        name = rest;
        if tag != SET {
            return None;
        }
        let mut attributes = Vec::new();
        while !rdn.is_empty() {
            let (tag, attribute, rest) = tlv(rdn)?;
            rdn = rest;
            if tag != SEQUENCE {
                return None;
            }
            let (0x06, _, value) = tlv(attribute)? else {
                return None;
            };
            let oid = &attribute[..attribute.len() - value.len()];
            let (tag, text, _) = tlv(value)?;
            let mut contents = oid.to_vec();
            match canonical_text(tag, text)? {
                Some(text) => push_tlv(&mut contents, UTF8_STRING, &text),
                None => contents.extend_from_slice(value),
            }
            let mut encoded = Vec::with_capacity(contents.len() + 4);
            push_tlv(&mut encoded, SEQUENCE, &contents);
            attributes.push(encoded);
        }
        if attributes.is_empty() {
            continue;
        }
        attributes.sort();
        push_tlv(&mut out, SET, &attributes.concat());
    }
    Some(out)
}

/// A text value in canonical form: `Some(None)` for a type OpenSSL keeps as it is, `None` when
/// the text cannot be converted.
fn canonical_text(tag: u8, text: &[u8]) -> Option<Option<Vec<u8>>> {
    let utf8: String = match tag {
        // UTF8String
        0x0c => std::str::from_utf8(text).ok()?.to_owned(),
        // PrintableString, T61String, IA5String, VisibleString: one byte a character.
        0x13 | 0x14 | 0x16 | 0x1a => text.iter().map(|b| char::from(*b)).collect(),
        // BMPString (UCS-2) and UniversalString (UCS-4), big-endian.
        0x1e => units(text, 2)?,
        0x1c => units(text, 4)?,
        _ => return Some(None),
    };
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut out = Vec::with_capacity(utf8.len());
    let mut in_space = false;
    for b in utf8.as_bytes().iter() {
        if space(b) {
            in_space = true;
            continue;
        }
        if in_space && !out.is_empty() {
            out.push(b' ');
        }
        in_space = false;
        out.push(b.to_ascii_lowercase());
    }
    Some(Some(out))
}

fn units(text: &[u8], size: usize) -> Option<String> {
    if text.len() % size != 0 {
        return None;
    }
    text.chunks(size)
        .map(|c| char::from_u32(c.iter().fold(0u32, |n, b| (n << 8) | u32::from(*b))))
        .collect()
}

fn push_tlv(out: &mut Vec<u8>, tag: u8, contents: &[u8]) {
    out.push(tag);
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(contents);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every certificate of the system's hashed directory is named by the hash computed here,
    /// as `openssl x509 -subject_hash` computes it.
    #[test]
    fn the_hash_is_openssls_for_every_certificate_of_the_system_directory() {
        let dir = Path::new("/etc/ssl/certs");
        let Ok(items) = std::fs::read_dir(dir) else {
            panic!("no /etc/ssl/certs: install ca-certificates (scripts/test-tools.sh)");
        };
        let mut checked = 0;
        for item in items {
            let path = item.expect("entry").path();
            if path.extension().is_none_or(|e| e != "pem") {
                continue;
            }
            let text = std::fs::read(&path).expect("read");
            let read = super::super::pem::certificates(&text);
            let [der] = read.ders.as_slice() else {
                continue;
            };
            let names = super::super::pem::names(der).expect("names");
            let ours = subject_hash(names.subject).expect("hash");
            let openssl = std::process::Command::new("openssl")
                .args(["x509", "-noout", "-subject_hash", "-in"])
                .arg(&path)
                .output()
                .expect("openssl (scripts/test-tools.sh installs it)");
            let theirs = String::from_utf8_lossy(&openssl.stdout).trim().to_owned();
            assert_eq!(format!("{ours:08x}"), theirs, "{}", path.display());
            checked += 1;
        }
        assert!(
            checked > 50,
            "only {checked} certificates in /etc/ssl/certs"
        );
    }

    #[test]
    fn text_is_lowered_trimmed_and_its_spaces_collapsed() {
        let text = canonical_text(0x13, b"  Foo \t  BAR  ").expect("text");
        assert_eq!(text.as_deref(), Some(&b"foo bar"[..]));
        assert_eq!(canonical_text(0x02, b"\x01").expect("kept"), None);
        let bmp = canonical_text(0x1e, &[0, b'A', 0, 0xe9]).expect("bmp");
        assert_eq!(bmp.as_deref(), Some("aé".as_bytes()));
    }
}
