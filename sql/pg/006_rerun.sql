-- Version 6. A shared job run again (src/shared/run.c): the same command
-- on a job that is over scans SRC again and copies what changed.
--
-- jobs.gen: the job's scan generation, 1 at first; a host that joins a
--   job with nothing left to do (no directory to list, no file pending, no
--   listed directory's metadata to apply; failures are not work left)
--   moves it to gen + 1 and puts SRC's root back on the scan queue
--   (ferry_pg_rerun). Each listing of gen g puts the subdirectories it
--   finds back on the queue (those of an older gen) and gives the rows it
--   finds gen g: a file whose stat changed (or that had vanished or was
--   removed) is pending again. A SRC whose top level changed (another
--   fingerprint) is taken by a job that is over when at least half of the
--   job's top-level names are still there (ferry_pg_job_new_src).
-- jobs.gen_started: when gen began (NULL: gen 1, the job's created): a
--   DST entry changed since may be a copy a host of this gen renamed into
--   place before it could mark it (copy.h, written_since).
-- files.dst_type, dst_size, dst_mtime_ns: what the last copy left in DST
--   (copy.c, record_dst): rule 9's record of what ferry wrote, which lets
--   the copy of a changed file replace ferry's older copy and nothing
--   else. NULL: nothing copied yet.
-- files.state 5 (removed): a row that a finished scan of gen g did not
--   see (its SRC file is gone); rows of older gens are marked so only
--   when every directory of gen g could be listed. Its DST copy stays:
--   a shared job has no --delete yet.
ALTER TABLE jobs ADD COLUMN gen bigint NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN gen_started timestamptz;
ALTER TABLE files ADD COLUMN dst_type smallint;
ALTER TABLE files ADD COLUMN dst_size bigint;
ALTER TABLE files ADD COLUMN dst_mtime_ns bigint;

-- The done rows of a job made before this version: what their copy left
-- in DST is what their row says (the copy gives a file or a symlink the
-- source's size and, unless --no-times, mtime; where it did not, a later
-- copy of a changed file is refused, not put over it). Devices and other
-- special files keep none. The counts do not change: their trigger is
-- left out of this one update of every done row.
ALTER TABLE files DISABLE TRIGGER files_count_upd;
UPDATE files SET dst_type = type, dst_size = size, dst_mtime_ns = mtime_ns
    WHERE state = 1 AND type IN (1, 2);
ALTER TABLE files ENABLE TRIGGER files_count_upd;
