//! What is durable yet, for stores that split a commit (see
//! [`relay_store::Store::syncer`] and ARCHITECTURE.md, "Split commit").
//!
//! The writer numbers each commit that wrote something before it issues
//! `COMMIT`; whoever fsyncs afterwards marks that number durable. Readers
//! of this process wait, after their read, until everything committed when
//! the read ended is durable: a read never shows a change that a power loss
//! could still take back. Stores without a syncer never number a commit, so
//! their readers never wait.

use relay_store::StoreError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

#[derive(Default)]
pub(crate) struct Durability {
    /// Called once, at the first failure (the store refuses to be opened
    /// again in this process).
    on_fail: Option<Box<dyn Fn() + Send + Sync>>,
    /// Set when another Relay of this process failed on the same store.
    shared: Option<Arc<AtomicBool>>,
    /// The last commit numbered (its `COMMIT` may still be running).
    committed: AtomicU64,
    /// Everything up to this number is on disk.
    durable: AtomicU64,
    failed: AtomicBool,
    state: Mutex<Option<Arc<StoreError>>>,
    changed: Condvar,
}

impl Durability {
    pub(crate) fn new(on_fail: Box<dyn Fn() + Send + Sync>, shared: Option<Arc<AtomicBool>>) -> Self {
        Self {
            on_fail: Some(on_fail),
            shared,
            ..Self::default()
        }
    }

    /// Another Relay of this process stopped on this store: stop too.
    fn shared_failed(&self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.load(SeqCst))
    }

    fn fail_from_shared(&self) {
        self.fail(Arc::new(StoreError::Io {
            message: "another Relay of this process met an I/O error on this store".into(),
            source: "refused after an I/O error".into(),
        }));
    }

    /// Numbers the commit about to be issued.
    pub(crate) fn begin_commit(&self) -> u64 {
        self.committed.fetch_add(1, SeqCst) + 1
    }

    /// Everything committed up to `seq` is on disk (syncs cover every
    /// earlier commit, so the mark only moves forward).
    pub(crate) fn mark_durable(&self, seq: u64) {
        let _guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.durable.fetch_max(seq, SeqCst);
        self.changed.notify_all();
    }

    /// A sync failed: written commits may be gone from the disk while still
    /// visible in memory, so nothing more may be written or read.
    pub(crate) fn fail(&self, e: Arc<StoreError>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let first = state.is_none();
        state.get_or_insert(e);
        self.failed.store(true, SeqCst);
        self.changed.notify_all();
        drop(state);
        if let Some(on_fail) = self.on_fail.as_ref().filter(|_| first) {
            on_fail();
        }
    }

    /// The error that stopped this Relay, if a sync failed.
    pub(crate) fn failure(&self) -> Option<Arc<StoreError>> {
        if !self.failed.load(SeqCst) {
            if !self.shared_failed() {
                return None;
            }
            self.fail_from_shared();
        }
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits until every commit numbered so far is durable. Called after a
    /// read: a commit the read saw was numbered before it was issued, so
    /// before the read began.
    pub(crate) fn wait_durable(&self) -> Result<(), Arc<StoreError>> {
        if self.shared_failed() && !self.failed.load(SeqCst) {
            self.fail_from_shared();
        }
        let target = self.committed.load(SeqCst);
        if self.durable.load(SeqCst) >= target && !self.failed.load(SeqCst) {
            return Ok(());
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(e) = state.as_ref() {
                return Err(Arc::clone(e));
            }
            if self.durable.load(SeqCst) >= target {
                return Ok(());
            }
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The error every write and read gets after a failed sync.
pub(crate) fn stopped(e: &Arc<StoreError>) -> StoreError {
    StoreError::Io {
        message: format!(
            "an fsync of the store failed ({e}); to keep every acknowledged change safe this Relay writes and reads nothing more: fix the disk, then restart this process to reopen it (ARCHITECTURE.md, \"After an I/O error\")"
        ),
        source: Box::new(Arc::clone(e)),
    }
}
