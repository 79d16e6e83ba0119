//! `bench kv --tls`: the load generator's side of TLS (decision 155), for a server that
//! speaks only TLS (`serve --tls-cert-file`, or Redis's `tls-port`). The server's
//! certificate is checked against the authorities `--tls-ca-cert-file` names (there is no
//! system store here); `--tls-cert-file` and `--tls-key-file` present a client certificate
//! to a server that asks for one.

use std::fmt;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::CliResult;

#[derive(Args, Clone, Debug, Default)]
pub struct TlsClientArgs {
    /// Speak TLS to the server, as redis-cli --tls does. Needs --tls-ca-cert-file.
    #[arg(long, requires = "tls_ca_cert_file")]
    pub tls: bool,
    /// The authorities (PEM) whose signature the server's certificate must bear.
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub tls_ca_cert_file: Option<PathBuf>,
    /// A certificate (PEM) to present to a server that asks clients for one
    /// (`serve --tls-ca-cert-file`). Needs --tls-key-file.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "tls_key_file"])]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
}

/// What every connection's session starts from, checked once.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TlsClient({:?})", self.name)
    }
}

/// A connection whose bytes pass through a TLS session, blocking.
pub type Secure = StreamOwned<ClientConnection, TcpStream>;

impl TlsClient {
    /// The settings `args` give for the server at `server` (HOST:PORT, whose host the
    /// certificate must name); `None` without `--tls`. `prefix` is what the options' names
    /// begin with after `--` (`from-` for `kv migrate --from-tls`), for the errors.
    pub fn new(args: &TlsClientArgs, server: &str, prefix: &str) -> CliResult<Option<TlsClient>> {
        if !args.tls {
            return Ok(None);
        }
        let option = |name: &str| format!("--{prefix}{name}");
        if super::address::names_a_path(server) {
            return Err(format!(
                "{} asks for TLS, which a Unix socket ({server}) does not carry",
                option("tls")
            )
            .into());
        }
        let Some(ca) = &args.tls_ca_cert_file else {
            return Err(format!("{} needs {}", option("tls"), option("tls-ca-cert-file")).into());
        };
        let mut roots = RootCertStore::empty();
        for certificate in certificates(ca, &option("tls-ca-cert-file"))? {
            roots
                .add(certificate)
                .map_err(|e| format!("{} {}: {e}", option("tls-ca-cert-file"), ca.display()))?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        let config = match (&args.tls_cert_file, &args.tls_key_file) {
            (Some(cert), Some(key)) => {
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    format!(
                        "{} {}: {}",
                        option("tls-key-file"),
                        key.display(),
                        pem_reason(&e)
                    )
                })?;
                let chain = certificates(cert, &option("tls-cert-file"))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    let (cert, key) = (option("tls-cert-file"), option("tls-key-file"));
                    format!("{cert} and {key}: {e}")
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Some(TlsClient {
            config: Arc::new(config),
            name: server_name(server)?,
        }))
    }

    /// `socket` with a session whose handshake is done (blocking: the socket must be).
    pub fn secure(&self, socket: TcpStream) -> CliResult<Secure> {
        let session = ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(|e| format!("TLS: {e}"))?;
        let mut secure = StreamOwned::new(session, socket);
        while secure.conn.is_handshaking() {
            secure
                .conn
                .complete_io(&mut secure.sock)
                .map_err(|e| format!("TLS handshake with the server failed: {e}"))?;
        }
        Ok(secure)
    }
}

/// The certificates of `path`, which the option `option` named (the errors say which).
fn certificates(path: &Path, option: &str) -> CliResult<Vec<CertificateDer<'static>>> {
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{option} {}: {}", path.display(), pem_reason(&e)))?;
    if chain.is_empty() {
        return Err(format!("{option} {} holds no PEM certificate", path.display()).into());
    }
    Ok(chain)
}

/// What is wrong with a PEM file: the server's account of it (`tailstore_kv::server::
/// pem_reason`), but for a file with nothing in it, which here can only be a key file.
fn pem_reason(error: &pem::Error) -> String {
    match error {
        pem::Error::NoItemsFound => "holds no PEM private key".into(),
        other => tailstore_kv::server::pem_reason(other),
    }
}

/// The host of HOST:PORT (an IPv6 address in brackets too), as the certificate must name it.
fn server_name(server: &str) -> CliResult<ServerName<'static>> {
    let host = server.rsplit_once(':').map_or(server, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("'{server}': not a name TLS can check: {e}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_the_name_checked() {
        for (server, name) in [
            ("127.0.0.1:6379", "127.0.0.1"),
            ("[::1]:6379", "::1"),
            ("cache.example:6380", "cache.example"),
        ] {
            let expected = ServerName::try_from(name).expect("a name");
            assert_eq!(server_name(server).expect("a name"), expected);
        }
    }
}
