-- Relay schema for PostgreSQL, version 2: a check a set-based write makes on
-- its own row count. A batch's writes and its COMMIT go to the server in one
-- flight; a write that changed fewer rows than the batch planned must abort
-- the transaction there, before the COMMIT that follows it (SQLSTATE RLY01).
CREATE FUNCTION relay_expect(got BIGINT, want BIGINT, what TEXT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
BEGIN
    IF got <> want THEN
        RAISE EXCEPTION 'relay: the batch''s % changed % rows, not %', what, got, want
            USING ERRCODE = 'RLY01';
    END IF;
    RETURN got;
END
$$;
