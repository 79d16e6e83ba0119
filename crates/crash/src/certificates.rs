//! Certificates for the TLS tests (decision 155), made at the test's start: an authority,
//! a server certificate for 127.0.0.1 and a client certificate it signed, as PEM files in
//! a temporary directory (`ca.crt`, `server.crt`, `server.key`, `client.crt`,
//! `client.key`), as `serve --tls-*` and `bench kv --tls*` read them.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use tempfile::TempDir;

pub struct Certificates {
    dir: TempDir,
    ca: rcgen::Certificate,
    client: (rcgen::Certificate, KeyPair),
}

impl Certificates {
    pub fn new() -> Certificates {
        let dir = tempfile::tempdir().expect("temporary directory");
        let ca_key = KeyPair::generate().expect("a key");
        let mut ca_params = params(&[], "tailstore test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params
            .self_signed(&ca_key)
            .expect("the CA's certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate().expect("a key");
        let server = params(&["127.0.0.1"], "127.0.0.1")
            .signed_by(&server_key, &issuer)
            .expect("the server's certificate");
        let client_key = KeyPair::generate().expect("a key");
        let mut client_params = params(&[], "a client");
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params
            .signed_by(&client_key, &issuer)
            .expect("the client's certificate");
        let write = |name: &str, pem: String| {
            std::fs::write(dir.path().join(name), pem).expect("write a PEM file");
        };
        write("ca.crt", ca.pem());
        write("server.crt", server.pem());
        write("server.key", server_key.serialize_pem());
        write("client.crt", client.pem());
        write("client.key", client_key.serialize_pem());
        Certificates {
            dir,
            ca,
            client: (client, client_key),
        }
    }

    /// The file `name` (one of the five above).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The authority's certificate (DER).
    pub fn ca_der(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }

    /// The client's certificate (DER) and its private key (PKCS#8 DER).
    pub fn client_der(&self) -> (Vec<u8>, Vec<u8>) {
        let (cert, key) = &self.client;
        (cert.der().to_vec(), key.serialize_der())
    }
}

impl Default for Certificates {
    fn default() -> Self {
        Certificates::new()
    }
}

/// Certificate parameters for `names`, with a subject of its own: OpenSSL takes a
/// certificate whose subject is its issuer's for a self-signed one, and refuses it.
fn params(names: &[&str], common_name: &str) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params
}
