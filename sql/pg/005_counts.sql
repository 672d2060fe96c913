-- Version 5. Each job's counts, kept as its rows change, so that a host's
-- progress line (about once a second) and `ferry status` read a few rows
-- instead of every row of the job (src/manifest_pg/job.c, status.c).
--
-- A statement that inserts, updates or deletes rows of files or dirs adds
-- what it changed to the row (job, slot) of its own connection (slot: its
-- backend's pid), from the rows before and after it (transition tables):
-- no statement waits for another host's, and no statement of ferry's,
-- today's or a later one's, can change a state without its count. A
-- job's count is the sum of its rows; ferry_pg_job_join folds the rows of
-- connections gone into slot 0.
--
-- files: every row but those removed from SRC (state 5, 006_rerun.sql),
--   and by state (pending, done, failed, vanished), with the sizes of
--   those and of done.
-- dirs: every row; to list (list_state 0), not listed (2), listed with
--   metadata to apply (list_state 1, state 0), metadata failed (state 2).
CREATE TABLE counts (
    job              bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
    slot             integer NOT NULL,
    files            bigint NOT NULL DEFAULT 0,
    bytes            bigint NOT NULL DEFAULT 0,
    files_pending    bigint NOT NULL DEFAULT 0,
    files_done       bigint NOT NULL DEFAULT 0,
    bytes_done       bigint NOT NULL DEFAULT 0,
    files_failed     bigint NOT NULL DEFAULT 0,
    files_vanished   bigint NOT NULL DEFAULT 0,
    dirs             bigint NOT NULL DEFAULT 0,
    dirs_to_list     bigint NOT NULL DEFAULT 0,
    dirs_list_failed bigint NOT NULL DEFAULT 0,
    dirs_to_apply    bigint NOT NULL DEFAULT 0,
    dirs_meta_failed bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (job, slot)
);

-- What a statement changed: its rows as they are now (new_rows, s = 1)
-- less its rows as they were (old_rows, s = -1), by job. Static SQL, so
-- that each connection plans it once; a job being deleted (ON DELETE
-- CASCADE) takes its counts with it, and the rows the cascade deletes
-- count nothing. PL/pgSQL, not SQL: its statements are planned once per
-- connection.
CREATE FUNCTION add_file_counts(j bigint, f numeric, b numeric,
    p numeric, d numeric, bd numeric, fl numeric, v numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(f, 0) = 0 AND coalesce(b, 0) = 0 AND coalesce(p, 0) = 0
       AND coalesce(d, 0) = 0 AND coalesce(bd, 0) = 0
       AND coalesce(fl, 0) = 0 AND coalesce(v, 0) = 0 THEN
        RETURN; -- a claim, a renewal: no count changes
    END IF;
    INSERT INTO ferry.counts AS c (job, slot, files, bytes, files_pending,
        files_done, bytes_done, files_failed, files_vanished)
    SELECT j, pg_backend_pid(), coalesce(f, 0), coalesce(b, 0),
        coalesce(p, 0), coalesce(d, 0), coalesce(bd, 0), coalesce(fl, 0),
        coalesce(v, 0)
    WHERE EXISTS (SELECT 1 FROM ferry.jobs WHERE id = j)
    ON CONFLICT (job, slot) DO UPDATE SET
        files = c.files + EXCLUDED.files,
        bytes = c.bytes + EXCLUDED.bytes,
        files_pending = c.files_pending + EXCLUDED.files_pending,
        files_done = c.files_done + EXCLUDED.files_done,
        bytes_done = c.bytes_done + EXCLUDED.bytes_done,
        files_failed = c.files_failed + EXCLUDED.files_failed,
        files_vanished = c.files_vanished + EXCLUDED.files_vanished;
END
$$;

CREATE FUNCTION add_dir_counts(j bigint, n numeric, l numeric,
    lf numeric, a numeric, mf numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(n, 0) = 0 AND coalesce(l, 0) = 0 AND coalesce(lf, 0) = 0
       AND coalesce(a, 0) = 0 AND coalesce(mf, 0) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO ferry.counts AS c (job, slot, dirs, dirs_to_list,
        dirs_list_failed, dirs_to_apply, dirs_meta_failed)
    SELECT j, pg_backend_pid(), coalesce(n, 0), coalesce(l, 0),
        coalesce(lf, 0), coalesce(a, 0), coalesce(mf, 0)
    WHERE EXISTS (SELECT 1 FROM ferry.jobs WHERE id = j)
    ON CONFLICT (job, slot) DO UPDATE SET
        dirs = c.dirs + EXCLUDED.dirs,
        dirs_to_list = c.dirs_to_list + EXCLUDED.dirs_to_list,
        dirs_list_failed = c.dirs_list_failed + EXCLUDED.dirs_list_failed,
        dirs_to_apply = c.dirs_to_apply + EXCLUDED.dirs_to_apply,
        dirs_meta_failed = c.dirs_meta_failed + EXCLUDED.dirs_meta_failed;
END
$$;

-- A FILTER over no row is NULL: the add functions take it as 0.
CREATE FUNCTION count_files() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ferry.add_file_counts(job, sum(s) FILTER (WHERE state <> 5),
            sum(s * size) FILTER (WHERE state <> 5),
            sum(s) FILTER (WHERE state = 0), sum(s) FILTER (WHERE state = 1),
            sum(s * size) FILTER (WHERE state = 1),
            sum(s) FILTER (WHERE state = 2), sum(s) FILTER (WHERE state = 4))
        FROM (SELECT 1 AS s, job, size, state FROM new_rows) x GROUP BY job;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM ferry.add_file_counts(job, sum(s) FILTER (WHERE state <> 5),
            sum(s * size) FILTER (WHERE state <> 5),
            sum(s) FILTER (WHERE state = 0), sum(s) FILTER (WHERE state = 1),
            sum(s * size) FILTER (WHERE state = 1),
            sum(s) FILTER (WHERE state = 2), sum(s) FILTER (WHERE state = 4))
        FROM (SELECT -1 AS s, job, size, state FROM old_rows) x GROUP BY job;
    ELSE
        PERFORM ferry.add_file_counts(job, sum(s) FILTER (WHERE state <> 5),
            sum(s * size) FILTER (WHERE state <> 5),
            sum(s) FILTER (WHERE state = 0), sum(s) FILTER (WHERE state = 1),
            sum(s * size) FILTER (WHERE state = 1),
            sum(s) FILTER (WHERE state = 2), sum(s) FILTER (WHERE state = 4))
        FROM (SELECT 1 AS s, job, size, state FROM new_rows UNION ALL
              SELECT -1, job, size, state FROM old_rows) x GROUP BY job;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_dirs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM ferry.add_dir_counts(job, sum(s),
            sum(s) FILTER (WHERE list_state = 0),
            sum(s) FILTER (WHERE list_state = 2),
            sum(s) FILTER (WHERE list_state = 1 AND state = 0),
            sum(s) FILTER (WHERE state = 2))
        FROM (SELECT 1 AS s, job, list_state, state FROM new_rows) x
        GROUP BY job;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM ferry.add_dir_counts(job, sum(s),
            sum(s) FILTER (WHERE list_state = 0),
            sum(s) FILTER (WHERE list_state = 2),
            sum(s) FILTER (WHERE list_state = 1 AND state = 0),
            sum(s) FILTER (WHERE state = 2))
        FROM (SELECT -1 AS s, job, list_state, state FROM old_rows) x
        GROUP BY job;
    ELSE
        PERFORM ferry.add_dir_counts(job, sum(s),
            sum(s) FILTER (WHERE list_state = 0),
            sum(s) FILTER (WHERE list_state = 2),
            sum(s) FILTER (WHERE list_state = 1 AND state = 0),
            sum(s) FILTER (WHERE state = 2))
        FROM (SELECT 1 AS s, job, list_state, state FROM new_rows UNION ALL
              SELECT -1, job, list_state, state FROM old_rows) x
        GROUP BY job;
    END IF;
    RETURN NULL;
END
$$;

-- Transition tables need one trigger per event. Made before the counts
-- of the rows already there are taken: CREATE TRIGGER locks out writers
-- until this migration commits, so no change falls between the two.
CREATE TRIGGER files_count_ins AFTER INSERT ON files
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_files();
CREATE TRIGGER files_count_upd AFTER UPDATE ON files
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_files();
CREATE TRIGGER files_count_del AFTER DELETE ON files
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_files();
CREATE TRIGGER dirs_count_ins AFTER INSERT ON dirs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_dirs();
CREATE TRIGGER dirs_count_upd AFTER UPDATE ON dirs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_dirs();
CREATE TRIGGER dirs_count_del AFTER DELETE ON dirs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_dirs();

-- The jobs made before this version.
INSERT INTO counts (job, slot, files, bytes, files_pending, files_done,
                    bytes_done, files_failed, files_vanished)
    SELECT job, 0, count(*) FILTER (WHERE state <> 5),
           coalesce(sum(size) FILTER (WHERE state <> 5), 0),
           count(*) FILTER (WHERE state = 0),
           count(*) FILTER (WHERE state = 1),
           coalesce(sum(size) FILTER (WHERE state = 1), 0),
           count(*) FILTER (WHERE state = 2),
           count(*) FILTER (WHERE state = 4)
    FROM files GROUP BY job;
INSERT INTO counts AS c (job, slot, dirs, dirs_to_list, dirs_list_failed,
                         dirs_to_apply, dirs_meta_failed)
    SELECT job, 0, count(*), count(*) FILTER (WHERE list_state = 0),
           count(*) FILTER (WHERE list_state = 2),
           count(*) FILTER (WHERE list_state = 1 AND state = 0),
           count(*) FILTER (WHERE state = 2)
    FROM dirs GROUP BY job
    ON CONFLICT (job, slot) DO UPDATE SET dirs = EXCLUDED.dirs,
        dirs_to_list = EXCLUDED.dirs_to_list,
        dirs_list_failed = EXCLUDED.dirs_list_failed,
        dirs_to_apply = EXCLUDED.dirs_to_apply,
        dirs_meta_failed = EXCLUDED.dirs_meta_failed;
