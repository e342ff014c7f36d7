-- First of a batch's writes when it takes grouped jobs out of READY or a
-- claim found a group's head without a job: the groups ($1, $2, $3:
-- queue, priority, group), and those of the READY jobs it takes out
-- without having read their rows ($4), noted for the commit, which gives
-- each its head as its jobs then are (migrations/0019_group_heads.sql).
-- Returns how many were noted. (The jobs are read by their ids, filtered
-- outside: with the filter beside the ids, a generic plan read the whole
-- of relay_jobs_group_turn, whose predicate it implies.)
WITH k AS (
    SELECT q, p, g FROM unnest($1::TEXT[], $2::BIGINT[], $3::TEXT[]) AS k(q, p, g)
    UNION ALL
    SELECT j.queue, j.priority, j.grp
    FROM (SELECT queue, priority, grp, state FROM relay_jobs WHERE id = ANY($4::BIGINT[]) OFFSET 0) AS j
    WHERE j.grp IS NOT NULL AND j.state = 'READY'
)
SELECT relay_heads_note_all(array_agg(q), array_agg(p), array_agg(g)) FROM k
