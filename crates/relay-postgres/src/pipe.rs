//! The writer's connection: tokio-postgres on a runtime of its own, so that
//! the statements of one step of a batch go to the server in one flight
//! (pipelined) and cost one round trip, not one each.
//!
//! tokio-postgres sends a request when its future is first polled, and
//! the server answers requests in the order it got them. [`Pipe::run`]
//! polls each future once, in order, before waiting for any: the order on
//! the wire is the order given. A `BEGIN` the transaction still owes goes
//! first, in the same flight as the batch's first reads.

use crate::connect::map_err;
use relay_store::StoreError;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

/// One pipelined request's answer.
pub(crate) enum Answer {
    Rows(Vec<Row>),
    /// A simple statement ran.
    Done,
}

/// One request of a flight.
pub(crate) enum Req<'a> {
    Read(&'a Statement, Vec<&'a (dyn ToSql + Sync)>),
    /// A statement that writes (and returns rows, like any query).
    Write(&'a Statement, Vec<&'a (dyn ToSql + Sync)>),
    /// Statements without parameters (the simple protocol).
    Simple(&'a str),
}

type Fut<'a> = Pin<Box<dyn Future<Output = Result<Answer, tokio_postgres::Error>> + 'a>>;

pub(crate) struct Pipe {
    rt: tokio::runtime::Runtime,
    client: Client,
    /// Prepared statements by the address and length of their text: the
    /// texts are static, and hashing them whole (a kilobyte or more, some
    /// twenty per batch) was 3.5% of a writer's time (perf, 1x1).
    stmts: HashMap<(usize, usize), Statement>,
    /// `BEGIN` is owed: sent with the transaction's first request.
    begin_owed: bool,
}

impl Pipe {
    pub(crate) fn connect(url: &str) -> Result<Self, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io {
                message: "cannot start the PostgreSQL writer's runtime".into(),
                source: Box::new(e),
            })?;
        let (client, connection) = rt
            .block_on(tokio_postgres::connect(url, NoTls))
            .map_err(|e| StoreError::Io {
                message: format!(
                    "cannot connect to PostgreSQL at {}: {} ({})",
                    crate::connect::redact(url),
                    crate::connect::with_causes(&e),
                    crate::connect::connect_hint(&e)
                ),
                source: Box::new(e),
            })?;
        // Driven whenever the writer waits on the runtime (every request).
        rt.spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "the PostgreSQL connection of the writer closed");
            }
        });
        Ok(Self {
            rt,
            client,
            stmts: HashMap::new(),
            begin_owed: false,
        })
    }

    /// The connection is known to be closed. The connection task runs only
    /// while the writer waits on the runtime, so it is first given a turn
    /// to read what arrived meanwhile (a server that ended the session
    /// says so before it closes): a batch then starts on a new connection
    /// instead of failing on the dead one.
    pub(crate) fn is_closed(&self) -> bool {
        self.rt.block_on(tokio::task::yield_now());
        self.client.is_closed()
    }

    /// The prepared statement for `sql` (prepared once per connection).
    pub(crate) fn stmt(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(s) = self.stmts.get(&key) {
            return Ok(s.clone());
        }
        let s = self.rt.block_on(self.client.prepare(sql)).map_err(|e| self.error(e))?;
        self.stmts.insert(key, s.clone());
        Ok(s)
    }

    /// The transaction starts with the next request.
    pub(crate) fn begin(&mut self) {
        self.begin_owed = true;
    }

    /// A driver error as a store error. A connection that is gone is
    /// `Busy`: the server rolls back a transaction whose session ended
    /// before its `COMMIT` arrived, so nothing of the batch was applied,
    /// and the writer plans it again on a new connection. (Where the
    /// `COMMIT` itself was sent, `PgStore::apply_commit` answers "maybe
    /// applied" instead.)
    pub(crate) fn error(&self, e: tokio_postgres::Error) -> StoreError {
        if e.is_closed() {
            StoreError::Busy
        } else {
            map_err(e)
        }
    }

    /// No request of the transaction has reached the server yet.
    pub(crate) fn nothing_sent(&self) -> bool {
        self.begin_owed
    }

    /// Runs one statement on its own, outside any transaction (autocommit:
    /// atomic by itself), in place of the owed transaction.
    pub(crate) fn autocommit(
        &mut self,
        st: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.begin_owed = false;
        self.rt.block_on(self.client.query(st, params))
    }

    /// Sends an owed `BEGIN` now, alone: before a write made as a query.
    pub(crate) fn begin_now(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.begin_owed) {
            self.simple("BEGIN")?;
        }
        Ok(())
    }

    /// Ends the transaction the way `sql` says (`COMMIT`, `ROLLBACK`,
    /// possibly after other simple statements); nothing to send when it
    /// never started on the server.
    pub(crate) fn finish(&mut self, sql: &str) -> Result<(), StoreError> {
        if std::mem::take(&mut self.begin_owed) {
            return Ok(());
        }
        self.simple(sql)
    }

    /// A statement without parameters, outside any flight.
    pub(crate) fn simple(&mut self, sql: &str) -> Result<(), StoreError> {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .map_err(|e| self.error(e))
    }

    /// Sends the owed `BEGIN` (if any) and `reqs` in one flight; returns
    /// each request's answer, or the first error.
    ///
    /// Writes never share a flight with the `BEGIN`: were it to fail, they
    /// would run (and commit) one by one outside the transaction. `BEGIN`
    /// then goes alone first.
    pub(crate) fn run(&mut self, reqs: Vec<Req<'_>>) -> Result<Vec<Answer>, StoreError> {
        let answers = self.run_all(reqs)?;
        let mut out = Vec::with_capacity(answers.len());
        for a in answers {
            out.push(a.map_err(|e| self.error(e))?);
        }
        Ok(out)
    }

    /// [`Pipe::run`], with every request's own result (a request after a
    /// failed one in a transaction fails too, and a `COMMIT` then rolls
    /// back). Only a failure to send the owed `BEGIN` is an error here.
    pub(crate) fn run_all(
        &mut self,
        reqs: Vec<Req<'_>>,
    ) -> Result<Vec<Result<Answer, tokio_postgres::Error>>, StoreError> {
        let writes = reqs.iter().any(|r| !matches!(r, Req::Read(..)));
        if self.begin_owed && writes {
            self.begin_owed = false;
            self.simple("BEGIN")?;
        }
        let begin = std::mem::take(&mut self.begin_owed);
        let client = &self.client;
        let mut futs: Vec<Fut<'_>> = Vec::with_capacity(reqs.len() + 1);
        if begin {
            futs.push(Box::pin(async move {
                client.batch_execute("BEGIN").await.map(|()| Answer::Done)
            }));
        }
        futs.extend(reqs.into_iter().map(|r| send(client, r)));
        let mut answers = self.rt.block_on(in_order(futs));
        if begin {
            let first = answers.remove(0);
            first.map_err(|e| self.error(e))?;
        }
        Ok(answers)
    }

    /// `BEGIN`, then `reqs` (which end the transaction), all in one
    /// flight, writes included; each request's answer after `BEGIN`'s.
    ///
    /// Only for a flight whose writes are each right on their own should
    /// they run outside the transaction (see [`Pipe::run`]): a `BEGIN` that
    /// fails while the session goes on is one sent inside an aborted
    /// transaction, where every statement after it fails too; any other
    /// failure ends the session, and nothing after it runs.
    pub(crate) fn transaction(&mut self, reqs: Vec<Req<'_>>) -> Vec<Result<Answer, tokio_postgres::Error>> {
        self.begin_owed = false;
        let client = &self.client;
        let futs: Vec<Fut<'_>> = std::iter::once(Req::Simple("BEGIN"))
            .chain(reqs)
            .map(|r| send(client, r))
            .collect();
        self.rt.block_on(in_order(futs))
    }

    /// One request, in its own flight (with an owed `BEGIN`).
    pub(crate) fn query(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        let st = self.stmt(sql)?;
        match self.run(vec![Req::Read(&st, params.to_vec())])?.pop() {
            Some(Answer::Rows(rows)) => Ok(rows),
            _ => Ok(Vec::new()),
        }
    }
}

/// A request as the future that sends it (when first polled) and reads
/// its answer.
fn send<'a>(client: &'a Client, r: Req<'a>) -> Fut<'a> {
    match r {
        Req::Read(st, params) | Req::Write(st, params) => {
            Box::pin(async move { client.query(st, &params).await.map(Answer::Rows) })
        }
        Req::Simple(sql) => Box::pin(async move { client.batch_execute(sql).await.map(|()| Answer::Done) }),
    }
}

/// Polls every future once, in order (each sends its request), then waits
/// for each answer. A request that fails on its first poll never reached
/// the server (it could not be encoded): nothing after it is sent, so a
/// `COMMIT` behind a write that was never sent is never sent either. The
/// answers stop at that request's error.
async fn in_order<'a>(mut futs: Vec<Fut<'a>>) -> Vec<Result<Answer, tokio_postgres::Error>> {
    let mut done: Vec<Option<Result<Answer, tokio_postgres::Error>>> = Vec::with_capacity(futs.len());
    for f in &mut futs {
        let first = std::future::poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await;
        let unsent = matches!(first, Poll::Ready(Err(_)));
        done.push(match first {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        });
        if unsent {
            break;
        }
    }
    let mut out = Vec::with_capacity(done.len());
    for (f, d) in futs.into_iter().zip(done) {
        out.push(match d {
            Some(r) => r,
            None => f.await,
        });
    }
    out
}

/// The server refused the request, and the session goes on: the statement
/// (and the transaction it was in) changed nothing. A FATAL or PANIC (the
/// session ends: a shutdown, `pg_terminate_backend`) says nothing of a
/// COMMIT the server may have finished first.
pub(crate) fn refused(e: &tokio_postgres::Error) -> bool {
    e.as_db_error()
        .is_some_and(|d| d.parsed_severity() == Some(tokio_postgres::error::Severity::Error))
}
