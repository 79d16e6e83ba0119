//! `bench kv --tls` with requests longer than the TLS session's buffer: a pipeline of long
//! SETs is sent whole, not left half in the load generator's buffer with the server
//! waiting for the rest; and a TLS file that cannot be read is named with its option.

mod support;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{pmem_dir, text, Server};
use tailstore_crash::certificates::Certificates;

/// `serve` speaking only TLS with the test certificates (no client certificate asked).
fn tls_server(certificates: &Certificates, db: &std::path::Path, pmem: &std::path::Path) -> Server {
    let file = |name: &str| certificates.path(name).to_string_lossy().into_owned();
    Server::start(&[
        "--db",
        support::path(db),
        "--pmem",
        support::path(pmem),
        "--tls-cert-file",
        &file("server.crt"),
        "--tls-key-file",
        &file("server.key"),
    ])
}

/// Runs the `tailstore` binary with `args`, killed after `limit`: its output, or `None`
/// if it was still running then.
fn tailstore_within(args: &[&str], limit: Duration) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs the tailstore binary");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().expect("its output"))
}

/// Forty SETs of 6 MB, two in flight at once: each request is many times the session's buffer,
/// which the load generator once stopped filling when it found it full, leaving the rest
/// of a request unsent while the server waited for it (the run ended after 30 s with "no
/// reply … with 2 request(s) in flight").
#[test]
fn bench_kv_sends_long_pipelined_requests_whole_over_tls() {
    let certificates = Certificates::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let server = tls_server(
        &certificates,
        &dir.path().join("db"),
        &shm.path().join("db.pmem"),
    );
    let address = server.address.to_string();
    let ca = certificates.path("ca.crt").to_string_lossy().into_owned();
    let args = [
        "bench",
        "kv",
        "--server",
        &address,
        "--tls",
        "--tls-ca-cert-file",
        &ca,
        "--threads",
        "1",
        "--clients",
        "1",
        "--key-space",
        "4",
        "--data-size",
        "6000000",
        "--pipeline",
        "2",
        "--ratio",
        "1:0",
        "--requests",
        "40",
    ];
    // Past the run's own 30 s stall limit: a stalled run fails with its own words, and a
    // slow machine is not taken for a stall.
    let limit = Duration::from_secs(60);
    let Some(out) = tailstore_within(&args, limit) else {
        panic!("bench kv --tls did not finish within {limit:?}: a request left half sent");
    };
    let said = text(&out.stdout);
    assert!(
        out.status.success() && said.contains("errors: 0"),
        "{said}{}",
        text(&out.stderr)
    );
}

/// A TLS file that cannot be read is named with the option that gave it.
#[test]
fn a_missing_tls_file_is_named_with_its_option() {
    let certificates = Certificates::new();
    let ca = certificates.path("ca.crt").to_string_lossy().into_owned();
    let missing = certificates
        .path("missing.pem")
        .to_string_lossy()
        .into_owned();
    let key = certificates
        .path("client.key")
        .to_string_lossy()
        .into_owned();
    let server = ["bench", "kv", "--server", "127.0.0.1:1", "--tls"];
    for (files, option) in [
        (&["--tls-ca-cert-file", &missing][..], "--tls-ca-cert-file"),
        (
            &[
                "--tls-ca-cert-file",
                &ca,
                "--tls-cert-file",
                &missing,
                "--tls-key-file",
                &key,
            ],
            "--tls-cert-file",
        ),
        (
            &[
                "--tls-ca-cert-file",
                &ca,
                "--tls-cert-file",
                &ca,
                "--tls-key-file",
                &missing,
            ],
            "--tls-key-file",
        ),
    ] {
        let out = tailstore_within(&[&server[..], files].concat(), Duration::from_secs(20))
            .expect("bench kv stops at once");
        let said = text(&out.stderr);
        let needle = format!("{option} {missing}: ");
        assert!(!out.status.success(), "{files:?}: succeeded");
        assert!(said.contains(&needle), "{needle:?} not in {said:?}");
        assert!(!said.contains("panicked"), "{said}");
    }
}
