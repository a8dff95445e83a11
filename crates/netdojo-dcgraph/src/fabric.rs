//! A seeded generator of MALT-shaped fabrics. With [`FabricParams::default`] it reproduces
//! the structure of the published model exactly: the same kinds, counts, names, relation
//! patterns and attributes; only the placement of the few faster ports depends on the seed.

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Attrs, CAPACITY_ATTR, EntityKind, Graph, Relation};

/// What to generate. Names follow MALT: superblock `ju1.a1`, its agg blocks `ju1.a1.m1`, their
/// switches `ju1.a1.m1.s2c1` (stage 2, chassis 1), ports `.p1`..; spine blocks `ju1.s1` with
/// switches `ju1.s1.s1c1`; one rack per agg/spine block (`ju1.a1.m1rack`, `ju1.s1rack`) holding
/// one chassis per switch; one control domain per superblock/spine block (`ju1.a1.dom`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FabricParams {
    pub seed: u64,
    pub superblocks: u32,
    pub aggs_per_superblock: u32,
    pub spineblocks: u32,
    /// Switches per stage in an agg block (stages 2 and 3).
    pub agg_switches_per_stage: u32,
    /// Switches per stage in a spine block (stages 1 and 2).
    pub spine_switches_per_stage: u32,
    pub ports_per_switch: u32,
    pub port_capacity_bps: u64,
    /// Capacities of the few ports that differ from `port_capacity_bps`, placed at random.
    pub special_port_capacities_bps: Vec<u64>,
}

impl Default for FabricParams {
    fn default() -> Self {
        Self {
            seed: 0,
            superblocks: 4,
            aggs_per_superblock: 4,
            spineblocks: 4,
            agg_switches_per_stage: 8,
            spine_switches_per_stage: 8,
            ports_per_switch: 16,
            port_capacity_bps: 1_000_000_000,
            special_port_capacities_bps: vec![
                2_000_000_000,
                2_000_000_000,
                2_000_000_000,
                4_000_000_000,
                5_000_000_000,
            ],
        }
    }
}

fn must<T>(r: Result<T, crate::model::GraphError>) -> T {
    // Names are built from distinct counters, so a clash is a bug in this module.
    match r {
        Ok(v) => v,
        Err(e) => panic!("fabric generator produced an invalid graph: {e}"),
    }
}

impl FabricParams {
    /// Builds the fabric; a pure function of the parameters.
    pub fn generate(&self) -> Graph {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut g = Graph::new();
        let attrs = |pairs: &[(&str, Value)]| -> Attrs {
            pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
        };
        let ju = must(g.add_node(EntityKind::Jupiter, "ju1", attrs(&[("jupiter_type", "JDT_COLO".into())])));
        let mut ports = Vec::new();
        // (block name, container ix, stages, per stage, domain group)
        let mut blocks = Vec::new();
        for a in 1..=self.superblocks {
            let name = format!("ju1.a{a}");
            let sb =
                must(g.add_node(EntityKind::SuperBlock, &name, attrs(&[("index_within_jupiter", a.into())])));
            must(g.add_edge(ju, sb, Relation::Contains));
            for m in 1..=self.aggs_per_superblock {
                let agg_name = format!("{name}.m{m}");
                let agg = must(g.add_node(EntityKind::AggBlock, &agg_name, Attrs::new()));
                must(g.add_edge(sb, agg, Relation::Contains));
                blocks.push((agg_name, agg, [2u32, 3], self.agg_switches_per_stage, name.clone()));
            }
        }
        for s in 1..=self.spineblocks {
            let name = format!("ju1.s{s}");
            let sp = must(g.add_node(EntityKind::SpineBlock, &name, Attrs::new()));
            must(g.add_edge(ju, sp, Relation::Contains));
            blocks.push((name.clone(), sp, [1u32, 2], self.spine_switches_per_stage, name));
        }
        let mut domains: Vec<(String, petgraph::stable_graph::NodeIndex)> = Vec::new();
        for (block, bix, stages, per_stage, group) in &blocks {
            let rack = must(g.add_node(EntityKind::Rack, &format!("{block}rack"), Attrs::new()));
            let dom_name = format!("{group}.dom");
            let dom = match domains.iter().find(|(n, _)| *n == dom_name) {
                Some((_, ix)) => *ix,
                None => {
                    let ix = must(g.add_node(EntityKind::ControlDomain, &dom_name, Attrs::new()));
                    domains.push((dom_name, ix));
                    ix
                }
            };
            for stage in stages {
                for c in 1..=*per_stage {
                    let sw_name = format!("{block}.s{stage}c{c}");
                    let sw = must(g.add_node(
                        EntityKind::PacketSwitch,
                        &sw_name,
                        attrs(&[("switch_loc.stage", (*stage).into())]),
                    ));
                    must(g.add_edge(*bix, sw, Relation::Contains));
                    for p in 1..=self.ports_per_switch {
                        let port = must(g.add_node(
                            EntityKind::Port,
                            &format!("{sw_name}.p{p}"),
                            attrs(&[(CAPACITY_ATTR, self.port_capacity_bps.into())]),
                        ));
                        must(g.add_edge(sw, port, Relation::Contains));
                        ports.push(port);
                    }
                    let chassis = must(g.add_node(EntityKind::Chassis, &sw_name, Attrs::new()));
                    let cp = must(g.add_node(EntityKind::ControlPoint, &sw_name, Attrs::new()));
                    must(g.add_edge(chassis, sw, Relation::Contains));
                    must(g.add_edge(chassis, cp, Relation::Contains));
                    must(g.add_edge(cp, sw, Relation::Controls));
                    must(g.add_edge(rack, chassis, Relation::Contains));
                    must(g.add_edge(dom, cp, Relation::Contains));
                }
            }
        }
        // Distinct ports for the special capacities (partial Fisher-Yates over the port list).
        let k = self.special_port_capacities_bps.len().min(ports.len());
        for (i, cap) in self.special_port_capacities_bps.iter().take(k).enumerate() {
            let j = rng.random_range(i..ports.len());
            ports.swap(i, j);
            g.set_attr(ports[i], CAPACITY_ATTR, Some((*cap).into()));
        }
        g
    }
}
