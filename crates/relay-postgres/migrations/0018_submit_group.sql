-- relay_submit takes a group (`p_group`, the last argument): the function
-- is made anew from functions.sql after this migration. The old signature
-- goes first: beside a new one with one more defaulted argument, every call
-- that leaves the defaults out would match both ("is not unique").
DROP FUNCTION IF EXISTS relay_submit(TEXT, TEXT, BYTEA, INT, BIGINT, INT, TEXT, BIGINT, BIGINT, TEXT);
