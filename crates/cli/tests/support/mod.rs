//! What the CLI's integration tests share: running the binary and reading what it said.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::Path;
use std::process::{Command, Output};

/// Runs the `tailstore` binary with `args` and waits for it.
pub fn tailstore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args(args)
        .output()
        .expect("runs the tailstore binary")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Fails with a non-zero status and a message containing every one of `needles`, without a
/// panic.
pub fn refused(args: &[&str], needles: &[&str]) {
    let out = tailstore(args);
    assert!(
        !out.status.success(),
        "{args:?} succeeded: {}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err:?}");
    }
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}
