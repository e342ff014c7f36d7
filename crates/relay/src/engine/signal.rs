//! Wake-ups for callers waiting in `lease`: a generation counter bumped by
//! every commit that made a job ready, waited on by sync callers through a
//! condition variable and by async callers through a watch channel. A caller
//! reads the generation before it looks for jobs, so a wake-up that lands
//! between the look and the wait is never lost.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;
use tokio::sync::watch;

#[derive(Debug)]
pub(crate) struct ReadySignal {
    generation: Mutex<u64>,
    cv: Condvar,
    watch: watch::Sender<u64>,
}

impl ReadySignal {
    pub(crate) fn new() -> Self {
        Self {
            generation: Mutex::new(0),
            cv: Condvar::new(),
            watch: watch::Sender::new(0),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        *self.generation.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn notify(&self) {
        let mut g = self.generation.lock().unwrap_or_else(PoisonError::into_inner);
        *g += 1;
        let now = *g;
        drop(g);
        self.cv.notify_all();
        self.watch.send_replace(now);
    }

    /// Blocks until the generation moves past `seen` or `until` passes.
    pub(crate) fn wait(&self, seen: u64, until: Instant) {
        let mut g = self.generation.lock().unwrap_or_else(PoisonError::into_inner);
        while *g == seen {
            let now = Instant::now();
            if now >= until {
                return;
            }
            g = self
                .cv
                .wait_timeout(g, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The async form of [`ReadySignal::wait`].
    pub(crate) async fn wait_async(&self, seen: u64, until: Instant) {
        let mut rx = self.watch.subscribe();
        if *rx.borrow_and_update() != seen {
            return;
        }
        let _ = tokio::time::timeout_at(until.into(), rx.changed()).await;
    }
}

/// Wake-ups for callers awaiting jobs' ends (`Relay::result`): each
/// registers the job it awaits before it reads it, and the writer, after a
/// commit that ended some of the registered jobs, wakes those callers only.
/// Costs nothing while no caller awaits: the writer collects the jobs a
/// batch ended only then ([`FinishSignal::any`]). Jobs ended by another
/// process are seen by the caller's own poll.
#[derive(Debug, Default)]
pub(crate) struct FinishSignal {
    awaiting: std::sync::atomic::AtomicUsize,
    next: std::sync::atomic::AtomicU64,
    by_job: Mutex<std::collections::HashMap<relay_core::JobId, Vec<Waker>>>,
}

/// One registration's key and the channel that wakes it.
type Waker = (u64, flume::Sender<()>);

/// A caller's registration: woken (a message on `rx`) at most once per
/// commit that ended its job; deregistered when dropped.
pub(crate) struct Awaiting<'a> {
    signal: &'a FinishSignal,
    id: relay_core::JobId,
    key: u64,
    pub rx: flume::Receiver<()>,
}

impl FinishSignal {
    /// Whether any caller awaits a job.
    pub(crate) fn any(&self) -> bool {
        self.awaiting.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    pub(crate) fn register(&self, id: relay_core::JobId) -> Awaiting<'_> {
        use std::sync::atomic::Ordering;
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = flume::bounded(1);
        self.by_job
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id)
            .or_default()
            .push((key, tx));
        self.awaiting.fetch_add(1, Ordering::Release);
        Awaiting {
            signal: self,
            id,
            key,
            rx,
        }
    }

    /// Wakes the callers awaiting any of `ended` (committed).
    pub(crate) fn notify(&self, ended: &[relay_core::JobId]) {
        if ended.is_empty() || !self.any() {
            return;
        }
        let by_job = self.by_job.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ended {
            for (_, tx) in by_job.get(id).into_iter().flatten() {
                let _ = tx.try_send(()); // a wake-up already queued will do
            }
        }
    }
}

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        let mut by_job = self.signal.by_job.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = by_job.get_mut(&self.id) {
            list.retain(|(k, _)| *k != self.key);
            if list.is_empty() {
                by_job.remove(&self.id);
            }
        }
        self.signal.awaiting.fetch_sub(1, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn notify_wakes_a_waiter_and_stale_generation_returns_at_once() {
        let s = Arc::new(ReadySignal::new());
        let seen = s.generation();
        let s2 = Arc::clone(&s);
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            s2.wait(seen, Instant::now() + Duration::from_secs(30));
            start.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        s.notify();
        assert!(t.join().unwrap() < Duration::from_secs(10));
        // Already moved on: no wait at all.
        s.wait(seen, Instant::now() + Duration::from_secs(30));
    }
}
