//! netdojo-linux on real namespaces, in one test binary (link time dominates on 2 cores):
//! building and tearing down networks, the agent's sandbox, FRR routers, the routing faults.

mod common;
mod containment;
mod frr;
mod hostile;
mod jail;
mod network;
mod routing;
