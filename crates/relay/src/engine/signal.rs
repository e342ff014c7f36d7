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
