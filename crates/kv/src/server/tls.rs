//! TLS on the server's connections (decision 155): `serve --tls-cert-file --tls-key-file`
//! makes the listening address speak TLS only, as Redis's `tls-port` with `port 0` does;
//! `--tls-ca-cert-file` also asks every client for a certificate signed by that authority
//! (Redis's `tls-auth-clients yes`).
//!
//! A TLS connection is a TCP connection whose bytes pass through a `rustls` session: reads
//! decrypt into the connection's input, which the parser reads as before; replies are
//! encrypted only when the pass writes them out, after its durability wait, so nothing a
//! reply says leaves before it is durable (the handshake's own messages go whenever the
//! session has them). See `Connection::fill` and `Connection::flush`.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ConnectionCommon, RootCertStore, ServerConfig, ServerConnection};

/// The files `serve`'s TLS options name.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The server's certificate chain (PEM), its own certificate first.
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Authorities whose certificates clients must present (PEM); `None`: no client
    /// certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS settings cannot be used: each names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} holds no PEM private key")]
    NoKey { path: PathBuf },
    #[error("the certificates of {path} cannot verify clients: {reason}")]
    ClientAuthorities { path: PathBuf, reason: String },
    #[error("the certificate and key do not make a TLS server: {0}")]
    Rejected(rustls::Error),
}

/// The settings every connection's session starts from, checked once at start.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ServerConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Reads and checks `files`.
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        let chain = certificates(&files.cert)?;
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| pem_error(&files.key, e))?;
        // The provider named, not the process default (which panics if a dependency
        // enables a second one).
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rejected)?;
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for certificate in certificates(path)? {
                    roots
                        .add(certificate)
                        .map_err(|e| client_authorities(path, e))?;
                }
                let provider = builder.crypto_provider().clone();
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| client_authorities(path, e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(TlsError::Rejected)?;
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// A session for a connection just accepted.
    pub fn session(&self) -> io::Result<ServerConnection> {
        ServerConnection::new(self.config.clone()).map_err(io::Error::other)
    }
}

/// Reads what the socket has into `tls` and decrypts it: the bytes read (0: the peer
/// closed the socket; `WouldBlock` when it has nothing). A record that does not decrypt,
/// or a failed handshake, is an error, after the session's alert is written if the socket
/// takes it. Either side's session (the server's, `bench kv`'s).
pub fn receive_records<D>(
    tls: &mut ConnectionCommon<D>,
    socket: &mut (impl Read + Write),
) -> io::Result<usize> {
    let n = tls.read_tls(socket)?;
    if n > 0 {
        if let Err(refused) = tls.process_new_packets() {
            let _ = tls.write_tls(socket);
            return Err(io::Error::new(io::ErrorKind::InvalidData, refused));
        }
    }
    Ok(n)
}

/// Writes `tls`'s records while the socket takes them: whether every one was written.
pub fn send_records<D>(tls: &mut ConnectionCommon<D>, socket: &mut impl Write) -> io::Result<bool> {
    while tls.wants_write() {
        match tls.write_tls(socket) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(true)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(chain)
}

fn pem_error(path: &Path, error: rustls::pki_types::pem::Error) -> TlsError {
    match error {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_path_buf(),
        },
        other => TlsError::Unreadable {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    }
}

fn client_authorities(path: &Path, reason: impl fmt::Display) -> TlsError {
    TlsError::ClientAuthorities {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
