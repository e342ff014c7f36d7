//! What is kept about a queue itself, apart from its jobs.

/// A queue's stored settings. A queue nobody has configured has the
/// defaults; queues come into being with their first job and need no
/// declaration.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueSettings {
    /// No job of the queue is leased while it is paused; submits, acks and
    /// everything else go on as usual, and leases already held run to the
    /// end.
    pub paused: bool,
}
