//! Stopping a worker: gracefully (stop leasing, let running jobs finish
//! within the grace period, release the rest) or at once (release all now).

use tokio::sync::watch;

/// The worker's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Running,
    Draining,
    Stopping,
}

/// A handle that stops a worker; cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: watch::Sender<Phase>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self {
            tx: watch::Sender::new(Phase::Running),
        }
    }
}

impl Shutdown {
    /// Stop leasing; jobs in flight get the grace period to finish, then the
    /// rest are released so they run again at once elsewhere. A second call
    /// stops at once.
    pub fn graceful(&self) {
        self.tx.send_modify(|p| {
            *p = if *p == Phase::Running {
                Phase::Draining
            } else {
                Phase::Stopping
            }
        });
    }

    /// Stops leasing and drains, as a first [`Shutdown::graceful`], but
    /// never skips the grace period of a drain already under way: the
    /// runtime's own stop (an error that will not pass).
    pub(crate) fn drain(&self) {
        self.tx.send_if_modified(|p| {
            let running = *p == Phase::Running;
            if running {
                *p = Phase::Draining;
            }
            running
        });
    }

    /// Stop at once: release every job in flight now.
    pub fn now(&self) {
        self.tx.send_replace(Phase::Stopping);
    }

    /// True once a shutdown, graceful or not, has been asked for.
    pub fn is_requested(&self) -> bool {
        *self.tx.borrow() != Phase::Running
    }

    pub(crate) fn phase(&self) -> Phase {
        *self.tx.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Phase> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_graceful_stops_at_once() {
        let s = Shutdown::default();
        assert!(!s.is_requested());
        s.graceful();
        assert_eq!(s.phase(), Phase::Draining);
        s.graceful();
        assert_eq!(s.phase(), Phase::Stopping);
    }
}
