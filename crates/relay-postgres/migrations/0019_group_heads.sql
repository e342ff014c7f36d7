-- Relay schema, version 19: the claim of grouped jobs reads each group's
-- head (its first READY job of a class) from a table of heads, one row a
-- group, rather than every grouped READY job. A group at its
-- max_leased_per_group is then passed over in one row however long its
-- line, so the claim's cost no longer grows with the jobs of groups at
-- their limit; the rest of a group's line is read by relay_jobs_group_turn
-- as the claim takes its jobs (sql/job_group_next.sql).
--
-- How the heads stay right with many writers (docs/ARCHITECTURE.md,
-- "Groups in the claim"): a transaction that changes which jobs of a
-- group are READY notes the group (relay_heads_note: a job entering READY
-- by the turn trigger, whatever writes it; one leaving READY by the Relay
-- batch that takes it out), and when it commits (a deferred constraint
-- trigger) it takes the noted groups'
-- advisory locks, all in one order, and then reads each group's first
-- READY job afresh and writes it into relay_group_heads. The locks are
-- taken at the commit only, after every other lock the transaction holds,
-- and nothing is waited for while they are held but the locks after them
-- in that order: no two transactions ever wait for each other in a circle.
-- The later of two transactions that change one group reads after the
-- earlier committed, so the last to commit leaves the group's head as it
-- is. No job row is locked or written for a head: the triggers only read
-- relay_jobs.
CREATE TABLE IF NOT EXISTS relay_group_heads (
    queue    TEXT   NOT NULL,
    priority BIGINT NOT NULL,
    grp      TEXT   NOT NULL,
    -- The head's turn and id: the claim's order and its pages' keyset.
    turn     BIGINT NOT NULL,
    job      BIGINT NOT NULL,
    PRIMARY KEY (queue, priority, grp)
);
-- The claim of grouped jobs: the heads of a class in turn order, one seek
-- however many groups and jobs there are.
CREATE INDEX IF NOT EXISTS relay_group_heads_turn ON relay_group_heads (queue, priority, turn, job);

-- The claim no longer reads every grouped READY job in turn order.
DROP INDEX IF EXISTS relay_jobs_fair;
DROP INDEX IF EXISTS relay_jobs_group_turn;
-- Made again last (below): the planner breaks ties between indexes by
-- their age, and this one, whose first column is only the queue, must lose
-- them (the triggers' plans are generic, made once per connection, often
-- while the table is empty and every index looks alike).
DROP INDEX IF EXISTS relay_jobs_group_wait;
-- A group's line in a class, in turn order: its head, the claim's reads
-- past a head another transaction holds and of the line behind a head it
-- took, and the group's last turn (the next job of the group that becomes
-- READY in it).
CREATE INDEX relay_jobs_group_turn ON relay_jobs (queue, priority, grp, turn, id)
    WHERE state = 'READY' AND grp IS NOT NULL;
CREATE INDEX relay_jobs_group_wait ON relay_jobs (queue, ready_at)
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NOT NULL;

-- The heads of the READY jobs there are now.
DELETE FROM relay_group_heads;
INSERT INTO relay_group_heads (queue, priority, grp, turn, job)
SELECT DISTINCT ON (queue, priority, grp) queue, priority, grp, COALESCE(turn, 0), id
FROM relay_jobs
WHERE state = 'READY' AND grp IS NOT NULL
ORDER BY queue, priority, grp, turn, id;

-- A group's advisory lock (key space 'RHGD', then the group's hash; groups
-- sharing a hash only wait for each other).
CREATE OR REPLACE FUNCTION relay_group_lock_key(queue TEXT, priority BIGINT, grp TEXT) RETURNS INTEGER
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext(queue || chr(1) || priority::TEXT || chr(1) || grp) $$;

-- A row for each transaction that noted a group, until its commit: its
-- deferred constraint trigger (below) sees to the noted groups then. (No
-- row lives past its transaction, so the table is unlogged and stays
-- small.)
CREATE UNLOGGED TABLE IF NOT EXISTS relay_heads_pending (n BIGINT);

-- Notes a group whose READY jobs this transaction changed, for its commit
-- (relay_heads_commit): `enter` when a job of it entered READY, else only
-- left it. Kept in transaction-local settings, so that the note goes with
-- the transaction (or the savepoint) it was made in: `relay.heads` and
-- `relay.heads_left`, the groups as JSON arrays [queue, priority, group]
-- joined by commas, and `relay.heads_seen` and `relay.heads_left_seen`,
-- their md5s, each group noted once on each list however many of its jobs
-- change (a token of fixed length between commas matches only itself).
-- The transaction's first note also writes its row of
-- relay_heads_pending, whose trigger runs at the commit.
CREATE OR REPLACE FUNCTION relay_heads_note(q TEXT, p BIGINT, g TEXT, enter BOOLEAN DEFAULT true) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    key TEXT := jsonb_build_array(q, p, g)::TEXT;
    token TEXT := md5(key);
    list TEXT := CASE WHEN enter THEN 'relay.heads' ELSE 'relay.heads_left' END;
    seen TEXT := COALESCE(current_setting(list || '_seen', true), '');
BEGIN
    IF seen = '' THEN
        IF COALESCE(current_setting('relay.heads_seen', true), '') = ''
           AND COALESCE(current_setting('relay.heads_left_seen', true), '') = '' THEN
            INSERT INTO relay_heads_pending (n) VALUES (1);
        END IF;
        PERFORM set_config(list || '_seen', ',' || token || ',', true);
        PERFORM set_config(list, key, true);
    ELSIF position(',' || token || ',' IN seen) = 0 THEN
        PERFORM set_config(list || '_seen', seen || token || ',', true);
        PERFORM set_config(list, current_setting(list) || ',' || key, true);
    END IF;
END
$$;

-- Gives the groups of `entered` and `left` (JSON arrays of [queue,
-- priority, group]: groups a job entered READY in, and groups jobs only
-- left) their heads as their READY jobs are now. The groups' locks first,
-- all in one order (their hashes): waited for where a job entered READY,
-- only tried where jobs only left. Then, for each group whose lock it has,
-- a statement of its own (a new snapshot, which sees every transaction
-- that changed the group and committed before the lock was had) reads
-- the group's first READY job and writes it into relay_group_heads, or
-- deletes the group's row when it has none.
--
-- Why a group that jobs only left may be passed over: the transaction
-- holding its lock is committing a change to it and writes its head from
-- a snapshot without this transaction's change, so the head it leaves may
-- be a job this one took, or the group may be left a row with no READY
-- job. Neither misleads the claim, which takes each group's first READY
-- job whatever the head says (a row with none is a key-only row, which
-- the claim notes for its own commit to delete). A group a job entered
-- must not be passed over: the holder may have seen it empty and deleted
-- its row, and the job would never be claimed. So lease batches never wait
-- for one another at their commits (they only take jobs out); batches
-- that make jobs READY wait for the batches committing the same groups.
CREATE OR REPLACE FUNCTION relay_heads_fix(entered JSONB, left_only JSONB DEFAULT '[]') RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    l RECORD;
    k RECORD;
    t BIGINT;
    i BIGINT;
    held INTEGER[] := '{}';
    many BOOLEAN := jsonb_array_length(entered) + jsonb_array_length(left_only) > 256;
BEGIN
    -- Every fix holds one lock over all groups: shared, or exclusive for a
    -- transaction that changed more than 256 groups (a bulk submit), which
    -- then takes no lock a group. (A lock a group for thousands of groups
    -- would fill the server's lock table, max_locks_per_transaction times
    -- max_connections entries.) Taken first, before any group's, by every
    -- fix, so it adds no wait in a circle.
    IF many THEN
        PERFORM pg_advisory_xact_lock(1380468549, 0);
    ELSE
        PERFORM pg_advisory_xact_lock_shared(1380468549, 0);
    END IF;
    FOR l IN
        SELECT relay_group_lock_key(e->>0, (e->>1)::BIGINT, e->>2) AS h, bool_or(w) AS wait
        FROM (SELECT e, true AS w FROM jsonb_array_elements(entered) AS e
              UNION ALL
              SELECT e, false FROM jsonb_array_elements(left_only) AS e) AS x
        GROUP BY 1
        ORDER BY 1
    LOOP
        EXIT WHEN many;
        IF l.wait THEN
            PERFORM pg_advisory_xact_lock(1380468548, l.h);
            held := held || l.h;
        ELSIF pg_try_advisory_xact_lock(1380468548, l.h) THEN
            held := held || l.h;
        END IF;
    END LOOP;
    -- A group at a time, each statement a seek of relay_jobs_group_turn
    -- (planned alone: joined to the keys, the planner once read the
    -- whole class's line for each group).
    FOR k IN SELECT DISTINCT e->>0 AS queue, (e->>1)::BIGINT AS priority, e->>2 AS grp
             FROM (SELECT e FROM jsonb_array_elements(entered) AS e
                   UNION ALL
                   SELECT e FROM jsonb_array_elements(left_only) AS e) AS x
    LOOP
        CONTINUE WHEN NOT many AND NOT relay_group_lock_key(k.queue, k.priority, k.grp) = ANY(held);
        i := NULL;
        SELECT j.turn, j.id INTO t, i FROM relay_jobs j
        WHERE j.state = 'READY' AND j.grp IS NOT NULL AND j.queue = k.queue AND j.priority = k.priority
          AND j.grp = k.grp
        ORDER BY j.turn, j.id LIMIT 1;
        IF i IS NULL THEN
            -- Only where this statement's snapshot is fresh: a REPEATABLE
            -- READ or SERIALIZABLE caller reads as of its start, and may
            -- not see a job that entered READY since (a row left behind is
            -- harmless; a group with READY jobs and no row is not). Its
            -- upsert below may fail with 40001 when another transaction
            -- changed the group's row since it began: the caller retries,
            -- as at those levels it must.
            IF current_setting('transaction_isolation') = 'read committed' THEN
                DELETE FROM relay_group_heads h WHERE h.queue = k.queue AND h.priority = k.priority AND h.grp = k.grp;
            END IF;
        ELSE
            INSERT INTO relay_group_heads AS h (queue, priority, grp, turn, job)
            VALUES (k.queue, k.priority, k.grp, COALESCE(t, 0), i)
            ON CONFLICT (queue, priority, grp) DO UPDATE SET turn = EXCLUDED.turn, job = EXCLUDED.job
            WHERE (h.turn, h.job) IS DISTINCT FROM (EXCLUDED.turn, EXCLUDED.job);
        END IF;
    END LOOP;
END
$$;

-- At the commit of a transaction that noted groups (the deferred trigger
-- of its relay_heads_pending row): the groups' heads seen to, the notes
-- and the row cleared (a note made after this, by another deferred
-- trigger, writes a row of its own, whose trigger runs in turn).
CREATE OR REPLACE FUNCTION relay_heads_commit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    entered TEXT := COALESCE(current_setting('relay.heads', true), '');
    left_only TEXT := COALESCE(current_setting('relay.heads_left', true), '');
BEGIN
    PERFORM set_config('relay.heads', '', true);
    PERFORM set_config('relay.heads_seen', '', true);
    PERFORM set_config('relay.heads_left', '', true);
    PERFORM set_config('relay.heads_left_seen', '', true);
    DELETE FROM relay_heads_pending WHERE ctid = NEW.ctid;
    IF entered <> '' OR left_only <> '' THEN
        PERFORM relay_heads_fix(('[' || entered || ']')::JSONB, ('[' || left_only || ']')::JSONB);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS relay_heads_pending_commit ON relay_heads_pending;
CREATE CONSTRAINT TRIGGER relay_heads_pending_commit AFTER INSERT ON relay_heads_pending
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION relay_heads_commit();

-- A grouped job that becomes READY takes its turn (as in version 17: one
-- after its group's last READY job of its class, never before the class's
-- front, which the heads give) and notes its group.
CREATE OR REPLACE FUNCTION relay_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    last BIGINT;
    front BIGINT;
BEGIN
    SELECT turn INTO last FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
      AND grp = NEW.grp AND id <> NEW.id
    ORDER BY turn DESC, id DESC LIMIT 1;
    SELECT turn INTO front FROM relay_group_heads
    WHERE queue = NEW.queue AND priority = NEW.priority
    ORDER BY turn, job LIMIT 1;
    NEW.turn := GREATEST(last + 1, front, 0);
    PERFORM relay_heads_note(NEW.queue, NEW.priority, NEW.grp);
    RETURN NEW;
END
$$;

-- The groups whose READY jobs a Relay batch takes out (leased, cancelled,
-- made to wait, deleted; one may be its group's head), and those whose
-- head a claim found with no READY job left: noted by the batch itself
-- (sql/apply_heads.sql), which knows them from the rows it read. Not by a
-- trigger: a statement trigger over the transition tables cost 0.76x
-- lease+ACK on jobs without groups, and a row trigger whose WHEN passes
-- them over 0.87x (docs/BENCHMARKS.md, "Group heads"). A head left
-- behind by another program's change is never wrong for the claim, which
-- takes each group's first READY job whatever the head says; it only
-- orders the group by an older turn until a claim finds it empty, or the
-- group's next change, puts it right.
CREATE OR REPLACE FUNCTION relay_heads_note_all(q TEXT[], p BIGINT[], g TEXT[]) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    seen TEXT := COALESCE(current_setting('relay.heads_left_seen', true), '');
    keys TEXT;
    tokens TEXT;
    n BIGINT;
BEGIN
    -- All at once (a note a group cost a batch of 64 some 0.6 ms): the
    -- groups not noted yet, their keys and tokens appended in one go.
    SELECT string_agg(x.key, ','), string_agg(x.token, ','), count(*) INTO keys, tokens, n
    FROM (SELECT DISTINCT y.key, md5(y.key) AS token
          FROM (SELECT jsonb_build_array(k.q, k.p, k.g)::TEXT AS key FROM unnest(q, p, g) AS k(q, p, g)) AS y) AS x
    WHERE position(',' || x.token || ',' IN seen) = 0;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    IF seen = '' THEN
        IF COALESCE(current_setting('relay.heads_seen', true), '') = '' THEN
            INSERT INTO relay_heads_pending (n) VALUES (1);
        END IF;
        PERFORM set_config('relay.heads_left_seen', ',' || tokens || ',', true);
        PERFORM set_config('relay.heads_left', keys, true);
    ELSE
        PERFORM set_config('relay.heads_left_seen', seen || tokens || ',', true);
        PERFORM set_config('relay.heads_left',
            CASE WHEN COALESCE(current_setting('relay.heads_left', true), '') = '' THEN keys
                 ELSE current_setting('relay.heads_left') || ',' || keys END, true);
    END IF;
    RETURN n;
END
$$;

-- TRUNCATE relay_jobs leaves no head.
CREATE OR REPLACE FUNCTION relay_heads_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM relay_group_heads;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_heads_truncate ON relay_jobs;
CREATE TRIGGER relay_jobs_heads_truncate AFTER TRUNCATE ON relay_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION relay_heads_truncate();
