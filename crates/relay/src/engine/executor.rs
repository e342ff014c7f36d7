//! Blocking calls made from async code, on stores whose drivers run a
//! Tokio runtime of their own (`Backend::drives_a_runtime`): such a driver's
//! `block_on` panics on a thread that runs an executor, so the call moves to
//! a thread of its own there.

use crate::error::{Error, Result};
use relay_store::Backend;
use std::cell::Cell;

thread_local! {
    /// Set while an `AsyncRelay` read runs on Tokio's blocking pool: that
    /// thread runs no executor, so a store may drive its own runtime there.
    static ON_BLOCKING_POOL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` marked as on Tokio's blocking pool (see [`off_executor`]).
pub(crate) fn on_blocking_pool<T>(f: impl FnOnce() -> T) -> T {
    /// Puts back what the mark was (also when `f` panics).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ON_BLOCKING_POOL.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(ON_BLOCKING_POOL.with(|m| m.replace(true)));
    f()
}

/// Runs `f` in this thread, or on a thread of its own when `backend`
/// drives a runtime of its own ([`Backend::drives_a_runtime`]) and this
/// thread may be an async executor's (a blocking call such as
/// `Relay::get` from async code, where the driver's `block_on` would
/// panic). A panic in `f` is carried on to the caller.
pub(crate) fn off_executor<T: Send>(backend: &dyn Backend, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    // The store first: where it drives no runtime (SQLite), nothing else
    // is asked.
    let executor = || tokio::runtime::Handle::try_current().is_ok() && !ON_BLOCKING_POOL.with(Cell::get);
    if !backend.drives_a_runtime() || !executor() {
        return f();
    }
    std::thread::scope(|s| {
        let thread = std::thread::Builder::new()
            .name("relay-off-executor".into())
            .spawn_scoped(s, f)
            .map_err(|e| Error::resources("a thread for a blocking call made from async code", e))?;
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
