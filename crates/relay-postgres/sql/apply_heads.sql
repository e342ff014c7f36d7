-- Last of a batch's writes when it took grouped jobs out of READY or holds
-- READY ones that are not heads ($1: Changes::held_ready): each of their
-- groups is given a head if it has none (migrations/0018_group_heads.sql,
-- relay_heads_for).
SELECT relay_heads_for($1::BIGINT[])
