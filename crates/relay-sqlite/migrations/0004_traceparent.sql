-- Relay schema, version 4: trace propagation. The W3C trace context
-- (`traceparent`) a job was submitted in, handed to each worker that runs
-- it; NULL for a job submitted outside any trace.
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
