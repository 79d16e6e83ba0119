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

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
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
    #[error("{path} is not a valid PEM file: {reason}")]
    BadPem { path: PathBuf, reason: String },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path}: its first certificate is not a valid X.509 certificate ({reason})")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("{path} holds no PEM private key")]
    NoKey { path: PathBuf },
    #[error(
        "{path} holds an encrypted private key (ENCRYPTED PRIVATE KEY); tailstore needs it \
         unencrypted (openssl pkey -in KEY -out UNENCRYPTED-KEY writes one)"
    )]
    EncryptedKey { path: PathBuf },
    #[error("{path}: its private key cannot be used: {reason}")]
    BadKey { path: PathBuf, reason: String },
    #[error("the certificates of {path} cannot verify clients: {reason}")]
    ClientAuthorities { path: PathBuf, reason: String },
    #[error("the certificate of {cert} and the key of {key} do not make a TLS server: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("no TLS server can be made: {0}")]
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
        // The provider named, not the process default (which panics if a dependency
        // enables a second one).
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        // Each file checked on its own first: rustls's own errors name neither file, and
        // call a bad certificate of ours a "peer certificate".
        let chain = server_chain(&files.cert)?;
        let key = private_key(&files.key, &provider)?;
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
            .map_err(|e| TlsError::Mismatch {
                cert: files.cert.clone(),
                key: files.key.clone(),
                reason: rustls_reason(e),
            })?;
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

/// The server's certificate chain, its own certificate checked as rustls will parse it.
fn server_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = certificates(path)?;
    if let Some(own) = chain.first() {
        ParsedCertificate::try_from(own).map_err(|e| TlsError::BadCertificate {
            path: path.to_path_buf(),
            reason: rustls_reason(e),
        })?;
    }
    Ok(chain)
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

/// The private key of `path`, checked as `provider` will load it.
fn private_key(path: &Path, provider: &CryptoProvider) -> Result<PrivateKeyDer<'static>, TlsError> {
    let key = PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        // PEM sections of other kinds are skipped, an encrypted key's among them.
        pem::Error::NoItemsFound if holds_encrypted_key(path) => TlsError::EncryptedKey {
            path: path.to_path_buf(),
        },
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_path_buf(),
        },
        other => pem_error(path, other),
    })?;
    provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| TlsError::BadKey {
            path: path.to_path_buf(),
            reason: rustls_reason(e),
        })?;
    Ok(key)
}

/// A rustls error in words for the files' owner: without the prefixes written for a
/// session's peer ("invalid peer certificate", "unexpected error").
fn rustls_reason(error: rustls::Error) -> String {
    match error {
        rustls::Error::InvalidCertificate(reason) => reason.to_string(),
        rustls::Error::General(reason) => reason,
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the private key is not the certificate's".into()
        }
        other => other.to_string(),
    }
}

fn holds_encrypted_key(path: &Path) -> bool {
    const BEGIN: &[u8] = b"-----BEGIN ENCRYPTED PRIVATE KEY-----";
    std::fs::read(path).is_ok_and(|text| text.windows(BEGIN.len()).any(|w| w == BEGIN))
}

fn pem_error(path: &Path, error: pem::Error) -> TlsError {
    let path = path.to_path_buf();
    match error {
        pem::Error::Io(err) => TlsError::Unreadable {
            path,
            reason: err.to_string(),
        },
        other => TlsError::BadPem {
            path,
            reason: pem_reason(&other),
        },
    }
}

/// What is wrong with a PEM file, its section names as text (the PEM crate shows them as
/// lists of byte values). Also `bench kv --tls`'s (`tailstore` cli).
pub fn pem_reason(error: &pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "its {} section has no end line (-----END {0}-----): is the file cut short?",
            String::from_utf8_lossy(end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => {
            format!("a bad section start: {}", String::from_utf8_lossy(line))
        }
        other => other.to_string(),
    }
}

fn client_authorities(path: &Path, reason: impl fmt::Display) -> TlsError {
    TlsError::ClientAuthorities {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
