//! The plan's side of job dependencies: the edges from the jobs the batch
//! may finish (read with its first reads, or on first use), the edges the
//! batch adds, and the parents whose edges it has spent.

use super::{Plan, Slot};
use crate::error::Result;
use relay_core::{JobId, JobState};
use relay_store::{Dependent, DependentRead};
use std::collections::HashMap;

/// The batch's dependency edges.
#[derive(Default)]
pub(super) struct Deps {
    /// The parents whose edges the batch's first reads covered, sorted (a
    /// parent among them with no entry in `read` has none).
    prefetched: Vec<JobId>,
    /// Stored edges read, by parent.
    read: HashMap<JobId, Vec<Dependent>>,
    /// Edges this batch adds (each to a job it inserts).
    edges: Vec<Dependent>,
    /// Parents whose dependents this batch has told that they finished:
    /// their edges are spent (deleted by the batch, and read as none).
    settled: Vec<JobId>,
}

/// Where an operation started, for undo: the lengths of `edges` and
/// `settled` (the edges read are facts and stay).
pub(super) struct DepsMark(usize, usize);

impl Deps {
    /// The first reads' edges, from the jobs of `parents` (sorted).
    pub(super) fn prefetched(&mut self, parents: Vec<JobId>, read: Vec<DependentRead>) {
        self.prefetched = parents;
        self.keep(read);
    }

    /// Keeps edges the store read, by parent. An edge whose row does not
    /// decode is reported and passed over (its child is not told; a user
    /// can cancel or delete it): it must not fail the batch, nor every
    /// batch that finishes its parent.
    fn keep(&mut self, read: Vec<DependentRead>) {
        for r in read {
            match r {
                Ok(d) => self.read.entry(d.parent).or_default().push(d),
                Err(e) => {
                    tracing::error!(error = %e, "a dependency edge cannot be read: its row is corrupt; the job waiting on it is not told (cancel it with relay cancel)")
                }
            }
        }
    }

    pub(super) fn mark(&self) -> DepsMark {
        DepsMark(self.edges.len(), self.settled.len())
    }

    pub(super) fn undo(&mut self, m: &DepsMark) {
        self.edges.truncate(m.0);
        self.settled.truncate(m.1);
    }
}

impl Plan<'_> {
    /// The jobs waiting for `parent` (stored edges, and those this batch
    /// added). Reads the store once per parent, through its index, unless
    /// the first reads covered it.
    pub(crate) fn dependents(&mut self, parent: JobId) -> Result<Vec<Dependent>> {
        let d = &mut self.deps;
        if d.settled.contains(&parent) {
            return Ok(Vec::new());
        }
        if d.prefetched.binary_search(&parent).is_err() && !d.read.contains_key(&parent) {
            d.read.insert(parent, Vec::new());
            let read = self.store.job_dependents(&[parent])?;
            self.deps.keep(read);
        }
        let d = &self.deps;
        let mut out = d.read.get(&parent).cloned().unwrap_or_default();
        out.extend(d.edges.iter().filter(|e| e.parent == parent));
        Ok(out)
    }

    /// A new edge: job `d.child`, inserted by this batch, waits for `d.parent`.
    pub(crate) fn add_edge(&mut self, d: Dependent) {
        self.deps.edges.push(d);
    }

    /// The jobs waiting for `parent` have been told it finished: its edges
    /// are spent.
    pub(crate) fn settle_edges(&mut self, parent: JobId) {
        if !self.deps.settled.contains(&parent) {
            self.deps.settled.push(parent);
        }
    }

    /// What the batch writes of the graph: the new edges still to be used
    /// (a child that waits, a parent not settled, nor deleted, which
    /// settles it, in this batch), and the parents whose edges go.
    pub(super) fn dependency_writes(&self) -> (Vec<Dependent>, Vec<JobId>) {
        let d = &self.deps;
        let edges = d
            .edges
            .iter()
            .filter(|e| {
                matches!(self.jobs.get(&e.child), Some(Slot::Row(c)) if c.live() && c.status.state == JobState::Waiting)
                    && !d.settled.contains(&e.parent)
            })
            .copied()
            .collect();
        (edges, d.settled.clone())
    }
}
