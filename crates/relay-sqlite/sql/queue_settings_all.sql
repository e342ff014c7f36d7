-- Every queue's settings, for stats.
SELECT name, paused FROM queues ORDER BY name
