//! `cargo xtask setup python`: the venv whose interpreter runs a model's code in the code
//! interaction (`--interaction code`), with networkx pinned (netdojo-dcgraph's
//! `code::REQUIREMENTS`), installed with pip from PyPI.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use netdojo::dcgraph::code::{self, Python, REQUIREMENTS};

#[derive(Debug, clap::Subcommand)]
pub enum SetupCommand {
    /// Create the venv of the code interaction (default: $NETDOJO_PYTHON_VENV or
    /// ~/.cache/netdojo/python) with the pinned networkx.
    Python {
        /// Where to create it.
        #[arg(long)]
        venv: Option<PathBuf>,
    },
}

pub fn run(command: SetupCommand) -> Result<()> {
    match command {
        SetupCommand::Python { venv } => python(&venv.unwrap_or_else(code::default_venv)),
    }
}

fn python(venv: &Path) -> Result<()> {
    if Python::from_venv(venv).is_ok() {
        println!("{}: already there ({})", venv.display(), REQUIREMENTS.join(" "));
        return Ok(());
    }
    // Debian's interpreter lives under /usr, which the jail shows; another one's prefix is
    // bound into the jail read-only (see `Python::from_venv`).
    let base = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    let status = Command::new(base)
        .args(["-m", "venv", "--clear"])
        .arg(venv)
        .status()
        .with_context(|| format!("running `{base} -m venv` (Debian: apt-get install python3-venv)"))?;
    if !status.success() {
        bail!("`{base} -m venv --clear {}` failed ({status})", venv.display());
    }
    let pip = venv.join("bin/python3");
    let status = Command::new(&pip)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
        .args(REQUIREMENTS)
        .status()
        .with_context(|| format!("running {} -m pip", pip.display()))?;
    if !status.success() {
        bail!("`pip install {}` into {} failed ({status})", REQUIREMENTS.join(" "), venv.display());
    }
    std::fs::write(Python::marker(venv), REQUIREMENTS.join(" ") + "\n")
        .with_context(|| format!("writing {}", Python::marker(venv).display()))?;
    Python::from_venv(venv)?;
    println!("{}: {}", venv.display(), REQUIREMENTS.join(" "));
    Ok(())
}
