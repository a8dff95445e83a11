//! NetPress datacenter capacity planning (seed 003, §B) as a netdojo environment.
//!
//! # The model
//! The graph is Google's MALT multi-layer topology ([`malt`] reads the published file): ten
//! entity kinds ([`EntityKind`]) linked by RK_CONTAINS and RK_CONTROLS edges. Nodes are
//! identified by (kind, name), because in MALT a chassis, its control point and its packet
//! switch share one name; the real file holds 6,133 entities and 7,064 relations. NetPress
//! loaded it into networkx keyed by name alone, which merges those triples into 5,493 nodes
//! and 6,424 edges (and turns chassis→switch edges into self-loops); [`Graph::merged_view`]
//! reproduces those numbers. Attributes are kept as a small map of paths below the
//! `<kind>_attr` message (`physical_capacity_bps`, `switch_loc.stage`, `jupiter_type`,
//! `index_within_jupiter`). [`FabricParams`] generates MALT-shaped fabrics; its default
//! reproduces the real file's structure and counts.
//!
//! # Tools, or NetPress's generated code
//! NetPress asks the model for a Python `process_graph` function; [`code`] offers exactly that
//! (`--interaction code`: the code runs in netdojo-jail on the networkx graph of [`netpress`],
//! docs/netpress.md says what differs from the paper). By default the agent calls tools
//! ([`tools::tool_specs`]): `find_nodes`, `get_node`, `list_children`, `list_parents`,
//! `count_descendants`, `capacity`, `add_node`, `add_edge`, `remove_node`, `remove_edge`,
//! `update_node`, and `batch` (several of those as one atomic call). Mutating tools accept
//! unsafe but well-formed changes so that the safety check ([`safety`], run after every step)
//! means something; malformed calls are refused with an error observation. Because the check
//! runs after every call and a new switch without its port (or ports without their switch) is
//! unsafe, multi-call changes go through `batch`; the oracle's actions do.
//!
//! # Tasks
//! [`QueryGenerator`] cycles through NetPress's 12 labels (`index % 12`, see [`LABELS`]) and
//! draws operands with a ChaCha8 generator seeded from (seed, index). The ground truth comes
//! from [`ops`] run on a pooled scratch copy of the graph and undone through a journal. A
//! task's `goal` holds the digest and size of the expected final graph (also for read-only
//! queries, which must leave the graph unchanged); its `setup` holds the graph source and
//! the base graph's digest, which the factory checks before running the task.
//!
//! # Ground truth and differences from NetPress
//! * Capacity of a node is the sum of `physical_capacity_bps` over all ports anywhere below it
//!   (RK_CONTAINS and RK_CONTROLS edges, each port once). NetPress looked two levels down
//!   only, which gives 0 for the superblocks and the jupiter, whose ports lie further below
//!   them.
//! * Count follows the same hierarchy; list and rank use direct RK_CONTAINS children.
//! * `remove` in the ground truth ([`ops::remove`]) removes the node and, recursively, every
//!   descendant left without a hierarchy parent, so a removed switch takes its ports; the
//!   `remove_node` tool removes one node only, and the oracle's actions list every removal.
//! * A new packet switch goes under an EK_AGG_BLOCK or EK_SPINEBLOCK (the kinds that contain
//!   switches in the file; NetPress also used control domains, which contain control points
//!   only), gets `switch_loc.stage` and one port `<switch>.p1`. No chassis or control point is
//!   created for it.
//! * The final graph is compared by an order-independent digest of node and edge records
//!   rather than networkx isomorphism; answers are compared by type (count by equality, list
//!   as a multiset, rank by names and capacities with ties in any order).

pub mod code;
pub mod env;
pub mod fabric;
pub mod malt;
pub mod model;
pub mod netpress;
pub mod ops;
pub mod queries;
pub mod safety;
pub mod tools;

pub use code::{CodeFactory, CodeOracleFactory};
pub use env::{DcGraphEnv, DcGraphFactory, GraphSource, answer_schema_for, brief};
pub use fabric::FabricParams;
pub use malt::MaltError;
pub use model::{Attrs, EntityKind, Graph, GraphError, MergedView, Node, Relation};
pub use netpress::Keying;
pub use queries::{LABELS, QueryGenerator, Targets};
