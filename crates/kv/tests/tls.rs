//! TLS on the server's connections (`server/tls.rs`): pipelined commands and values many
//! records long, a plaintext client refused without harm to the others, client
//! certificates when asked for, and `redis-cli --tls` against it.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use support::{Options, TestServer};
use tailstore_crash::certificates::Certificates;
use tailstore_kv::server::{Tls, TlsFiles};

/// The server's settings, loaded from the files as `serve` loads them.
fn server_tls(certificates: &Certificates, ask_clients: bool) -> Tls {
    Tls::load(&TlsFiles {
        cert: certificates.path("server.crt"),
        key: certificates.path("server.key"),
        client_ca: ask_clients.then(|| certificates.path("ca.crt")),
    })
    .expect("the TLS settings")
}

/// A client that trusts the authority, presenting the client certificate if `certified`.
fn client_config(certificates: &Certificates, certified: bool) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(certificates.ca_der()))
        .expect("the CA");
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = if certified {
        let (cert, key) = certificates.client_der();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key));
        builder
            .with_client_auth_cert(vec![CertificateDer::from(cert)], key)
            .expect("the client's certificate")
    } else {
        builder.with_no_client_auth()
    };
    Arc::new(config)
}

fn tls_server(certificates: &Certificates, ask_clients: bool) -> TestServer {
    TestServer::with(Options {
        tls: Some(server_tls(certificates, ask_clients)),
        ..Options::default()
    })
}

type Secure = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection to the test server's `port` on loopback.
fn connect(port: u16, config: Arc<ClientConfig>) -> Secure {
    let name = ServerName::try_from("127.0.0.1").expect("a name");
    let session = ClientConnection::new(config, name).expect("a client session");
    let socket = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    StreamOwned::new(session, socket)
}

/// Reads exactly `expected.len()` bytes, which must be `expected`.
#[track_caller]
fn expect(stream: &mut Secure, expected: &[u8]) {
    let mut got = vec![0; expected.len()];
    stream.read_exact(&mut got).expect("the reply");
    assert!(
        got == expected,
        "got {:?}…",
        String::from_utf8_lossy(&got[..got.len().min(200)])
    );
}

#[test]
fn pipelined_commands_and_long_values_pass_through_tls() {
    let certificates = Certificates::new();
    let server = tls_server(&certificates, false);
    let mut stream = connect(server.port(), client_config(&certificates, false));
    stream.write_all(b"PING\r\n").expect("write");
    expect(&mut stream, b"+PONG\r\n");

    // A thousand commands in one write, answered in order.
    let mut pipeline = Vec::new();
    let mut replies = Vec::new();
    for n in 0..500 {
        let value = format!("value-{n}");
        pipeline.extend(format!("SET key:{n} {value}\r\nGET key:{n}\r\n").bytes());
        replies.extend(format!("+OK\r\n${}\r\n{value}\r\n", value.len()).bytes());
    }
    stream.write_all(&pipeline).expect("write");
    expect(&mut stream, &replies);

    // 3 MiB each way: hundreds of TLS records, and writes the socket takes in parts.
    let long: Vec<u8> = (0..3u32 << 20).map(|i| b'a' + (i % 26) as u8).collect();
    let mut set = format!("*3\r\n$3\r\nSET\r\n$4\r\nlong\r\n${}\r\n", long.len()).into_bytes();
    set.extend(&long);
    set.extend(b"\r\nGET long\r\n");
    stream.write_all(&set).expect("write");
    let mut reply = format!("+OK\r\n${}\r\n", long.len()).into_bytes();
    reply.extend(&long);
    reply.extend(b"\r\n");
    expect(&mut stream, &reply);

    // QUIT: the reply, then the server's close_notify (a clean end, not a cut).
    stream.write_all(b"QUIT\r\n").expect("write");
    expect(&mut stream, b"+OK\r\n");
    let mut rest = Vec::new();
    stream
        .read_to_end(&mut rest)
        .expect("a clean end of the session");
    assert!(rest.is_empty());
}

#[test]
fn a_plaintext_client_is_closed_and_the_others_go_on() {
    let certificates = Certificates::new();
    let server = tls_server(&certificates, false);
    let mut secure = connect(server.port(), client_config(&certificates, false));
    secure.write_all(b"SET k v\r\n").expect("write");
    expect(&mut secure, b"+OK\r\n");

    let mut plain = server.raw();
    plain.write_all(b"GET k\r\n").expect("write");
    expect_closed_without_reply(&mut plain);

    secure.write_all(b"GET k\r\n").expect("write");
    expect(&mut secure, b"$1\r\nv\r\n");
    // No plain port, as Redis says of `port 0`.
    secure.write_all(b"CONFIG GET port\r\n").expect("write");
    expect(&mut secure, b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n");
}

/// Reads until the server closes the connection, which must bring no reply in clear.
#[track_caller]
fn expect_closed_without_reply(plain: &mut TcpStream) {
    let mut answer = Vec::new();
    // The server's alert, at most, then the end: never a reply in clear.
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.windows(2).any(|w| w == b"\r\n"),
        "a plaintext reply: {answer:?}"
    );
}

#[test]
fn plain_tcp_and_tls_are_served_side_by_side() {
    let certificates = Certificates::new();
    let server = TestServer::with(Options {
        tls: Some(server_tls(&certificates, false)),
        tls_beside_plain: true,
        ..Options::default()
    });
    assert_ne!(server.port(), server.tls_port());
    let mut secure = connect(server.tls_port(), client_config(&certificates, false));
    secure.write_all(b"SET k v\r\n").expect("write");
    expect(&mut secure, b"+OK\r\n");

    // Both ways to the same keys; each listener keeps to its own protocol.
    let mut plain = server.client();
    let value: String = redis::cmd("GET").arg("k").query(&mut plain).expect("GET");
    assert_eq!(value, "v");
    let mut plain_at_tls = TcpStream::connect(("127.0.0.1", server.tls_port())).expect("connect");
    plain_at_tls.write_all(b"GET k\r\n").expect("write");
    expect_closed_without_reply(&mut plain_at_tls);

    // Redis's settings for the two ports, and INFO's plain one.
    let ports: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("*port")
        .query(&mut plain)
        .expect("CONFIG GET");
    let mut ports: Vec<(String, String)> = ports
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    ports.sort();
    let expected = [
        ("port".to_string(), server.port().to_string()),
        ("tls-port".to_string(), server.tls_port().to_string()),
    ];
    assert_eq!(ports, expected);
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut plain)
        .expect("INFO");
    assert!(
        info.contains(&format!("tcp_port:{}\r\n", server.port())),
        "{info}"
    );
}

#[test]
fn client_certificates_are_required_when_asked_for() {
    let certificates = Certificates::new();
    let server = tls_server(&certificates, true);
    let mut stranger = connect(server.port(), client_config(&certificates, false));
    let refused = stranger
        .write_all(b"PING\r\n")
        .and_then(|()| stranger.read_exact(&mut [0; 7]));
    assert!(
        refused.is_err(),
        "a client without a certificate was served"
    );

    let mut known = connect(server.port(), client_config(&certificates, true));
    known.write_all(b"PING\r\n").expect("write");
    expect(&mut known, b"+PONG\r\n");
}

#[test]
fn bad_tls_files_are_refused_with_the_file_named() {
    let certificates = Certificates::new();
    let files = |cert: &str, key: &str| TlsFiles {
        cert: certificates.path(cert),
        key: certificates.path(key),
        client_ca: None,
    };
    let error = |files: TlsFiles| match Tls::load(&files) {
        Ok(_) => panic!("{files:?} loaded"),
        Err(error) => error.to_string(),
    };
    let missing = error(files("missing.crt", "server.key"));
    assert!(
        missing.contains("missing.crt") && missing.contains("cannot read"),
        "{missing}"
    );
    let no_cert = error(files("server.key", "server.key"));
    assert!(no_cert.contains("holds no PEM certificate"), "{no_cert}");
    let no_key = error(files("server.crt", "server.crt"));
    assert!(no_key.contains("holds no PEM private key"), "{no_key}");
    let mismatch = error(files("server.crt", "client.key"));
    assert!(mismatch.contains("do not make a TLS server"), "{mismatch}");
}

#[test]
fn redis_cli_speaks_to_it_over_tls() {
    let Ok(version) = std::process::Command::new("redis-cli")
        .arg("--version")
        .output()
    else {
        println!("redis-cli not found: skipping");
        return;
    };
    assert!(version.status.success());
    let certificates = Certificates::new();
    let server = tls_server(&certificates, true);
    let cli = |args: &[&str]| {
        let ca = certificates.path("ca.crt");
        let cert = certificates.path("client.crt");
        let key = certificates.path("client.key");
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &server.port().to_string(), "--tls"])
            .args([
                "--cacert",
                path(&ca),
                "--cert",
                path(&cert),
                "--key",
                path(&key),
            ])
            .args(args)
            .output()
            .expect("run redis-cli");
        let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success() && !said.is_empty(),
            "redis-cli {args:?}: {said} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        said
    };
    assert_eq!(cli(&["SET", "greeting", "hello over TLS"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello over TLS");
    assert_eq!(cli(&["DBSIZE"]), "1");
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
