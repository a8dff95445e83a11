//! End-to-end: the `xtask` binary as a user runs it, one module per application. One test
//! binary for all of them: each links every backend, and link time and disk are what a
//! separate binary per file would cost (FACTS.md).

mod code;
mod common;
mod dcgraph;
mod incident;
mod k8s;
mod llm;
mod netconf;
mod report;
mod routing;
mod serve_env;
