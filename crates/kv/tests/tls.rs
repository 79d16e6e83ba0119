//! TLS on the server's connections (`server/tls.rs`): pipelined commands and values many
//! records long, a plaintext client refused without harm to the others, client
//! certificates when asked for, replies that go on once the socket takes them again
//! without the client speaking, a reply buffer that stays bounded under a deep pipeline,
//! damaged certificate and key files named with their fault, and `redis-cli --tls`.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
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
    let socket = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    secure(socket, config)
}

fn secure(socket: TcpStream, config: Arc<ClientConfig>) -> Secure {
    let name = ServerName::try_from("127.0.0.1").expect("a name");
    let session = ClientConnection::new(config, name).expect("a client session");
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    StreamOwned::new(session, socket)
}

/// A TCP connection to `port` on loopback whose receive buffer is `bytes` (set before the
/// connect, so that the window it offers is that small).
fn connect_with_receive_buffer(port: u16, bytes: usize) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let socket =
        rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).expect("socket");
    sockopt::set_socket_recv_buffer_size(&socket, bytes).expect("SO_RCVBUF");
    let address = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);
    rustix::net::connect(&socket, &address).expect("connect");
    TcpStream::from(socket)
}

/// The command `args` in RESP, for values that are not text.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).bytes());
        out.extend(*arg);
        out.extend(b"\r\n");
    }
    out
}

/// Sets `key` to `value` through `stream`.
fn set(stream: &mut Secure, key: &str, value: &[u8]) {
    stream
        .write_all(&command(&[b"SET", key.as_bytes(), value]))
        .expect("write");
    expect(stream, b"+OK\r\n");
}

/// Reads until `want` bytes came, the stream ends or a read waits `patience`: the bytes
/// read.
fn read_up_to(stream: &mut Secure, want: usize, patience: Duration) -> usize {
    stream
        .sock
        .set_read_timeout(Some(patience))
        .expect("timeout");
    let mut chunk = vec![0; 1 << 20];
    let mut got = 0;
    while got < want {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
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

/// A reply larger than what the sockets hold, to a client that does not read it at first
/// and sends more commands meanwhile: once it reads, all of it comes, without the client
/// having to speak again. (Each command's pass found the session's buffer still full of
/// records the socket had refused; writing them out emptied it without the socket saying
/// "would block", and the flush stopped there, waiting for a writable event that
/// edge-triggered polling never sent.)
#[test]
fn a_long_reply_goes_on_after_the_client_sent_more_without_reading() {
    let certificates = Certificates::new();
    let server = tls_server(&certificates, false);
    let config = client_config(&certificates, false);
    let value = vec![b'z'; 8_000_000];
    set(&mut connect(server.port(), config.clone()), "big", &value);

    let socket = connect_with_receive_buffer(server.port(), 64 << 10);
    let mut stream = secure(socket, config);
    stream.write_all(b"GET big\r\n").expect("write");
    let pings = 3;
    for _ in 0..pings {
        std::thread::sleep(Duration::from_millis(300));
        stream.write_all(b"PING\r\n").expect("write");
    }
    std::thread::sleep(Duration::from_millis(300));
    let want = format!("${}\r\n", value.len()).len() + value.len() + 2 + 7 * pings;
    let got = read_up_to(&mut stream, want, Duration::from_secs(3));
    assert_eq!(
        got, want,
        "got {got} of {want} bytes: the rest waited for the client to speak again"
    );
}

/// A client that pipelines many long GETs while it reads them: its reply buffer holds
/// what is unsent, not every reply since the buffer was last empty (300 GETs of 1 MiB
/// made a buffer of 512 MiB).
#[test]
fn the_reply_buffer_of_a_deep_pipeline_stays_bounded() {
    let certificates = Certificates::new();
    let server = tls_server(&certificates, false);
    let config = client_config(&certificates, false);
    let mut stream = connect(server.port(), config.clone());
    let value = vec![b'v'; 1 << 20];
    set(&mut stream, "bv", &value);
    let gets = 150; // past twice the high-water mark, which the buffer may double to
    stream
        .write_all(&b"GET bv\r\n".repeat(gets))
        .expect("write");
    let reply = format!("${}\r\n", value.len()).len() + value.len() + 2;
    let got = read_up_to(&mut stream, gets * reply, Duration::from_secs(10));
    assert_eq!(got, gets * reply, "the replies");

    let mut other = connect(server.port(), config);
    other.write_all(b"CLIENT LIST\r\n").expect("write");
    let list = read_bulk(&mut other);
    let line = list
        .lines()
        .find(|line| line.contains("cmd=get"))
        .unwrap_or_else(|| panic!("no GET client in {list}"));
    let field = |name: &str| -> usize {
        let value = line
            .split(' ')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        value.parse().expect("a number")
    };
    // The buffer takes no more replies once it holds the 64 MiB high-water mark (the
    // last reply taken may pass it); `Vec` doubles its capacity as it grows, to 128 MiB.
    let (size, peak) = (field("rbs"), field("rbp"));
    assert!(
        peak <= (64 + 2) << 20 && size <= (128 + 1) << 20,
        "a reply buffer of {} MiB (peak {} MiB) for {gets} MiB of replies: {line}",
        size >> 20,
        peak >> 20
    );
}

/// Reads one bulk string reply.
fn read_bulk(stream: &mut Secure) -> String {
    let mut header = Vec::new();
    let mut byte = [0];
    while !header.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).expect("the reply");
        header.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&header);
    let len: usize = text
        .trim()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a bulk string: {text}"));
    let mut body = vec![0; len + 2];
    stream.read_exact(&mut body).expect("the reply");
    body.truncate(len);
    String::from_utf8(body).expect("text")
}

/// Certificate and key files that are damaged, each refused with its file named and its
/// fault said in words: bad DER in a certificate (not a "peer certificate"), a key that
/// does not parse, a file cut short (its section's name as text, not as byte values), an
/// encrypted key (said to be encrypted, not missing).
#[test]
fn damaged_tls_files_are_refused_with_the_file_and_the_fault_named() {
    let certificates = Certificates::new();
    let write = |name: &str, text: &str| {
        let path = certificates.path(name);
        std::fs::write(&path, text).expect("write");
        path
    };
    let pem = |label: &str| format!("-----BEGIN {label}-----\nAAAA\n-----END {label}-----\n");
    let garbage_cert = write("garbage.crt", &pem("CERTIFICATE"));
    let garbage_key = write("garbage.key", &pem("PRIVATE KEY"));
    let real = std::fs::read_to_string(certificates.path("server.crt")).expect("read");
    let cut = write("cut.crt", &real[..real.len() / 2]);
    let encrypted = write("encrypted.key", &pem("ENCRYPTED PRIVATE KEY"));
    let load = |cert: &Path, key: &Path| {
        let files = TlsFiles {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: None,
        };
        match Tls::load(&files) {
            Ok(_) => panic!("{files:?} loaded"),
            Err(error) => error.to_string(),
        }
    };
    let (cert, key) = (
        certificates.path("server.crt"),
        certificates.path("server.key"),
    );
    let cases = [
        (
            load(&garbage_cert, &key),
            &garbage_cert,
            "not a valid X.509 certificate",
        ),
        (
            load(&cert, &garbage_key),
            &garbage_key,
            "private key cannot be used",
        ),
        (
            load(&cut, &key),
            &cut,
            "CERTIFICATE section has no end line",
        ),
        (load(&cert, &encrypted), &encrypted, "encrypted private key"),
    ];
    for (said, file, fault) in cases {
        assert!(
            said.contains(path(file)) && said.contains(fault),
            "{file:?}: {fault:?} not said, with the file, in: {said}"
        );
        assert!(!said.contains("peer") && !said.contains("[67,"), "{said}");
    }
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
