-- Every queue's settings, for stats.
SELECT name, paused FROM relay_queues ORDER BY name
