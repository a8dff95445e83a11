//! The scorers' trait: an episode in, metrics out.

use crate::metric::Metric;
use crate::task::Task;
use crate::trajectory::Trajectory;

/// Turns an episode into metrics. Scorers are pure: they read the task and the trajectory
/// and touch nothing else, so a run directory can be re-scored later.
pub trait Scorer: Send + Sync {
    fn name(&self) -> &str;
    fn score(&self, task: &Task, episode: &Trajectory) -> Vec<Metric>;
}
