//! TLS on the coordinator's listeners, with certificates reloaded on change and, on the
//! worker-control listener, client certificates that name the worker.
//!
//! The server certificate and key (`--tls-cert`, `--tls-key`, PEM) are checked every few
//! seconds and swapped in when they change, so cert-manager's renewals need no restart; a
//! pair that does not load keeps the previous one (logged, counted). With `--client-ca`,
//! the worker-control listener requires a client certificate chaining to that CA, and a
//! worker may register only under a name its certificate carries (subject CN or a DNS SAN).
//! The CA file is reloaded the same way (a CA rotation needs no restart either): new
//! handshakes are verified against the new roots, open connections keep theirs.
//!
//! Handshakes run off the accept loop with a timeout, so a client that connects and stays
//! silent holds one task for a few seconds, not the listener.

use anyhow::{Context, Result};
use kairos_runtime::listener::{Accepted, Guarded};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

/// Where the server's certificate, key and (optionally) client CA live.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM.
    pub key: PathBuf,
    /// CA that worker client certificates must chain to (mutual TLS), PEM.
    pub client_ca: Option<PathBuf>,
}

/// Time allowed for a TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server certificate in force, reloaded when its files change.
#[derive(Debug)]
pub struct CertStore {
    files: TlsFiles,
    state: RwLock<(Stamps, Arc<CertifiedKey>)>,
    /// The client CA's verifier, swapped when `files.client_ca` changes.
    client_ca: Option<Arc<ClientRoots>>,
}

/// Verifies client certificates against the CA loaded last.
#[derive(Debug)]
struct ClientRoots {
    state: RwLock<(Contents, Arc<dyn ClientCertVerifier>)>,
}

impl ClientRoots {
    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.state.read().expect("client CA lock").1.clone()
    }
}

/// A file's bytes, when it could be read.
type Contents = Option<Vec<u8>>;

/// A file's contents: reloads are decided by what the files say, not by their size or
/// modification time (a renewal copied in with its timestamp kept must still take effect).
fn modified(p: &Path) -> Contents {
    std::fs::read(p).ok()
}

fn load_client_ca(ca: &Path) -> Result<Arc<dyn ClientCertVerifier>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in
        CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))?
    {
        roots
            .add(c.with_context(|| format!("parsing {}", ca.display()))?)
            .with_context(|| format!("adding {}", ca.display()))?;
    }
    if roots.is_empty() {
        anyhow::bail!("{} holds no CA certificate", ca.display());
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .context("client certificate verifier")
}

impl ClientCertVerifier for ClientRoots {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // Hints would borrow from a verifier that a reload may replace; they are optional
        // (a worker holds one certificate and sends it regardless).
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

type Stamps = Option<(Vec<u8>, Vec<u8>)>;

fn stamps(f: &TlsFiles) -> Stamps {
    Some((modified(&f.cert)?, modified(&f.key)?))
}

fn load_key(f: &TlsFiles) -> Result<Arc<CertifiedKey>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&f.cert)
        .with_context(|| format!("reading {}", f.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing {}", f.cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{} holds no certificate", f.cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(&f.key)
        .with_context(|| format!("reading the key {}", f.key.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    let ck = CertifiedKey::from_der(certs, key, &provider)
        .with_context(|| format!("{} does not match {}", f.key.display(), f.cert.display()))?;
    Ok(Arc::new(ck))
}

impl CertStore {
    /// Loads the pair; an error names the file.
    pub fn open(files: TlsFiles) -> Result<Arc<CertStore>> {
        let key = load_key(&files)?;
        let client_ca = match &files.client_ca {
            Some(ca) => Some(Arc::new(ClientRoots {
                state: RwLock::new((modified(ca), load_client_ca(ca)?)),
            })),
            None => None,
        };
        Ok(Arc::new(CertStore {
            state: RwLock::new((stamps(&files), key)),
            files,
            client_ca,
        }))
    }

    /// Reloads the client CA if its file changed; a file that does not load keeps the
    /// previous roots.
    pub fn reload_client_ca_if_changed(&self) -> bool {
        let (Some(path), Some(roots)) = (&self.files.client_ca, &self.client_ca) else {
            return false;
        };
        let now = modified(path);
        if now == roots.state.read().expect("client CA lock").0 {
            return false;
        }
        let loaded = load_client_ca(path);
        let mut st = roots.state.write().expect("client CA lock");
        st.0 = now;
        match loaded {
            Ok(v) => {
                st.1 = v;
                tracing::info!(ca = %path.display(), "client CA reloaded");
                true
            }
            Err(e) => {
                crate::metrics::record_tls_reload_failure();
                tracing::error!(error = %format!("{e:#}"), "client CA not reloaded; the previous one stays in force");
                false
            }
        }
    }

    /// Reloads the pair if a file changed; a pair that does not load keeps the old one.
    pub fn reload_if_changed(&self) -> bool {
        let now = stamps(&self.files);
        if now == self.state.read().expect("cert lock").0 {
            return false;
        }
        let loaded = load_key(&self.files);
        let mut st = self.state.write().expect("cert lock");
        st.0 = now;
        match loaded {
            Ok(k) => {
                st.1 = k;
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                true
            }
            Err(e) => {
                crate::metrics::record_tls_reload_failure();
                tracing::error!(error = %format!("{e:#}"), "TLS certificate not reloaded; the previous one stays in force");
                false
            }
        }
    }

    /// Checks the files every `every` until `stop` fires.
    pub async fn watch(self: Arc<Self>, every: Duration, stop: tokio::sync::watch::Receiver<bool>) {
        kairos_runtime::process::every_until(every, stop, || {
            self.reload_if_changed();
            self.reload_client_ca_if_changed();
        })
        .await
    }

    /// A rustls server configuration using this store; `client_auth` requires client
    /// certificates chaining to the configured CA.
    pub fn server_config(self: &Arc<Self>, client_auth: bool) -> Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?;
        let builder = match (&self.client_ca, client_auth) {
            (Some(roots), true) => builder.with_client_cert_verifier(roots.clone()),
            _ => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.state.read().expect("cert lock").1.clone())
    }
}

/// The TLS connections completed over `accepted` (connections already under the listener's
/// limits), for `serve_with_incoming_shutdown`. Handshakes run side by side, each within
/// `HANDSHAKE_TIMEOUT`.
pub fn incoming(
    mut accepted: Accepted,
    config: Arc<rustls::ServerConfig>,
) -> ReceiverStream<std::io::Result<TlsStream<Guarded<TcpStream>>>> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let tcp = tokio::select! {
                _ = tx.closed() => return, // The server stopped.
                c = accepted.next() => match c {
                    Some(c) => c,
                    None => return,
                },
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let peer = tcp.get_ref().peer_addr().ok();
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => {
                        crate::metrics::record_tls_handshake_failure();
                        tracing::debug!(?peer, error = %e, "TLS handshake failed");
                    }
                    Err(_) => {
                        crate::metrics::record_tls_handshake_failure();
                        tracing::debug!(?peer, "TLS handshake timed out");
                    }
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// The worker names a client certificate (DER) vouches for: its subject CN and DNS SANs.
pub fn cert_names(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push(d.to_string());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn self_signed(cn: &str, sans: &[&str]) -> (String, String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let cert = p.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }

    fn current(store: &CertStore) -> Vec<u8> {
        store.state.read().unwrap().1.cert[0].to_vec()
    }

    #[test]
    fn a_renewed_certificate_is_served_and_a_broken_one_is_not() {
        let dir = std::env::temp_dir().join(format!("kairos-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = TlsFiles {
            cert: dir.join("c.pem"),
            key: dir.join("c.key"),
            client_ca: None,
        };
        let (c1, k1, d1) = self_signed("one", &["localhost"]);
        std::fs::write(&files.cert, c1).unwrap();
        std::fs::write(&files.key, k1).unwrap();
        let store = CertStore::open(files.clone()).unwrap();
        assert_eq!(current(&store), d1);
        assert!(
            !store.reload_if_changed(),
            "unchanged files are not read again"
        );
        // Renewed: new modification times (set explicitly: writes within one clock tick
        // would not move them).
        let (c2, k2, d2) = self_signed("two", &["localhost"]);
        std::fs::write(&files.cert, c2).unwrap();
        std::fs::write(&files.key, k2).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        for f in [&files.cert, &files.key] {
            std::fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(later)
                .unwrap();
        }
        assert!(store.reload_if_changed());
        assert_eq!(current(&store), d2);
        // A half-written renewal (key of another certificate) keeps the working pair.
        let (_, k3, _) = self_signed("three", &[]);
        std::fs::write(&files.key, k3).unwrap();
        let later = later + Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&files.key)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!store.reload_if_changed());
        assert_eq!(current(&store), d2);
        assert!(
            CertStore::open(files).is_err(),
            "a mismatched pair does not start"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A CA (PEM) and a client certificate (DER) it signed.
    fn ca_and_client(cn: &str) -> (String, Vec<u8>) {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, format!("{cn} CA"));
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        (ca_pem, p.signed_by(&key, &issuer).unwrap().der().to_vec())
    }

    fn set_mtime(f: &Path, t: SystemTime) {
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn a_rotated_client_ca_verifies_new_handshakes_and_a_broken_one_is_ignored() {
        let dir = std::env::temp_dir().join(format!("kairos-tls-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k, _) = self_signed("server", &["localhost"]);
        std::fs::write(dir.join("s.pem"), c).unwrap();
        std::fs::write(dir.join("s.key"), k).unwrap();
        let files = TlsFiles {
            cert: dir.join("s.pem"),
            key: dir.join("s.key"),
            client_ca: Some(dir.join("ca.pem")),
        };
        let (ca1, w1) = ca_and_client("w1");
        let (ca2, w2) = ca_and_client("w2");
        std::fs::write(dir.join("ca.pem"), &ca1).unwrap();
        let store = CertStore::open(files).unwrap();
        // The verifier object a listener is configured with: built once, kept across
        // reloads (server_config hands this same one to rustls).
        store.server_config(true).unwrap();
        let verifier = store.client_ca.clone().unwrap();
        let accepts = |der: &[u8]| {
            verifier
                .verify_client_cert(
                    &CertificateDer::from(der.to_vec()),
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .is_ok()
        };
        assert!(accepts(&w1) && !accepts(&w2));
        assert!(!store.reload_client_ca_if_changed(), "unchanged");
        // Rotated to the second CA.
        std::fs::write(dir.join("ca.pem"), &ca2).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        set_mtime(&dir.join("ca.pem"), later);
        assert!(store.reload_client_ca_if_changed());
        assert!(!accepts(&w1) && accepts(&w2));
        // A truncated CA file keeps the roots in force.
        std::fs::write(dir.join("ca.pem"), "-----BEGIN CERTIFICATE-----\nAAAA").unwrap();
        set_mtime(&dir.join("ca.pem"), later + Duration::from_secs(5));
        assert!(!store.reload_client_ca_if_changed());
        assert!(!accepts(&w1) && accepts(&w2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_certificate_names_its_common_name_and_dns_sans() {
        let (_, _, der) = self_signed("w1", &["w1.workers.example", "127.0.0.1"]);
        let names = cert_names(&der);
        assert_eq!(
            names,
            vec!["w1".to_string(), "w1.workers.example".to_string()]
        );
        assert!(cert_names(b"not a certificate").is_empty());
    }
}
