//! The server-certificate check of every TLS connection: webpki's (the same functions rustls'
//! own `WebPkiServerVerifier` calls, without revocation lists, as reqwest set it up), given
//! only the trust anchors that can matter for the chain presented.
//!
//! webpki takes a trust anchor only when its subject equals, byte for byte, the issuer of a
//! certificate of the chain (the server's or an intermediate's), so the anchors looked up by
//! those issuers ([`super::Store::anchors_for`]) verify what the whole store would. When that
//! smaller set fails, the chain is verified again against the whole store, read in full once
//! ([`super::Store::complete`]): an anchor the lookup cannot see (a certificate in a
//! directory under a name that is not its hash) then still counts, and a refusal is the
//! whole store's, with the same error.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, TrustAnchor, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

use super::Store;

/// Verifies a server's chain against a [`Store`] plus `extra` anchors (a cluster's own
/// `ca_file`).
#[derive(Debug)]
pub(super) struct Verifier {
    pub store: Arc<Store>,
    pub extra: Vec<TrustAnchor<'static>>,
    pub provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        let algorithms = self.provider.signature_verification_algorithms.all;
        let chain = std::iter::once(end_entity).chain(intermediates);
        let mut roots = self.store.anchors_for(chain);
        roots.roots.extend(self.extra.iter().cloned());
        let verified = verify_server_cert_signed_by_trust_anchor(
            &cert,
            &roots,
            intermediates,
            now,
            algorithms,
        )
        .or_else(|_| {
            let complete = self.store.complete();
            let mut all = RootCertStore {
                roots: Vec::with_capacity(complete.roots.len() + self.extra.len()),
            };
            all.roots.extend(complete.roots.iter().cloned());
            all.roots.extend(self.extra.iter().cloned());
            verify_server_cert_signed_by_trust_anchor(&cert, &all, intermediates, now, algorithms)
        });
        verified?;
        verify_server_name(&cert, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
