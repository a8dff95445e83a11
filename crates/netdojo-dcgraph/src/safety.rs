//! The structural constraints of NetPress §B.4, checked on a whole graph.
//!
//! The allowed (relation, parent kind, child kind) triples are those of the published MALT
//! file, which are the hierarchy list of the §B.3 prompt with two differences: the prompt's
//! "EK_CONTROL_POINT contains EK_PACKET_SWITCH" is an RK_CONTROLS edge in the file (both are
//! accepted), and the prompt's "EK_SPINE_BLOCK contains EK_AGG_BLOCK" never occurs in the file
//! (accepted, since the paper lists it).

use crate::model::{CAPACITY_ATTR, EntityKind, Graph, Relation};

use EntityKind as K;

/// Whether an edge of this relation between these kinds is allowed.
pub fn allowed(rel: &Relation, parent: &EntityKind, child: &EntityKind) -> bool {
    match rel {
        Relation::Contains => matches!(
            (parent, child),
            (K::Jupiter, K::SuperBlock | K::SpineBlock)
                | (K::SuperBlock, K::AggBlock)
                | (K::SpineBlock, K::AggBlock | K::PacketSwitch)
                | (K::AggBlock, K::PacketSwitch)
                | (K::Rack, K::Chassis)
                | (K::Chassis, K::ControlPoint | K::PacketSwitch)
                | (K::ControlDomain, K::ControlPoint)
                | (K::ControlPoint, K::PacketSwitch)
                | (K::PacketSwitch, K::Port)
        ),
        Relation::Controls => matches!((parent, child), (K::ControlPoint, K::PacketSwitch)),
        Relation::Other(_) => false,
    }
}

/// At most this many violations are listed; the rest are counted.
const MAX_LISTED: usize = 20;

/// Every constraint the graph breaks, in words; empty when the graph is safe.
pub fn violations(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    let mut push = |msg: String| {
        if out.len() < MAX_LISTED {
            out.push(msg);
        } else {
            more += 1;
        }
    };
    let label = |ix| {
        let n = g.node(ix);
        format!("{} `{}`", g.kind_label(&n.kind), n.name)
    };
    for ix in g.node_indices() {
        let n = g.node(ix);
        if let K::Other(k) = &n.kind {
            push(format!("{} has an unknown kind `{k}`", label(ix)));
        }
        if g.children(ix).next().is_none() && g.parents(ix).next().is_none() {
            push(format!("{} is isolated (no edges)", label(ix)));
        }
        match n.kind {
            K::Port => {
                let ok = n.attrs.get(CAPACITY_ATTR).and_then(|v| v.as_f64()).is_some_and(|c| c > 0.0);
                if !ok {
                    push(format!("{} has no positive {CAPACITY_ATTR}", label(ix)));
                }
            }
            K::PacketSwitch => {
                if !n.attrs.keys().any(|k| k == "switch_loc" || k.starts_with("switch_loc.")) {
                    push(format!("{} has no switch_loc attribute", label(ix)));
                }
                let has_port =
                    g.children(ix).any(|(rel, c)| *rel == Relation::Contains && g.node(c).kind == K::Port);
                if !has_port {
                    push(format!("{} contains no EK_PORT", label(ix)));
                }
            }
            _ => {}
        }
    }
    for (a, rel, z) in g.edges() {
        if let Relation::Other(r) = rel {
            push(format!("edge {} {r} {}: unknown relation kind", label(a), label(z)));
        } else if !allowed(rel, &g.node(a).kind, &g.node(z).kind) {
            push(format!("edge {} {rel} {}: not allowed by the hierarchy", label(a), label(z)));
        }
    }
    if more > 0 {
        out.push(format!("... and {more} more violations"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::FabricParams;

    #[test]
    fn allowed_set_is_the_file_patterns_plus_the_prompt_hierarchy() {
        // The §B.3 prompt's list, with its spelling.
        let prompt = [
            ("EK_JUPITER", "EK_SPINE_BLOCK"),
            ("EK_SPINE_BLOCK", "EK_AGG_BLOCK"),
            ("EK_AGG_BLOCK", "EK_PACKET_SWITCH"),
            ("EK_CHASSIS", "EK_CONTROL_POINT"),
            ("EK_CONTROL_POINT", "EK_PACKET_SWITCH"),
            ("EK_RACK", "EK_CHASSIS"),
            ("EK_PACKET_SWITCH", "EK_PORT"),
            ("EK_SPINE_BLOCK", "EK_PACKET_SWITCH"),
            ("EK_CONTROL_DOMAIN", "EK_CONTROL_POINT"),
            ("EK_CHASSIS", "EK_PACKET_SWITCH"),
            ("EK_JUPITER", "EK_SUPER_BLOCK"),
            ("EK_SUPER_BLOCK", "EK_AGG_BLOCK"),
        ];
        let mut allowed_pairs = 0;
        for p in &EntityKind::KNOWN {
            for c in &EntityKind::KNOWN {
                if allowed(&Relation::Contains, p, c) {
                    allowed_pairs += 1;
                    let in_prompt = prompt.iter().any(|(a, b)| {
                        EntityKind::parse(a).as_ref() == Some(p) && EntityKind::parse(b).as_ref() == Some(c)
                    });
                    assert!(in_prompt, "{p} contains {c} is allowed but not in the prompt");
                }
            }
        }
        assert_eq!(allowed_pairs, prompt.len());
        // Every pattern of the (generated = real) model is allowed.
        let g = FabricParams::default().generate();
        for (a, r, z) in g.edges() {
            assert!(
                allowed(r, &g.node(a).kind, &g.node(z).kind),
                "{} {r} {}",
                g.node(a).kind,
                g.node(z).kind
            );
        }
        assert!(!allowed(&Relation::Contains, &EntityKind::Port, &EntityKind::Rack));
        assert!(!allowed(&Relation::Controls, &EntityKind::Rack, &EntityKind::Chassis));
    }
}
