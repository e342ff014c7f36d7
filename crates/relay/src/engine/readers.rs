//! A small pool of read connections, opened on demand and reused.

use super::durable::{self, Durability};
use crate::error::{Error, Result};
use relay_store::{Backend, StoreError, StoreReader};
use std::sync::{Arc, Mutex, PoisonError};

pub(crate) struct Readers {
    backend: Arc<dyn Backend>,
    idle: Mutex<Vec<Box<dyn StoreReader>>>,
    durability: Arc<Durability>,
}

/// Idle connections kept; more are opened under load and closed after use.
const KEEP_IDLE: usize = 8;

impl Readers {
    pub(crate) fn new(backend: Arc<dyn Backend>, durability: Arc<Durability>) -> Self {
        Self {
            backend,
            idle: Mutex::new(Vec::new()),
            durability,
        }
    }

    /// Runs `f` on a pooled read connection (opened if none is idle), off
    /// an async executor's thread where the store needs it (see
    /// [`super::executor::off_executor`]).
    pub(crate) fn with<T: Send>(
        &self,
        f: impl FnOnce(&mut dyn StoreReader) -> Result<T, StoreError> + Send,
    ) -> Result<T> {
        super::executor::off_executor(self.backend.as_ref(), || self.with_here(f))
    }

    fn with_here<T>(&self, f: impl FnOnce(&mut dyn StoreReader) -> Result<T, StoreError>) -> Result<T> {
        let pooled = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.backend.open_reader().map_err(Error::from)?,
        };
        let out = f(conn.as_mut());
        // A connection that met an error may be broken (a dropped
        // PostgreSQL connection): the next read opens a fresh one.
        if out.is_ok() {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < KEEP_IDLE {
                idle.push(conn);
            }
        } else {
            close_off_thread(conn);
        }
        let out = out.map_err(Error::from)?;
        // Show nothing a power loss could still take back (a split commit
        // is visible before its fsync): wait for the fsync of what was read.
        self.durability
            .wait_durable()
            .map_err(|e| Error::Storage(Arc::new(durable::stopped(&e))))?;
        Ok(out)
    }

    /// Closes the idle connections on a thread of their own: a driver may
    /// block while closing (the PostgreSQL one even starts a runtime), which
    /// must not happen on an async executor that dropped the last handle.
    pub(crate) fn close(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        if idle.is_empty() {
            return;
        }
        close_off_thread(idle);
    }
}

/// Drops `value` on a thread of its own and waits for it (a driver may
/// block while closing, which must not happen on an async executor); in
/// place when no thread can be started.
pub(crate) fn close_off_thread<T: Send + 'static>(value: T) {
    let slot = Arc::new(Mutex::new(Some(value)));
    let theirs = Arc::clone(&slot);
    let spawned = std::thread::Builder::new()
        .name("relay-close".into())
        .spawn(move || drop(theirs.lock().unwrap_or_else(PoisonError::into_inner).take()));
    match spawned {
        Ok(handle) => drop(handle.join()),
        Err(_) => drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take()),
    }
}
