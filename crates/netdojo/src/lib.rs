//! netdojo: evaluate (and train) LLM agents on real network work.
//!
//! This facade re-exports the core vocabulary and, behind one cargo feature each, the
//! backends and agents, so a project compiles only what it picks (as `object_store` and
//! `opendal` do):
//!
//! | feature    | module      | crate              |
//! |------------|-------------|--------------------|
//! | (always)   | [`core`]    | `netdojo-core`     |
//! | `score`    | `score`     | `netdojo-score`    |
//! | `scripted` | `scripted`  | `netdojo-scripted` |
//! | `dcgraph`  | `dcgraph`   | `netdojo-dcgraph`  |
//! | `linux`    | `linux`     | `netdojo-linux`    |
//! | `netconf`  | `netconf`, `embed`, `config` | `netdojo-netconf`, `netdojo-embed`, `netdojo-config` |
//! | `k8s`      | `k8s`       | `netdojo-k8s`      |
//! | `incident` | `incident`  | `netdojo-incident` |
//! | `gns3`     | `gns3`, `config` | `netdojo-gns3`, `netdojo-config` |
//! | `mcp`      | `mcp`       | `netdojo-mcp`      |
//! | `openai`   | `openai`, `llm` | `netdojo-openai`, `netdojo-llm` |
//! | `ollama`   | `ollama`, `llm` | `netdojo-ollama`, `netdojo-llm` |
//!
//! `full` turns every feature on.

pub use netdojo_core as core;
pub use netdojo_core::*;

#[cfg(any(feature = "netconf", feature = "gns3"))]
pub use netdojo_config as config;
#[cfg(feature = "dcgraph")]
pub use netdojo_dcgraph as dcgraph;
#[cfg(feature = "netconf")]
pub use netdojo_embed as embed;
#[cfg(feature = "gns3")]
pub use netdojo_gns3 as gns3;
#[cfg(feature = "incident")]
pub use netdojo_incident as incident;
#[cfg(feature = "k8s")]
pub use netdojo_k8s as k8s;
#[cfg(feature = "linux")]
pub use netdojo_linux as linux;
#[cfg(any(feature = "openai", feature = "ollama"))]
pub use netdojo_llm as llm;
#[cfg(feature = "mcp")]
pub use netdojo_mcp as mcp;
#[cfg(feature = "netconf")]
pub use netdojo_netconf as netconf;
#[cfg(feature = "ollama")]
pub use netdojo_ollama as ollama;
#[cfg(feature = "openai")]
pub use netdojo_openai as openai;
#[cfg(feature = "score")]
pub use netdojo_score as score;
#[cfg(feature = "scripted")]
pub use netdojo_scripted as scripted;
