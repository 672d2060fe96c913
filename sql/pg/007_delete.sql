-- Version 7. --delete in a shared job (src/shared/delete.c), and the
-- indexes its statements and the end of a run need. Once a scan
-- of gen g is over and every directory of g was listed, a host run with
-- --delete claims the removed file rows (state 5), deletes each one's DST
-- copy when it is still what ferry put there (rule 9: the row's DST
-- record), and forgets the row; then the removed directories (rows of an
-- older gen), deepest first, each once no row is left below it (rmdir:
-- only an empty one goes).
--
-- files.del_tried, dirs.del_tried: the gen whose --delete could not delete
--   the row's DST entry (the error is kept); not claimed again in that
--   gen, tried again in the next. NULL: never tried.
-- A delete claim leases its rows as the other claims do (claim_token,
--   lease_until, claimed_by); a job is not over, and no new gen begins,
--   while one is live.
ALTER TABLE files ADD COLUMN del_tried bigint;
ALTER TABLE dirs ADD COLUMN del_tried bigint;

-- The removed rows a delete claim takes, in id order.
CREATE INDEX files_removed ON files (job, id) WHERE state = 5;
-- Whether a delete claim holds any (the job is not over while one does).
CREATE INDEX files_deleting ON files (job)
    WHERE state = 5 AND lease_until IS NOT NULL;
-- A directory's children: a removed directory is claimed once none is
-- left, and deleting a row checks that none refers to it.
CREATE INDEX dirs_parent ON dirs (parent);
-- A job is not over while a directory row is under a live claim (rerun.c,
-- JOB_OVER): the few rows leased now, not every one of the job's.
CREATE INDEX dirs_leased_any ON dirs (job) WHERE lease_until IS NOT NULL;
-- The removed directories of a job (an older gen than its own).
CREATE INDEX dirs_gen ON dirs (job, gen);
-- Directories listed with an error (gone from SRC at their listing, or
-- failed): a run's exit code counts those of its gen.
CREATE INDEX dirs_errors ON dirs (job, gen) WHERE error IS NOT NULL;
