//! netdojo-netconf's tests in one binary (link time dominates on 2 cores): the configuration
//! score on recorded FRR configs, and the Agent-Network Interface on real FRR routers.

mod ani;
mod config_score;
