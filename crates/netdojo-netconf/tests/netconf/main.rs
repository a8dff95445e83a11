//! netdojo-netconf's tests in one binary (link time dominates on 2 cores): the
//! Agent-Network Interface on real FRR routers. The command score's tests live with it, in
//! netdojo-config.

mod ani;
mod containment;
mod quiet;
mod runner;
mod testcases;
