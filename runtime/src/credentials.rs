//! How a client (a worker, `kairosctl`) proves who it is to the coordinator, and how it
//! reaches it.
//!
//! * An `https://` coordinator URL always means TLS: the server is verified against
//!   `--tls-ca` (PEM) when given, else against the system's roots. A client certificate
//!   (`--tls-cert`, `--tls-key`) is presented when given (mutual TLS). TLS options with an
//!   `http://` URL are refused rather than ignored, so plaintext is never chosen by accident.
//! * A bearer token (`--token-file`) is sent on every call. The file is read again at each
//!   session start, so a rotated token takes effect on the next reconnect (a coordinator
//!   that stops accepting the old one ends the session).

use std::path::PathBuf;
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// What the worker presents to the coordinator.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// File holding the bearer token (surrounding whitespace ignored).
    pub token_file: Option<PathBuf>,
    /// CA certificate(s), PEM, that the coordinator's certificate must chain to.
    pub tls_ca: Option<PathBuf>,
    /// Client certificate chain and key, PEM, for mutual TLS.
    pub tls_cert: Option<PathBuf>,
    /// Key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
}

impl Credentials {
    /// The endpoint for `url` with these TLS settings.
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, String> {
        let endpoint = Endpoint::from_shared(url.to_string()).map_err(|e| e.to_string())?;
        let https = url.starts_with("https://");
        let tls_given = self.tls_ca.is_some() || self.tls_cert.is_some() || self.tls_key.is_some();
        if !https {
            if tls_given {
                return Err("TLS options were given but the URL is not https://".into());
            }
            return Ok(endpoint);
        }
        let read =
            |p: &PathBuf| std::fs::read(p).map_err(|e| format!("reading {}: {e}", p.display()));
        let mut tls = ClientTlsConfig::new();
        tls = match &self.tls_ca {
            Some(ca) => tls.ca_certificate(Certificate::from_pem(read(ca)?)),
            None => tls.with_native_roots(),
        };
        match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => tls = tls.identity(Identity::from_pem(read(c)?, read(k)?)),
            (None, None) => {}
            _ => return Err("--tls-cert and --tls-key go together".into()),
        }
        endpoint
            .tls_config(tls)
            .map_err(|e| format!("TLS settings: {e}"))
            .map(|e| e.connect_timeout(Duration::from_secs(5)))
    }

    /// The `authorization` header value, read from the token file now.
    pub fn bearer(&self) -> Result<Option<MetadataValue<Ascii>>, String> {
        let Some(path) = &self.token_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the token file {}: {e}", path.display()))?;
        let token = text.trim();
        if token.is_empty() || token.contains(char::is_whitespace) {
            return Err(format!(
                "the token file {} must hold one token",
                path.display()
            ));
        }
        format!("Bearer {token}")
            .parse()
            .map(Some)
            .map_err(|_| format!("the token in {} is not valid header text", path.display()))
    }
}

/// Adds the bearer token to every call.
#[derive(Clone, Debug, Default)]
pub struct Bearer(pub Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_with_plain_http_are_refused() {
        let c = Credentials {
            tls_ca: Some("/nonexistent/ca.pem".into()),
            ..Credentials::default()
        };
        assert!(c
            .endpoint("http://127.0.0.1:7700")
            .unwrap_err()
            .contains("https"));
        let c = Credentials {
            tls_cert: Some("/x".into()),
            ..Credentials::default()
        };
        assert!(c
            .endpoint("https://127.0.0.1:7700")
            .unwrap_err()
            .contains("together"));
        assert!(Credentials::default()
            .endpoint("http://127.0.0.1:7700")
            .is_ok());
        // https with no CA file uses the system roots: TLS, not plaintext.
        assert!(Credentials::default()
            .endpoint("https://127.0.0.1:7700")
            .is_ok());
    }

    #[test]
    fn the_token_file_holds_one_token() {
        let dir = std::env::temp_dir().join(format!("kairos-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t");
        let c = Credentials {
            token_file: Some(p.clone()),
            ..Credentials::default()
        };
        std::fs::write(&p, "  abcdefghijklmnopqrstuvwxyz\n").unwrap();
        assert_eq!(
            c.bearer().unwrap().unwrap().to_str().unwrap(),
            "Bearer abcdefghijklmnopqrstuvwxyz"
        );
        std::fs::write(&p, "two tokens\n").unwrap();
        assert!(c.bearer().is_err());
        std::fs::write(&p, "\n").unwrap();
        assert!(c.bearer().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            c.bearer().is_err(),
            "a missing file is an error, not no token"
        );
        assert_eq!(Credentials::default().bearer().unwrap(), None);
    }
}
