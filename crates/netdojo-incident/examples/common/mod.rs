//! What the incident examples share.

use std::path::{Path, PathBuf};

/// A lab named on the command line: a path, or a name of testdata/incident/labs.
pub fn lab_path(name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.exists() {
        return p.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../testdata/incident/labs/{name}.yml"))
}
