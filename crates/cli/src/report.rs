//! Pieces every benchmark report shares: the progress bar over cases and the JSON file.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::CliResult;

/// A progress bar over `len` benchmark cases (hidden when stderr is not a terminal).
pub fn case_progress(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template("{bar:30} {pos}/{len} cases  {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Writes `reports` as pretty JSON to `path` and says so.
pub fn write_json<T: Serialize>(path: &Path, reports: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(reports)?;
    std::fs::write(path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("\nJSON written to {}", path.display());
    Ok(())
}
