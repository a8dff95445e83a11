//! The fault catalogue made concrete: for each [`FaultType`], the faults a lab offers,
//! derived from the lab's own configuration (its routers' FRR configurations read as
//! netdojo-config trees, its interfaces, links, routes, services and checks). Each candidate
//! is a [`Fault`] whose `inject` actions are what an operator typed (vtysh configuration
//! lines, `linux`-dialect commands, service operations) and whose `repair` actions restore
//! the healthy lab exactly.
//!
//! A candidate must be able to break a health check of its lab: an adjacency fault only on a
//! link whose adjacency a check watches, a cost change only where another path exists and a
//! path check would see the move, strict reverse-path filtering only where routing is
//! asymmetric, and so on. The generator still verifies each drawn fault on the live lab.
//!
//! [`draw`] picks faults for a task: pure, deterministic for a given RNG state.

mod derive;
mod spf;
mod view;

use std::collections::BTreeSet;

use rand::Rng;
use rand::seq::IndexedRandom;

use crate::catalogue::FaultType;
use crate::fault::Fault;
use crate::lab::Lab;

pub use derive::Candidate;

/// The faults of type `t` that `lab` offers, in a stable order.
pub fn candidates(lab: &Lab, t: FaultType) -> Vec<Fault> {
    derive::derive(&view::View::new(lab), t).into_iter().map(|c| c.fault).collect()
}

/// Every candidate of every type, with what each touches (for conflict checks).
pub fn all_candidates(lab: &Lab) -> Vec<Candidate> {
    let view = view::View::new(lab);
    FaultType::ALL.iter().flat_map(|t| derive::derive(&view, *t)).collect()
}

/// The fault types `lab` offers at least one candidate of.
pub fn offered(lab: &Lab) -> Vec<FaultType> {
    let view = view::View::new(lab);
    FaultType::ALL.iter().copied().filter(|t| !derive::derive(&view, *t).is_empty()).collect()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    #[error(
        "lab {lab}: {wanted} fault(s) on different devices wanted, only {found} compatible ones offered by types {types}"
    )]
    NotEnough { lab: String, wanted: usize, found: usize, types: String },
}

/// Draws `k` faults of the `types` allowed, on `k` different devices, no two touching the
/// same link, session, service or filter: first a type (uniformly among the types that still
/// have a compatible candidate), then one of its candidates. Pure: the same lab, types, `k`
/// and RNG state give the same faults.
pub fn draw<R: Rng + ?Sized>(
    lab: &Lab,
    types: &[FaultType],
    k: usize,
    rng: &mut R,
) -> Result<Vec<Fault>, DrawError> {
    let view = view::View::new(lab);
    let mut types: Vec<FaultType> = types.to_vec();
    types.sort();
    types.dedup();
    let pool: Vec<(FaultType, Vec<Candidate>)> =
        types.iter().map(|t| (*t, derive::derive(&view, *t))).collect();
    let mut touched: BTreeSet<String> = BTreeSet::new();
    let mut chosen: Vec<Fault> = Vec::new();
    while chosen.len() < k {
        let open: Vec<Vec<&Candidate>> = pool
            .iter()
            .map(|(_, cs)| cs.iter().filter(|c| c.touches.is_disjoint(&touched)).collect::<Vec<_>>())
            .filter(|fit: &Vec<&Candidate>| !fit.is_empty())
            .collect();
        let Some(c) = open.choose(rng).and_then(|fit| fit.choose(rng)) else {
            return Err(DrawError::NotEnough {
                lab: lab.name.clone(),
                wanted: k,
                found: chosen.len(),
                types: types.iter().map(|t| t.id()).collect::<Vec<_>>().join(","),
            });
        };
        touched.extend(c.touches.iter().cloned());
        chosen.push(c.fault.clone());
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests;
