DELETE FROM schedules WHERE name = ?1
