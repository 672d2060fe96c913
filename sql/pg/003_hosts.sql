-- Version 3. What `ferry status` shows of a shared job's hosts
-- (src/manifest_pg/status.c): a host is one run of ferry (its name is
-- hostname:pid).
--
-- lease_s: the host's --lease; a host not seen for that long, that did
--   not leave, is gone (killed, cut off): its claims return to the pool.
-- left_at, result: the run ended (its exit code); NULL while it runs, and
--   for a host that died.
-- files_done, bytes_done: what its claims completed (done rows), counted
--   in the transaction that marks them.
-- mark_*, prev_*: at each renewal (a third of a lease) the counts move to
--   mark_* and mark_* to prev_*: status's rate is what was done since
--   prev_at, on the server's clock.
ALTER TABLE hosts ADD COLUMN lease_s integer NOT NULL DEFAULT 60;
ALTER TABLE hosts ADD COLUMN left_at timestamptz;
ALTER TABLE hosts ADD COLUMN result smallint;
ALTER TABLE hosts ADD COLUMN files_done bigint NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN bytes_done bigint NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN mark_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE hosts ADD COLUMN mark_files bigint NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN mark_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN prev_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE hosts ADD COLUMN prev_files bigint NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN prev_bytes bigint NOT NULL DEFAULT 0;
-- The rows a host holds (claimed, not completed nor given back): small,
-- whatever the size of the job, so that status counts them at once.
CREATE INDEX files_held ON files (job, claimed_by)
    WHERE state = 0 AND lease_until IS NOT NULL;
CREATE INDEX dirs_held ON dirs (job, claimed_by)
    WHERE lease_until IS NOT NULL AND (list_state = 0 OR state = 0);
