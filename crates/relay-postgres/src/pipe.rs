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
use crate::stmt::{typed, Pooler, Stmt};
use relay_store::StoreError;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row};

/// One pipelined request's answer.
pub(crate) enum Answer {
    Rows(Vec<Row>),
    /// A simple statement ran.
    Done,
}

/// One request of a flight.
pub(crate) enum Req<'a> {
    Read(&'a Stmt, Vec<&'a (dyn ToSql + Sync)>),
    /// A statement that writes (and returns rows, like any query).
    Write(&'a Stmt, Vec<&'a (dyn ToSql + Sync)>),
    /// Statements without parameters (the simple protocol).
    Simple(&'a str),
}

type Fut<'a> = Pin<Box<dyn Future<Output = Result<Answer, tokio_postgres::Error>> + 'a>>;

pub(crate) struct Pipe {
    rt: tokio::runtime::Runtime,
    client: Client,
    /// Statements by the address and length of their text: the texts are
    /// static, and hashing them whole (a kilobyte or more, some twenty per
    /// batch) was 3.5% of a writer's time (perf, 1x1).
    stmts: HashMap<(usize, usize), Stmt>,
    /// `BEGIN` is owed: sent with the transaction's first request.
    begin_owed: bool,
    /// Behind a pooler in transaction mode (see [`Pooler`]).
    pooled: bool,
    /// What starts a transaction: `BEGIN`, or behind a pooler `BEGIN` with
    /// the session settings the writer relies on, set for the transaction.
    begin_sql: String,
    /// A transaction is open on the server (its `BEGIN` sent, its end not
    /// yet): behind a pooler, what is learnt about a statement then is
    /// learnt inside it.
    open_tx: bool,
    /// Behind a pooler: statements first met inside a transaction, run
    /// unwrapped until their functions are made before the next one (see
    /// [`Pipe::learn`]).
    unwrapped: Vec<&'static str>,
    /// Behind a pooler: statements that return rows run through functions
    /// (off where this role may not make or run them).
    wrap: bool,
}

/// `sql` ends the transaction it runs in.
fn ends_tx(sql: &str) -> bool {
    let t = sql.trim_end().trim_end_matches(';').trim_end();
    t.ends_with("COMMIT") || t.ends_with("ROLLBACK")
}

/// A connection whose driver task runs on `rt` (driven whenever the
/// writer waits on the runtime: every request).
fn open(rt: &tokio::runtime::Runtime, url: &str) -> Result<Client, StoreError> {
    let config = crate::connect::config(url)?;
    let (client, connection) = rt
        .block_on(config.connect(NoTls))
        .map_err(|e| crate::connect::cannot_connect(url, e))?;
    rt.spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the PostgreSQL connection of the writer closed");
        }
    });
    Ok(client)
}

impl Pipe {
    pub(crate) fn connect(url: &str, pooler: Pooler) -> Result<Self, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io {
                message: "cannot start the PostgreSQL writer's runtime".into(),
                source: Box::new(e),
            })?;
        let client = open(&rt, url)?;
        Ok(Self {
            rt,
            client,
            stmts: HashMap::new(),
            begin_owed: false,
            pooled: pooler == Pooler::Transaction,
            begin_sql: "BEGIN".into(),
            open_tx: false,
            unwrapped: Vec::new(),
            wrap: true,
        })
    }

    /// Behind a pooler in transaction mode: each transaction sets what the
    /// writer's session would otherwise keep (see `store::open_writer`),
    /// `synchronous_commit` as it was read at connect (`on` where it was
    /// `off`), since a server session may come from the pool with another
    /// client's `SET` on it.
    pub(crate) fn pin_settings(&mut self, synchronous_commit: &str) {
        self.begin_sql = format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL synchronous_commit = {synchronous_commit}"
        );
    }

    pub(crate) fn pooled(&self) -> bool {
        self.pooled
    }

    /// A setting's value, by the simple protocol (nothing prepared).
    pub(crate) fn show(&mut self, name: &'static str) -> Result<String, StoreError> {
        let messages = self
            .rt
            .block_on(self.client.simple_query(&format!("SHOW {name}")))
            .map_err(|e| self.error(e))?;
        messages
            .iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .ok_or_else(|| StoreError::corrupt(None, format!("SHOW {name} returned no row")))
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

    /// The statement for `sql`: prepared once per connection, or behind a
    /// pooler its parameter types learnt once (see `crate::stmt`).
    pub(crate) fn stmt(&mut self, sql: &'static str) -> Result<Stmt, StoreError> {
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(s) = self.stmts.get(&key) {
            return Ok(s.clone());
        }
        let s = if self.pooled {
            self.learn(sql)?
        } else {
            Stmt::Prepared(self.rt.block_on(self.client.prepare(sql)).map_err(|e| self.error(e))?)
        };
        self.stmts.insert(key, s.clone());
        Ok(s)
    }

    /// Behind a pooler: `sql` as an unnamed statement, its parameter types
    /// learnt by preparing it and closing it again inside one transaction
    /// (the batch's own, or one of its own when none is open), so the
    /// pooled session keeps nothing. A statement that returns rows runs
    /// through its function (see `crate::stmt`), made here if no Relay made
    /// it yet, under a lock on its name (two Relays starting at once make
    /// it once). Inside a batch's transaction the function is only looked
    /// for, never made (were the batch rolled back, it would be gone):
    /// the statement then runs unwrapped until [`Pipe::wrap_unwrapped`],
    /// before the next batch, makes it.
    fn learn(&mut self, sql: &'static str) -> Result<Stmt, StoreError> {
        let in_tx = self.open_tx;
        let client = &self.client;
        let (begin, wrap) = (self.begin_sql.as_str(), self.wrap);
        let learnt = self.rt.block_on(async {
            if in_tx {
                return describe(client, sql, false, wrap).await.map(|(st, wrapped)| (st, !wrapped));
            }
            // The settings of every transaction (a function made here is
            // committed as durably as the batches that call it).
            let mut make = wrap;
            loop {
                client.batch_execute(begin).await?;
                let made = describe(client, sql, make, wrap && make).await;
                let end = client.batch_execute(if made.is_ok() { "COMMIT" } else { "ROLLBACK" }).await;
                match made {
                    Ok((st, _)) => return end.map(|()| (st, false)),
                    // A role that may not create functions, or a read-only
                    // session: the statement runs unwrapped, planned at
                    // every run, and working.
                    Err(e) if make && may_not_create(&e) => {
                        tracing::warn!(error = %crate::connect::with_causes(&e), "cannot make the function of a statement; it runs unwrapped, planned at every run");
                        make = false;
                    }
                    Err(e) => return Err(e),
                }
            }
        });
        let (stmt, later) = learnt.map_err(|e| self.error(e))?;
        if later {
            self.unwrapped.push(sql);
        }
        Ok(stmt)
    }

    /// Makes the functions of the statements first met inside a
    /// transaction (see [`Pipe::learn`]); called between transactions.
    pub(crate) fn wrap_unwrapped(&mut self) -> Result<(), StoreError> {
        if self.open_tx || self.unwrapped.is_empty() {
            return Ok(());
        }
        let mut left = std::mem::take(&mut self.unwrapped);
        while let Some(sql) = left.pop() {
            match self.learn(sql) {
                Ok(stmt) => {
                    self.stmts.insert((sql.as_ptr() as usize, sql.len()), stmt);
                }
                // Tried again before the next batch; this one runs with
                // the statements as they are (a dropped connection is
                // found by the batch itself).
                Err(e) => {
                    tracing::warn!(error = %e, "cannot make a statement's function now; trying again before the next batch");
                    left.push(sql);
                    self.unwrapped.extend(left);
                    return Ok(());
                }
            }
        }
        Ok(())
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
    ///
    /// Behind a pooler it runs in a transaction of its own (`BEGIN` with
    /// the settings, the statement, `COMMIT`, in one flight): a statement
    /// on its own would run with whatever settings its pooled session has.
    pub(crate) fn autocommit(
        &mut self,
        st: &Stmt,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.begin_owed = false;
        if !self.pooled {
            return match st {
                Stmt::Prepared(s) => self.rt.block_on(self.client.query(s, params)),
                Stmt::Unnamed(sql, types) => self
                    .rt
                    .block_on(self.client.query_typed(sql.as_ref(), &typed(params, types))),
            };
        }
        let answers = self.transaction(vec![Req::Write(st, params.to_vec()), Req::Simple("COMMIT")]);
        // The first failure in the order sent (a refused write leaves the
        // COMMIT to roll back); else the write's rows, after `BEGIN`'s answer.
        let mut rows = Vec::new();
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Err(e) => return Err(e),
                Ok(Answer::Rows(r)) if i == 1 => rows = r,
                Ok(_) => {}
            }
        }
        Ok(rows)
    }

    /// Sends an owed `BEGIN` now, alone: before a write made as a query.
    pub(crate) fn begin_now(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.begin_owed) {
            let begin = std::mem::take(&mut self.begin_sql);
            let sent = self.simple(&begin);
            self.begin_sql = begin;
            sent?;
            self.open_tx = true;
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
        self.open_tx = false;
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
            self.begin_now()?;
        }
        let begin = std::mem::take(&mut self.begin_owed);
        let ends = reqs.iter().any(|r| matches!(r, Req::Simple(sql) if ends_tx(sql)));
        self.open_tx = (self.open_tx || begin) && !ends;
        let client = &self.client;
        let begin_sql = self.begin_sql.as_str();
        let mut futs: Vec<Fut<'_>> = Vec::with_capacity(reqs.len() + 1);
        if begin {
            futs.push(Box::pin(async move {
                client.batch_execute(begin_sql).await.map(|()| Answer::Done)
            }));
        }
        futs.extend(reqs.into_iter().map(|r| send(client, r)));
        let mut answers = self.rt.block_on(in_order(futs));
        self.forget_lost_functions(&answers);
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
        self.open_tx = false;
        let client = &self.client;
        let futs: Vec<Fut<'_>> = std::iter::once(Req::Simple(self.begin_sql.as_str()))
            .chain(reqs)
            .map(|r| send(client, r))
            .collect();
        let answers = self.rt.block_on(in_order(futs));
        self.forget_lost_functions(&answers);
        answers
    }

    /// Behind a pooler: a statement's function that is gone (a server
    /// restored from a backup, a failover, dropped by hand: 42883) or may
    /// not be run by this role (42501) fails every batch that calls it, so
    /// what was learnt is forgotten and learnt again at the next batch
    /// (without functions where running them was refused).
    fn forget_lost_functions(&mut self, answers: &[Result<Answer, tokio_postgres::Error>]) {
        use tokio_postgres::error::SqlState;
        if !self.pooled {
            return;
        }
        for e in answers.iter().filter_map(|a| a.as_ref().err()) {
            let Some(code) = e.code() else { continue };
            if *code == SqlState::UNDEFINED_FUNCTION || *code == SqlState::INSUFFICIENT_PRIVILEGE {
                if *code == SqlState::INSUFFICIENT_PRIVILEGE {
                    self.wrap = false;
                }
                tracing::warn!(error = %crate::connect::with_causes(e), "a statement's function failed; the writer learns its statements again");
                self.stmts.clear();
                self.unwrapped.clear();
                return;
            }
        }
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
        Req::Read(Stmt::Prepared(st), params) | Req::Write(Stmt::Prepared(st), params) => {
            Box::pin(async move { client.query(st, &params).await.map(Answer::Rows) })
        }
        Req::Read(Stmt::Unnamed(sql, types), params) | Req::Write(Stmt::Unnamed(sql, types), params) => {
            Box::pin(async move {
                client
                    .query_typed(sql.as_ref(), &typed(&params, types))
                    .await
                    .map(Answer::Rows)
            })
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

/// What [`Pipe::learn`] learns of `sql` on `client`, inside a transaction
/// already open: the statement as it will run, and whether it runs through
/// its function (or needs none: it returns no rows). `make`: the function
/// may be made here.
async fn describe(
    client: &Client,
    sql: &'static str,
    make: bool,
    wrap: bool,
) -> Result<(Stmt, bool), tokio_postgres::Error> {
    use tokio_postgres::types::Type;
    // Dropping the statement sends its Close, ahead of the transaction's end.
    let (params, columns) = {
        let st = client.prepare(sql).await?;
        let columns: Vec<Type> = st.columns().iter().map(|c| c.type_().clone()).collect();
        (st.params().to_vec(), columns)
    };
    let plain = Stmt::Unnamed(Arc::from(sql), Arc::from(params.clone()));
    if columns.is_empty() || !wrap {
        return Ok((plain, true));
    }
    let keyed = format!("{}\n{sql}", crate::connect::SCHEMA_VERSION);
    let name: String = client
        .query_typed_one("SELECT 'relay_q_' || left(md5($1), 24)", &[(&keyed, Type::TEXT)])
        .await?
        .try_get(0)?;
    if make {
        client
            .query_typed("SELECT pg_advisory_xact_lock(hashtext($1))", &[(&name, Type::TEXT)])
            .await?;
    }
    let exists: bool = client
        .query_typed_one("SELECT to_regproc($1) IS NOT NULL", &[(&name, Type::TEXT)])
        .await?
        .try_get(0)?;
    if !exists && !make {
        return Ok((plain, false));
    }
    if !exists {
        client
            .batch_execute(&crate::stmt::function_sql(&name, sql, &params, &columns))
            .await?;
    }
    let call = crate::stmt::call_sql(&name, params.len());
    Ok((Stmt::Unnamed(Arc::from(call), Arc::from(params)), true))
}

/// The error says this role or session may not create a function
/// (insufficient privilege, a read-only transaction).
fn may_not_create(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code()
        .is_some_and(|c| *c == SqlState::INSUFFICIENT_PRIVILEGE || *c == SqlState::READ_ONLY_SQL_TRANSACTION)
}
