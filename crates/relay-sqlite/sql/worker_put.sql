-- A worker's heartbeat, written whole; ?4 set: it said it stopped then.
INSERT INTO workers (id, beat, seen_at, stopped_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (id) DO UPDATE SET beat = excluded.beat, seen_at = excluded.seen_at, stopped_at = excluded.stopped_at
