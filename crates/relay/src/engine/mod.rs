//! The engine: one writer thread per process (group commit), the read
//! pool, wake-ups for waiting lessees, and the typed calls that connect the
//! API to the writer. Written once for every store.

pub(crate) mod batch;
pub(crate) mod calls;
pub(crate) mod durable;
pub(crate) mod executor;
pub(crate) mod housekeeping;
pub(crate) mod metrics;
pub(crate) mod ops;
pub(crate) mod plan;
pub(crate) mod readers;
pub(crate) mod reads;
pub(crate) mod search;
pub(crate) mod signal;
pub(crate) mod writer;

use crate::error::{Error, Result};
use crate::options::Options;
use batch::BatchCtx;
use durable::Durability;
use metrics::Counters;
pub(crate) use plan::{Hint, Plan};
use readers::Readers;
use relay_core::JobId;
use relay_store::Backend;
use signal::ReadySignal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::JoinHandle;
use writer::{Call, Deliver, Operation, Writer};

/// An operation ready to send, with the channel its answer comes back on.
pub(crate) struct Pending<T> {
    op: Box<dyn Operation>,
    rx: flume::Receiver<Result<T>>,
}

impl<T: Send + 'static> Pending<T> {
    pub(crate) fn new<F>(hint: Hint, work: F) -> Self
    where
        F: FnMut(&mut Plan<'_>, &mut BatchCtx<'_>) -> Result<T> + Send + 'static,
    {
        let (op, rx) = Call::boxed(Box::new(work), hint);
        Self { op, rx }
    }

    /// An operation of the holder of `id`'s lease that reads nothing but
    /// the job's status and the jobs waiting for it, and writes one
    /// transition with its event, if any (an ack, nack, snooze or
    /// extend): alone in its batch, it may be planned from the status
    /// this process wrote when it leased the job, without a read (see
    /// `Writer::unread`).
    pub(crate) fn held<F>(id: JobId, work: F) -> Self
    where
        F: FnMut(&mut Plan<'_>, &mut BatchCtx<'_>) -> Result<T> + Send + 'static,
    {
        let (op, rx) = Call::of_holder(Box::new(work), id);
        Self { op, rx }
    }
}

/// The span of one call, from its send to its answer (ARCHITECTURE.md,
/// "Tracing"): `relay.submit`, `relay.lease`, `relay.update` (an ack, nack,
/// extend, release, cancel...) or `relay.call`. Debug level: free unless a
/// subscriber asks for it.
fn call_span(hint: &Hint) -> tracing::Span {
    match hint {
        Hint::Submit { jobs, .. } => tracing::debug_span!("relay.submit", jobs = *jobs),
        Hint::Claim { queues, max } => tracing::debug_span!("relay.lease", queues = ?queues, max = *max),
        Hint::Jobs(ids) => tracing::debug_span!("relay.update", jobs = ?ids),
        Hint::CompleteAndClaim { jobs, queues, max } => {
            tracing::debug_span!("relay.work", jobs = ?jobs, queues = ?queues, max = *max)
        }
        Hint::Prune(after) => tracing::debug_span!("relay.prune", after = after.0),
        Hint::None => tracing::debug_span!("relay.call"),
    }
}

/// What every handle to one open Relay shares.
pub(crate) struct Engine {
    tx: Option<flume::Sender<Box<dyn Operation>>>,
    /// The writer. Callers commit their own operation when it is idle and
    /// nothing waits, where its store lets them
    /// (`Store::caller_may_commit`); otherwise only the writer thread uses
    /// it. Held here so that the store's connection closes only after the
    /// sync and reply stages have finished (see `Drop`).
    core: Option<Arc<Mutex<Writer>>>,
    /// Further writers and their threads, where the store runs several
    /// (`Backend::writers`); closed like the first.
    extra: Vec<(Arc<Mutex<Writer>>, JoinHandle<()>)>,
    /// The ready signal (wakes waiting lessees), the counters, and the sync of split commits.
    pub deliver: Deliver,
    /// Operations sent (or being committed by their caller) and not yet answered.
    in_flight: AtomicUsize,
    writer: Option<JoinHandle<()>>,
    syncer: Option<JoinHandle<()>>,
    replier: Option<JoinHandle<()>>,
    /// Listens for other processes' ready jobs, where the store can.
    _watch: Option<relay_store::WatchGuard>,
    pub readers: Readers,
    pub options: Options,
    pub backend: Arc<dyn Backend>,
}

impl Engine {
    /// Opens the writer connection (migrating the schema) in the caller's
    /// thread, so open errors reach the caller, then starts the writer.
    pub(crate) fn start(backend: Arc<dyn Backend>, options: Options) -> Result<Self> {
        options.validate()?;
        let store = backend.open_writer().map_err(Error::open)?;
        let (tx, rx) = flume::bounded(options.queue_capacity);
        let rx_for_thread = rx.clone();
        let (replies, answered) = flume::unbounded();
        let (recycle, recycled) = flume::bounded(4);
        let ready = Arc::new(ReadySignal::new());
        let counters = Arc::new(Counters::default());
        let deliver = Deliver {
            syncer: store.syncer(),
            durability: Arc::new({
                let backend = Arc::clone(&backend);
                let shared = backend.failure_flag();
                Durability::new(Box::new(move || backend.quarantine()), shared)
            }),
            counters: Arc::clone(&counters),
            ready: Arc::clone(&ready),
            finished: Arc::default(),
            sync_turn: Arc::default(),
        };
        let reply_ready = Arc::clone(&ready);
        let replier = spawn("relay-replier", move || {
            writer::reply_loop(answered, recycle, reply_ready)
        })?;
        // A split commit adds a stage: writer -> fsync -> replies.
        let (replies, syncer_thread) = if deliver.syncer.is_some() {
            let (to_sync, from_writer) = flume::unbounded();
            let d = deliver.clone();
            let thread = spawn("relay-syncer", move || writer::sync_loop(from_writer, replies, d))?;
            (to_sync, Some(thread))
        } else {
            (replies, None)
        };
        let writer = Writer {
            path: writer::CommitPath::of(store.as_ref(), deliver.syncer.as_ref()),
            behaviour: store.behaviour(),
            store,
            deliver: deliver.clone(),
            rx,
            options: options.clone(),
            replies: Some(replies),
            recycled,
            corrupt_reported: std::collections::HashSet::new(),
            rng: fastrand::Rng::new(),
            batch: Vec::with_capacity(options.max_batch),
            housekeeping: Arc::default(),
            held: Arc::default(),
        };
        let reap_interval = options.reap_interval;
        let mut extra = Vec::new();
        for i in 1..backend.writers().max(1) {
            // More writers on the same queue (see `Backend::writers`).
            let w = writer.sibling(backend.open_writer().map_err(Error::open)?);
            let w = Arc::new(Mutex::new(w));
            let (thread_writer, thread_rx, thread_deliver) = (Arc::clone(&w), rx_for_thread.clone(), deliver.clone());
            let handle = spawn(&format!("relay-writer-{}", i + 1), move || {
                writer::run(&thread_writer, &thread_rx, &thread_deliver, reap_interval)
            })?;
            extra.push((w, handle));
        }
        let writer = Arc::new(Mutex::new(writer));
        let (thread_writer, thread_rx, thread_deliver) = (Arc::clone(&writer), rx_for_thread, deliver.clone());
        let handle = spawn("relay-writer", move || {
            writer::run(&thread_writer, &thread_rx, &thread_deliver, reap_interval)
        })?;
        let readers = Readers::new(Arc::clone(&backend), Arc::clone(&deliver.durability));
        let others_ready = Arc::clone(&ready);
        let watch = backend
            .watch_ready(Box::new(move || others_ready.notify()))
            .map_err(Error::open)?;
        Ok(Self {
            tx: Some(tx),
            core: Some(writer),
            extra,
            deliver,
            in_flight: AtomicUsize::new(0),
            writer: Some(handle),
            syncer: syncer_thread,
            replier: Some(replier),
            _watch: watch,
            readers,
            options,
            backend,
        })
    }

    /// Whether the writer can write (see `Relay::health`).
    pub(crate) fn health(&self) -> metrics::Health {
        let stopped = self.deliver.durability.failure();
        let failure = self.deliver.counters.failure().or_else(|| {
            stopped.as_ref().map(|e| metrics::WriteFailure {
                error: durable::stopped(e).to_string(),
                at: self.options.clock.now(),
            })
        });
        metrics::Health {
            ok: stopped.is_none() && failure.is_none(),
            stopped: stopped.is_some(),
            failure,
        }
    }

    /// Holds the writer until the returned guard is dropped: operations
    /// sent meanwhile wait, in order, and are then applied as one batch.
    pub(crate) fn hold_writer(&self) -> Option<WriterHold> {
        let mut cores = vec![Arc::clone(self.core.as_ref()?)];
        cores.extend(self.extra.iter().map(|(w, _)| Arc::clone(w)));
        let (locked, is_locked) = flume::bounded::<()>(1);
        let (release, released) = flume::bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("relay-writer-hold".into())
            .spawn(move || {
                let _held: Vec<_> = cores
                    .iter()
                    .map(|c| c.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
                    .collect();
                let _ = locked.send(());
                let _ = released.recv();
            })
            .ok()?;
        is_locked.recv().ok()?;
        Some(WriterHold {
            release: Some(release),
            thread: Some(thread),
        })
    }

    fn sender(&self) -> Result<&flume::Sender<Box<dyn Operation>>> {
        self.tx.as_ref().ok_or(Error::Closed)
    }

    /// Sends and waits for the commit that carries the operation. When the
    /// writer is idle and nothing waits, the caller's thread commits the
    /// operation itself (with anything that arrives meanwhile): no wake-up
    /// of the writer thread, none back. Measured at 1x1: see BENCHMARKS.md.
    pub(crate) fn run<T>(&self, p: Pending<T>) -> Result<T> {
        let _span = call_span(p.op.hint()).entered();
        let tx = self.sender()?;
        let _busy = InFlight::enter(&self.in_flight);
        // Only when this is the one operation in flight: under concurrency
        // the writer thread's batches are what make commits cheap.
        let alone = _busy.was_alone() && tx.is_empty();
        if let Some(core) = self.core.as_ref().filter(|_| alone) {
            let held = match core.try_lock() {
                Ok(w) => Some(w),
                Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some(mut writer) = held.filter(|w| w.store.caller_may_commit()) {
                let inline = writer.process(Some(p.op));
                drop(writer);
                self.deliver.counters.ran_in_caller();
                if let Some(done) = inline {
                    done.finish(&self.deliver);
                }
                return p.rx.recv().map_err(|_| Error::Closed)?;
            }
        }
        tx.send(p.op).map_err(|_| Error::Closed)?;
        p.rx.recv().map_err(|_| Error::Closed)?
    }

    /// Runs one operation inside a transaction the caller holds open on
    /// `store` (see `writer::within`), answering it at once.
    pub(crate) fn run_within<T>(&self, store: &mut dyn relay_store::Store, p: Pending<T>) -> Result<T> {
        let _ = writer::within(store, p.op, &self.options, &self.deliver.durability);
        p.rx.try_recv().map_err(|_| Error::Closed)?
    }

    pub(crate) async fn run_async<T>(&self, p: Pending<T>) -> Result<T> {
        use tracing::Instrument;
        let span = call_span(p.op.hint());
        async {
            let _busy = InFlight::enter(&self.in_flight);
            self.sender()?.send_async(p.op).await.map_err(|_| Error::Closed)?;
            p.rx.recv_async().await.map_err(|_| Error::Closed)?
        }
        .instrument(span)
        .await
    }
}

/// Keeps the writer held (see `Engine::hold_writer`) until dropped.
pub struct WriterHold {
    release: Option<flume::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for WriterHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHold").finish_non_exhaustive()
    }
}

impl Drop for WriterHold {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Counts an operation in flight for as long as it lives.
struct InFlight<'a> {
    count: &'a AtomicUsize,
    before: usize,
}

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        let before = count.fetch_add(1, Ordering::SeqCst);
        Self { count, before }
    }

    fn was_alone(&self) -> bool {
        self.before == 0
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::resources(format!("the {name} thread"), e))
}

impl Drop for Engine {
    /// Closes the channel; the writer finishes what was sent, then stops.
    fn drop(&mut self) {
        self.readers.close();
        self.tx = None;
        // The writer thread lets go of the next stage's channel when it
        // stops: the stages then drain and stop in turn.
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
        let extra = std::mem::take(&mut self.extra);
        let mut cores = Vec::with_capacity(extra.len());
        for (core, h) in extra {
            let _ = h.join();
            cores.push(core);
        }
        // Each stage's end closes the next one's channel: it drains it and stops.
        if let Some(h) = self.syncer.take() {
            let _ = h.join();
        }
        if let Some(h) = self.replier.take() {
            let _ = h.join();
        }
        // Only now does the writer's connection close: the last fsyncs ran
        // on a WAL that closing the last connection may checkpoint and
        // delete. On a thread of its own, as the readers: a driver may
        // block while closing, which must not happen on an async executor.
        for core in self.core.take().into_iter().chain(cores) {
            readers::close_off_thread(core);
        }
    }
}
