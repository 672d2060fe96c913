/*
 * manifest_pg/job.c - joining a job of the shared manifest (created by the
 * first host, checked by every other against its SRC and DST
 * fingerprints), adding the rows a scan finds (directories to list, file
 * rows to copy) a batch per statement, and a dry run's read of a
 * directory's files against the rows (what remains and the job's counts:
 * remaining.c).
 *
 * Adding is idempotent (ON CONFLICT): pg_retry may send a batch again
 * whose COMMIT happened but whose reply was lost. A row listed again (by a
 * later scan generation, rerun.c) takes the listing's gen, and becomes
 * pending again when its file changed.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"
#include "manifest_pg/pg_dry.h"

#include "buf.h"
#include "manifest_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct join_args {
        const char *name, *src_fp, *dst_fp, *host;
        int lease_s;
};

int pg_job_check_fps(struct ferry_pg *pg, const char *name, const PGresult *r,
                     const char *src_fp, const char *dst_fp)
{
        size_t slen, dlen;
        const char *src = pg_get_bytes(r, 0, 1, &slen);
        const char *dst = pg_get_bytes(r, 0, 2, &dlen);
        const char *side = NULL, *theirs = NULL;
        int theirs_len = 0;
        if (slen != strlen(src_fp) || memcmp(src, src_fp, slen)) {
                side = "SRC";
                theirs = src, theirs_len = (int)slen;
        } else if (dlen != strlen(dst_fp) || memcmp(dst, dst_fp, dlen)) {
                side = "DST";
                theirs = dst, theirs_len = (int)dlen;
        }
        pg->src_differs = side && side[0] == 'S';
        if (!side)
                return 0;
        pg_fail(pg,
                "job '%s' of the shared manifest has another %s: its "
                "fingerprint is '%.*s', this host's %s is '%s'%s",
                name, side, theirs_len, theirs, side,
                side[0] == 'S' ? src_fp : dst_fp,
                side[0] == 'S' ? " (what SRC's top level holds: its names, "
                                 "types and sizes differ; another SRC, or "
                                 "this one changed at its top level)"
                               : "");
        return FERRY_EPATH;
}

static const char *const count_cols[] = {
        "files",          "bytes",
        "files_pending",  "files_done",
        "bytes_done",     "files_failed",
        "files_vanished", "dirs",
        "dirs_to_list",   "dirs_list_failed",
        "dirs_to_apply",  "dirs_meta_failed",
};
#define N_COUNT_COLS (sizeof(count_cols) / sizeof(*count_cols))

/* The job's rows of counts made by connections that are gone become one,
 * slot 0 (a sum stays a sum whichever rows are folded: the pid test only
 * spares the rows still in use a delete and an insert). */
static int fold_counts(struct ferry_pg *pg, int64_t job)
{
        struct ferry_buf sql = FERRY_BUF_INIT;
        ferry_buf_adds(&sql, "WITH gone AS (DELETE FROM counts c WHERE"
                             " c.job = $1 AND c.slot <> 0 AND NOT EXISTS"
                             " (SELECT 1 FROM pg_stat_activity a WHERE"
                             " a.pid = c.slot) RETURNING c.*)"
                             " INSERT INTO counts AS c (job, slot");
        for (size_t i = 0; i < N_COUNT_COLS; i++)
                ferry_buf_addf(&sql, ", %s", count_cols[i]);
        ferry_buf_adds(&sql, ") SELECT $1, 0");
        for (size_t i = 0; i < N_COUNT_COLS; i++)
                ferry_buf_addf(&sql, ", sum(%s)", count_cols[i]);
        ferry_buf_adds(&sql, " FROM gone HAVING count(*) > 0"
                             " ON CONFLICT (job, slot) DO UPDATE SET ");
        for (size_t i = 0; i < N_COUNT_COLS; i++)
                ferry_buf_addf(&sql, "%s%s = c.%s + EXCLUDED.%s", i ? ", " : "",
                               count_cols[i], count_cols[i], count_cols[i]);
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, job);
        int rc = sql.oom ? pg_fail(pg, "out of memory")
                         : pg_exec(pg, sql.buf, &p, NULL, "counts fold");
        pg_params_release(&p);
        ferry_buf_release(&sql);
        return rc;
}

static int join_step(struct ferry_pg *pg, void *arg)
{
        const struct join_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        pg_param_text(&p, a->src_fp);
        pg_param_text(&p, a->dst_fp);
        /* a job another host made at the same time is not in this
         * statement's snapshot: none comes back, and the next try sees it */
        int rc = pg_exec(pg,
                         "WITH ins AS (INSERT INTO jobs (name, src_fp, dst_fp)"
                         " VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING"
                         " RETURNING id, src_fp, dst_fp, created, gen)"
                         " SELECT id, src_fp, dst_fp,"
                         " floor(extract(epoch FROM created))::int8, gen"
                         " FROM ins UNION ALL SELECT id, src_fp, dst_fp,"
                         " floor(extract(epoch FROM coalesce(gen_started,"
                         " created)))::int8, gen"
                         " FROM jobs WHERE name = $1 LIMIT 1",
                         &p, &r, "job join");
        pg_params_release(&p);
        if (rc)
                return rc;
        if (PQntuples(r) != 1) {
                PQclear(r);
                return PG_AGAIN;
        }
        rc = pg_job_check_fps(pg, a->name, r, a->src_fp, a->dst_fp);
        if (rc) {
                PQclear(r);
                return rc;
        }
        int64_t job = pg_get_i64(r, 0, 0);
        pg->created = pg_get_i64(r, 0, 3);
        pg->gen = pg_get_i64(r, 0, 4);
        PQclear(r);
        pg_params_init(&p);
        pg_param_int(&p, job);
        pg_param_text(&p, a->host);
        pg_param_int(&p, a->lease_s);
        rc = pg_exec(pg,
                     "INSERT INTO hosts (job, host, lease_s) VALUES ($1, $2,"
                     " $3) ON CONFLICT (job, host) DO UPDATE SET last_seen ="
                     " now(), lease_s = $3, left_at = NULL, result = NULL",
                     &p, NULL, "host join");
        pg_params_release(&p);
        if (!rc)
                rc = fold_counts(pg, job);
        if (!rc)
                pg->job = job;
        return rc;
}

int64_t ferry_pg_job_created(const struct ferry_pg *pg)
{
        return pg->created;
}

int ferry_pg_job_join(struct ferry_pg *pg, const char *name, const char *src_fp,
                      const char *dst_fp, const char *host, int lease_s)
{
        struct join_args a = {name, src_fp, dst_fp, host, lease_s};
        char *h = strdup(host);
        if (!h)
                return pg_fail(pg, "out of memory");
        int rc = pg_retry(pg, join_step, &a);
        if (rc) { /* a refused join leaves the handle as it was */
                free(h);
                return rc;
        }
        free(pg->host);
        pg->host = h;
        return 0;
}

/* ---- adding rows ----------------------------------------------------- */

struct add_args {
        int64_t gen;
        const void *rows; /* struct ferry_pg_dir or ferry_pg_file */
        size_t n;
        int64_t *ids;
        uint64_t *kept; /* files: rows listed again and still done */
};

static const char *const dir_casts[] = {"int8", "bytea", "int4",
                                        "int8", "int8",  "int8"};

/* After the VALUES v: the metadata of a row listed again (another host's
 * listing, a lost one's) is what this listing saw; none leaves it. A row
 * of an older gen (the job run again) is to list again; its metadata is
 * to apply again when it changed, and so is its parent's when it is new
 * (a directory made in DST changes its parent's time; add_files does the
 * same for a directory that gets a file to copy). */
/* clang-format off */
#define DIR_META_CHANGED \
        "(dirs.mode, dirs.uid, dirs.gid, dirs.mtime_ns) IS DISTINCT FROM" \
        " (coalesce(EXCLUDED.mode, dirs.mode), coalesce(EXCLUDED.uid," \
        " dirs.uid), coalesce(EXCLUDED.gid, dirs.gid)," \
        " coalesce(EXCLUDED.mtime_ns, dirs.mtime_ns))"
static const char add_dirs_sql[] =
        "), old AS (SELECT path FROM dirs WHERE job = $1 AND path IN"
        " (SELECT path FROM v)),"
        " ins AS (INSERT INTO dirs (job, parent, path, gen, mode,"
        " uid, gid, mtime_ns) SELECT $1::int8, nullif(parent, 0),"
        " path, $2::int8, mode, uid, gid, mtime_ns FROM v"
        " ORDER BY ord ON CONFLICT (job, path) DO UPDATE"
        " SET path = EXCLUDED.path,"
        " mode = coalesce(EXCLUDED.mode, dirs.mode),"
        " uid = coalesce(EXCLUDED.uid, dirs.uid),"
        " gid = coalesce(EXCLUDED.gid, dirs.gid),"
        " mtime_ns = coalesce(EXCLUDED.mtime_ns, dirs.mtime_ns),"
        " list_state = CASE WHEN dirs.gen < EXCLUDED.gen THEN "
        MF_SQL_INT(PG_LIST_PENDING) " ELSE dirs.list_state END,"
        " error = CASE WHEN dirs.gen < EXCLUDED.gen THEN NULL"
        " ELSE dirs.error END,"
        " state = CASE WHEN dirs.gen < EXCLUDED.gen AND " DIR_META_CHANGED
        " THEN " MF_SQL_INT(PG_META_TO_APPLY) " ELSE dirs.state END,"
        " meta_error = CASE WHEN dirs.gen < EXCLUDED.gen AND "
        DIR_META_CHANGED " THEN NULL ELSE dirs.meta_error END,"
        " gen = greatest(dirs.gen, EXCLUDED.gen)"
        " RETURNING id, path, parent),"
        " up AS (UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL WHERE job = $1 AND state = "
        MF_SQL_INT(PG_META_APPLIED) " AND id IN (SELECT parent FROM ins"
        " WHERE path NOT IN (SELECT path FROM old)) RETURNING 1)"
        " SELECT ins.id FROM v JOIN ins ON ins.path = v.path"
        " ORDER BY v.ord";
/* clang-format on */

static int add_dirs_batch(struct ferry_pg *pg, const struct add_args *a,
                          size_t from, size_t n)
{
        const struct ferry_pg_dir *d = (const struct ferry_pg_dir *)a->rows;
        struct ferry_buf sql = FERRY_BUF_INIT;
        struct pg_params p;
        PGresult *r = NULL;
        /* the ids in the order of the rows, an existing row's too (DO
         * UPDATE, not NOTHING: RETURNING then names it) */
        ferry_buf_adds(&sql, "WITH v(ord, parent, path, mode, uid, gid,"
                             " mtime_ns) AS (VALUES ");
        pg_values_sql(&sql, n, 3, dir_casts, 6, true);
        ferry_buf_adds(&sql, add_dirs_sql);
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->gen);
        for (size_t i = from; i < from + n; i++) {
                pg_param_int(&p, d[i].parent);
                pg_param_bytes(&p, d[i].path, d[i].path_len);
                if (d[i].has_meta) {
                        pg_param_int(&p, d[i].mode);
                        pg_param_int(&p, d[i].uid);
                        pg_param_int(&p, d[i].gid);
                        pg_param_int(&p, d[i].mtime_ns);
                } else {
                        for (int k = 0; k < 4; k++)
                                pg_param_text(&p, NULL);
                }
        }
        int rc = sql.oom ? pg_fail(pg, "out of memory")
                         : pg_exec(pg, sql.buf, &p, &r, "directory insert");
        pg_params_release(&p);
        ferry_buf_release(&sql);
        if (rc)
                return rc;
        if ((size_t)PQntuples(r) != n) {
                PQclear(r);
                return pg_fail(pg,
                               "directory insert failed: %zu rows for "
                               "%d ids (the same path twice?)",
                               n, PQntuples(r));
        }
        for (size_t i = 0; a->ids && i < n; i++)
                a->ids[from + i] = pg_get_i64(r, (int)i, 0);
        PQclear(r);
        return 0;
}

/* A file row listed again differs from the listing (EXCLUDED): another
 * type, size, mtime, mode, owner or device number (dev and ino are not
 * compared: a host's mount may number files its own way), or it was gone
 * from SRC and is back, or it failed in an older gen (a run again retries
 * what its scan finds again), or its ctime moved, unless its link count moved
 * too while its inode number stayed (a name added or removed: cp -al, rm;
 * 008_links.sql). A row of no known link count, or listed by a host that
 * numbers inodes another way, is changed by its ctime alone. */
/* clang-format off */
#define CHANGED \
        "(files.state IN (" MF_SQL_INT(MF_ST_VANISHED) ", " \
        MF_SQL_INT(MF_ST_REMOVED) ") OR (files.state = " \
        MF_SQL_INT(MF_ST_FAILED) " AND files.gen < EXCLUDED.gen)" \
        " OR (files.type, files.size," \
        " files.mtime_ns, files.mode, files.uid, files.gid, files.rdev)" \
        " IS DISTINCT FROM (EXCLUDED.type, EXCLUDED.size," \
        " EXCLUDED.mtime_ns, EXCLUDED.mode, EXCLUDED.uid, EXCLUDED.gid," \
        " EXCLUDED.rdev) OR (files.ctime_ns <> EXCLUDED.ctime_ns AND NOT" \
        " coalesce(files.ino = EXCLUDED.ino AND" \
        " files.nlink <> EXCLUDED.nlink, false)))"
/* col: the listing's when the row changed (x.c), else its own; the ctime,
 * link count and link group are the listing's either way; a row of a
 * link group made pending waits (lwait, 008_links.sql), and so does a
 * pending one (a retry) that the listing finds in a group it was not in,
 * while one no longer in a group waits no more (nothing would let it go) */
#define IF_CHANGED(col, then) \
        " CASE WHEN x.c THEN " then " ELSE files." col " END,"
#define CHANGED_SET \
        " (state, hash, attempts, error, type, size, mtime_ns, ctime_ns," \
        " mode, uid, gid, dev, ino, rdev, nlink, lgroup, lwait, gen) =" \
        " (SELECT" \
        IF_CHANGED("state", MF_SQL_INT(MF_ST_PENDING)) \
        IF_CHANGED("hash", "NULL") IF_CHANGED("attempts", "0") \
        IF_CHANGED("error", "NULL") IF_CHANGED("type", "EXCLUDED.type") \
        IF_CHANGED("size", "EXCLUDED.size") \
        IF_CHANGED("mtime_ns", "EXCLUDED.mtime_ns") \
        " EXCLUDED.ctime_ns," \
        IF_CHANGED("mode", "EXCLUDED.mode") IF_CHANGED("uid", "EXCLUDED.uid") \
        IF_CHANGED("gid", "EXCLUDED.gid") IF_CHANGED("dev", "EXCLUDED.dev") \
        IF_CHANGED("ino", "EXCLUDED.ino") IF_CHANGED("rdev", "EXCLUDED.rdev") \
        " EXCLUDED.nlink, EXCLUDED.lgroup," \
        " CASE WHEN x.c THEN EXCLUDED.lwait WHEN files.state <> " \
        MF_SQL_INT(MF_ST_PENDING) " THEN files.lwait" \
        " WHEN EXCLUDED.lgroup IS NULL THEN false" \
        " ELSE files.lwait OR files.lgroup IS NULL END," \
        " greatest(files.gen, EXCLUDED.gen) FROM (SELECT " CHANGED " AS c) x)"

static const char add_files_head[] =
        "WITH ins AS (INSERT INTO files (job, gen, dir, name, type,"
        " size, mtime_ns, ctime_ns, mode, uid, gid, dev, ino, rdev,"
        " nlink, lgroup, lwait) SELECT $1::int8, $2::int8, v.*,"
        " v.column14 IS NOT NULL FROM (VALUES ";
/* a row listed again: gen's now; pending again when the file changed
 * (its stat), or was gone (vanished, removed) and is back; a done row
 * keeps its hash until then, and its DST record (dst_*) until its next
 * copy replaces it. A directory that gets a file to copy gets its
 * metadata again (a run again: it was applied). */
static const char add_files_tail[] =
        ") v ON CONFLICT (dir, name) DO UPDATE SET" CHANGED_SET
        " WHERE files.gen < EXCLUDED.gen OR " CHANGED
        " RETURNING state, dir),"
        " up AS (UPDATE dirs SET state = " MF_SQL_INT(PG_META_TO_APPLY) ","
        " meta_error = NULL WHERE job = $1 AND state = "
        MF_SQL_INT(PG_META_APPLIED) " AND id IN (SELECT dir FROM ins"
        " WHERE state = " MF_SQL_INT(MF_ST_PENDING) ") RETURNING 1)"
        " SELECT count(*) FILTER (WHERE state = " MF_SQL_INT(MF_ST_DONE)
        ")::int8 FROM ins";
/* clang-format on */

static const char *const file_casts[] = {
        "int8", "bytea", "int2", "int8", "int8", "int8", "int8",
        "int8", "int8",  "int8", "int8", "int8", "int8", "int8"};
#define FILE_COLS 14

/* The FILE_COLS parameters of file row f, in file_casts' order. */
static void put_file(struct pg_params *p, const struct ferry_pg_file *f)
{
        pg_param_int(p, f->dir);
        pg_param_bytes(p, f->name, f->name_len);
        pg_param_int(p, f->type);
        pg_param_int(p, (int64_t)f->size);
        pg_param_int(p, f->mtime_ns);
        pg_param_int(p, f->ctime_ns);
        pg_param_int(p, f->mode);
        pg_param_int(p, f->uid);
        pg_param_int(p, f->gid);
        pg_param_int(p, (int64_t)f->dev);
        pg_param_int(p, (int64_t)f->ino);
        pg_param_int(p, (int64_t)f->rdev);
        pg_param_int(p, (int64_t)f->nlink);
        if (f->lgroup)
                pg_param_int(p, (int64_t)f->ino);
        else
                pg_param_text(p, NULL);
}

static int add_files_batch(struct ferry_pg *pg, const struct add_args *a,
                           size_t from, size_t n)
{
        const struct ferry_pg_file *f = (const struct ferry_pg_file *)a->rows;
        struct ferry_buf sql = FERRY_BUF_INIT;
        struct pg_params p;
        ferry_buf_adds(&sql, add_files_head);
        pg_values_sql(&sql, n, 3, file_casts, FILE_COLS, false);
        ferry_buf_adds(&sql, add_files_tail);
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->gen);
        for (size_t i = from; i < from + n; i++)
                put_file(&p, &f[i]);
        PGresult *r = NULL;
        int rc = sql.oom ? pg_fail(pg, "out of memory")
                         : pg_exec(pg, sql.buf, &p, &r, "file insert");
        pg_params_release(&p);
        ferry_buf_release(&sql);
        if (rc)
                return rc;
        *a->kept += (uint64_t)pg_get_i64(r, 0, 0);
        PQclear(r);
        return 0;
}

typedef int (*add_batch_fn)(struct ferry_pg *pg, const struct add_args *a,
                            size_t from, size_t n);

/* One statement a batch; several in one transaction. */
static int add_all(struct ferry_pg *pg, const struct add_args *a,
                   add_batch_fn batch)
{
        bool txn = a->n > FERRY_PG_BATCH_MAX;
        int rc = txn ? pg_begin(pg) : 0;
        for (size_t i = 0; !rc && i < a->n; i += FERRY_PG_BATCH_MAX) {
                size_t k = a->n - i;
                rc = batch(pg, a, i,
                           k < FERRY_PG_BATCH_MAX ? k : FERRY_PG_BATCH_MAX);
        }
        if (!rc && txn)
                rc = pg_commit(pg);
        return rc;
}

static int add_dirs_step(struct ferry_pg *pg, void *arg)
{
        return add_all(pg, arg, add_dirs_batch);
}

static int add_files_step(struct ferry_pg *pg, void *arg)
{
        const struct add_args *a = arg;
        *a->kept = 0; /* counted again by a try again */
        return add_all(pg, arg, add_files_batch);
}

int ferry_pg_add_dirs(struct ferry_pg *pg, int64_t gen,
                      const struct ferry_pg_dir *dirs, size_t n, int64_t *ids)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct add_args a = {gen, dirs, n, ids, NULL};
        return n ? pg_retry(pg, add_dirs_step, &a) : 0;
}

int ferry_pg_add_files(struct ferry_pg *pg, int64_t gen,
                       const struct ferry_pg_file *files, size_t n,
                       uint64_t *kept)
{
        uint64_t k = 0;
        if (kept)
                *kept = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct add_args a = {gen, files, n, NULL, &k};
        int rc = n ? pg_retry(pg, add_files_step, &a) : 0;
        if (kept)
                *kept = k;
        return rc;
}

/* ---- a dry run (src/shared/dryrun.c) ---------------------------------- */

/* Each listed file ($3...: the columns of add_files, dir unused) against
 * its row in directory $2 of job $1, in the listing's order: whether a run
 * would copy it (no row, a row not done, or one the listing changes: the
 * CHANGED of add_files_tail), its DST record, whether the claim that
 * would take it would find it unmarked (claims.c), and its row's id (0:
 * none). Reads only. */
/* clang-format off */
static const char dry_files_head[] =
        "SELECT (files.id IS NULL OR files.state <> " MF_SQL_INT(MF_ST_DONE)
        " OR coalesce(" CHANGED ", true))::int::int8,"
        " coalesce(files.dst_type, 0)::int8,"
        " coalesce(files.dst_size, 0), coalesce(files.dst_mtime_ns, 0),"
        " coalesce(files.unmarked OR files.lease_until IS NOT NULL,"
        " false)::int::int8, coalesce(files.state IN ("
        MF_SQL_INT(MF_ST_PENDING) ", " MF_SQL_INT(MF_ST_FAILED) "),"
        " false)::int::int8, coalesce(files.id, 0)"
        " FROM (SELECT v.*, 0::int8 AS gen FROM (VALUES ";
static const char dry_files_tail[] =
        ") v (ord, dir, name, type, size, mtime_ns, ctime_ns, mode, uid, gid,"
        " dev, ino, rdev, nlink, lgroup)) AS EXCLUDED"
        " LEFT JOIN files ON files.job = $1 AND files.dir = (SELECT id FROM"
        " dirs WHERE job = $1 AND path = $2) AND files.name = EXCLUDED.name"
        " ORDER BY EXCLUDED.ord";
/* clang-format on */

struct dry_args {
        const char *path;
        size_t path_len;
        const struct ferry_pg_file *files;
        size_t n;
        struct ferry_pg_dry *out;
};

static int dry_step(struct ferry_pg *pg, void *arg)
{
        const struct dry_args *a = arg;
        struct ferry_buf sql = FERRY_BUF_INIT;
        struct pg_params p;
        ferry_buf_adds(&sql, dry_files_head);
        pg_values_sql(&sql, a->n, 3, file_casts, FILE_COLS, true);
        ferry_buf_adds(&sql, dry_files_tail);
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_bytes(&p, a->path, a->path_len);
        for (size_t i = 0; i < a->n; i++)
                put_file(&p, &a->files[i]);
        PGresult *r = NULL;
        int rc = sql.oom ? pg_fail(pg, "out of memory")
                         : pg_exec(pg, sql.buf, &p, &r, "dry run");
        pg_params_release(&p);
        ferry_buf_release(&sql);
        if (rc)
                return rc;
        if ((size_t)PQntuples(r) != a->n) {
                PQclear(r);
                return pg_fail(pg, "dry run: %zu rows for %zu files",
                               (size_t)PQntuples(r), a->n);
        }
        for (size_t i = 0; i < a->n; i++) {
                struct ferry_pg_dry *o = &a->out[i];
                o->copy = pg_get_i64(r, (int)i, 0) != 0;
                o->dst_type = (int)pg_get_i64(r, (int)i, 1);
                o->dst_size = (uint64_t)pg_get_i64(r, (int)i, 2);
                o->dst_mtime_ns = pg_get_i64(r, (int)i, 3);
                o->unmarked = pg_get_i64(r, (int)i, 4) != 0;
                o->pending = pg_get_i64(r, (int)i, 5) != 0;
                o->id = pg_get_i64(r, (int)i, 6);
        }
        PQclear(r);
        return 0;
}

int ferry_pg_dry_files(struct ferry_pg *pg, const char *path, size_t path_len,
                       const struct ferry_pg_file *files, size_t n,
                       struct ferry_pg_dry *out)
{
        if (!pg->job)
                return pg_fail(pg, "no job found");
        for (size_t i = 0; i < n; i += FERRY_PG_BATCH_MAX) {
                size_t k =
                        n - i < FERRY_PG_BATCH_MAX ? n - i : FERRY_PG_BATCH_MAX;
                struct dry_args a = {path, path_len, files + i, k, out + i};
                int rc = pg_retry(pg, dry_step, &a);
                if (rc)
                        return rc;
        }
        return 0;
}
