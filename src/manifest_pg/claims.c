/*
 * manifest_pg/claims.c - the hand-out to hosts: claims under a lease and a
 * fencing token, their renewal, and their outcomes (pg.h draws the life of
 * a claimable row).
 *
 * A claim is one statement: a new token from the sequence claim_tokens,
 * the first claimable rows locked with FOR UPDATE SKIP LOCKED (a row
 * another claim is taking at that moment is passed over, never taken
 * twice), and those rows leased to the token. The lease is measured by
 * the server's clock only (now()), so the hosts' clocks do not matter.
 *
 * An outcome is one transaction: the rows locked, checked to hold the
 * token still, then written, or nothing written and the claim reported
 * refused.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "buf.h"
#include "manifest_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- claims ---------------------------------------------------------- */

/* The claimable rows: pending, no lease or an expired one; and only while
 * the job is at the scan generation this host joined ($5): a host that
 * joined before another moved the job on (rerun.c) takes nothing of the
 * next one, whose start (written_since) and gen it does not know. */
#define CLAIMABLE                                                              \
        " AND (lease_until IS NULL OR lease_until < now())"                    \
        " AND EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND gen = $5)"

/* A claim: a new token, the claimable rows that `rows` selects (FROM
 * ... ORDER BY ... LIMIT $3) locked, then leased to the token by one of
 * the UPDATEs below, which return what pg_get_row reads. */
/* clang-format off */
#define CLAIM_OF(rows) \
        "WITH t AS MATERIALIZED (SELECT nextval('claim_tokens') AS token)," \
        " picked AS MATERIALIZED (SELECT id FROM " rows \
        " FOR UPDATE SKIP LOCKED)"
#define LEASED \
        " SET claim_token = t.token, claimed_by = $2," \
        " lease_until = now() + make_interval(secs => $4::float8)"
#define FILES_LEASED \
        " UPDATE files f" LEASED \
        " FROM t, picked, dirs d WHERE f.id = picked.id AND d.id = f.dir" \
        " RETURNING f.claim_token, f.id, f.dir, d.path, f.name," \
        " f.type::int8, f.size, f.mtime_ns, f.ctime_ns, f.mode::int8," \
        " f.uid, f.gid, f.dev, f.ino, f.rdev, " PG_DST_COLS("f")
/* a directory's row: then the file columns, of its metadata (meta) or 0 */
#define DIRS_LEASED(meta) \
        " UPDATE dirs d" LEASED " FROM t, picked WHERE d.id = picked.id" \
        " RETURNING d.claim_token, d.id, d.parent, d.path, NULL::bytea," \
        " 0::int8, 0::int8, " meta ", 0::int8, 0::int8, 0::int8, 0::int8," \
        " 0::int8, 0::int8"
#define NO_DIR_META "0::int8, 0::int8, 0::int8, 0::int8, 0::int8"

/* A name of a link group (008_links.sql) is claimed once links.c let it
 * go: with a row of its group done in its gen, as a link to the lowest
 * such row's copy (LEAD); with none, for its data. */
#define LEAD(f) \
        "(SELECT l.id FROM files l WHERE l.job = " f ".job AND l.lgroup = " \
        f ".lgroup AND l.size = " f ".size AND l.mtime_ns = " f ".mtime_ns" \
        " AND l.id <> " f ".id AND l.state = " MF_SQL_INT(MF_ST_DONE) \
        " AND l.gen = " f ".gen ORDER BY l.id LIMIT 1)"
/* A row whose lease ran out is claimed again: the claim before it ended
 * without a done outcome (012_unmarked.sql; the old lease_until, as an
 * UPDATE's SET reads the row) */
#define UNMARKED " unmarked = f.unmarked OR f.lease_until IS NOT NULL"
/* FILES_LEASED, and the link count and the lead's copy (or NULLs): its
 * path, hash, recorded ctime and DST record; and unmarked */
#define FILES_LEASED_LINKED \
        " UPDATE files f" LEASED "," UNMARKED \
        " FROM t, picked LEFT JOIN files ll ON ll.id = picked.lead" \
        " LEFT JOIN dirs ld ON ld.id = ll.dir, dirs d" \
        " WHERE f.id = picked.id AND d.id = f.dir" \
        " RETURNING f.claim_token, f.id, f.dir, d.path, f.name," \
        " f.type::int8, f.size, f.mtime_ns, f.ctime_ns, f.mode::int8," \
        " f.uid, f.gid, f.dev, f.ino, f.rdev, " PG_DST_COLS("f") "," \
        " coalesce(f.nlink, 1), ld.path, ll.name, ll.hash, ll.ctime_ns," \
        " " PG_DST_COLS("ll") ", f.unmarked::int::int8"

static const char claim_files_sql[] =
        "WITH t AS MATERIALIZED (SELECT nextval('claim_tokens') AS token),"
        " picked AS MATERIALIZED (SELECT id, CASE WHEN lgroup IS NOT NULL"
        " THEN " LEAD("files") " END AS lead FROM files WHERE job = $1"
        " AND state = " MF_SQL_INT(MF_ST_PENDING) " AND NOT lwait" CLAIMABLE
        " ORDER BY id LIMIT $3::int8 FOR UPDATE SKIP LOCKED)"
        FILES_LEASED_LINKED;

static const char claim_dirs_sql[] =
        CLAIM_OF("dirs WHERE job = $1 AND list_state = "
                 MF_SQL_INT(PG_LIST_PENDING) CLAIMABLE
                 " ORDER BY id LIMIT $3::int8") DIRS_LEASED(NO_DIR_META);

/* listed, metadata to apply; deepest first (a child's row is made when
 * its parent is listed: a larger id), so that one host's claims apply a
 * directory after those below it */
static const char claim_meta_sql[] =
        CLAIM_OF("dirs WHERE job = $1 AND state = 0 AND list_state = "
                 MF_SQL_INT(PG_LISTED) CLAIMABLE
                 " ORDER BY id DESC LIMIT $3::int8")
        DIRS_LEASED("coalesce(d.mtime_ns, 0), 0::int8,"
                    " coalesce(d.mode, 0)::int8, coalesce(d.uid, 0),"
                    " coalesce(d.gid, 0)");

/* --delete (007_delete.sql): removed file rows not tried in this gen */
static const char claim_del_files_sql[] =
        CLAIM_OF("files WHERE job = $1 AND state = "
                 MF_SQL_INT(MF_ST_REMOVED) " AND coalesce(del_tried, 0) < $5"
                 CLAIMABLE " ORDER BY id LIMIT $3::int8") FILES_LEASED;

/* ... then removed directories (older gen, never SRC's root), each once
 * no row is left below it (so the deepest go first, whatever the order:
 * none is asked for, so that the plan can start from the few removed
 * directories, dirs_gen, instead of walking all of the job's) */
static const char claim_del_dirs_sql[] =
        CLAIM_OF("dirs p WHERE job = $1 AND gen < $5 AND parent IS NOT NULL"
                 " AND coalesce(del_tried, 0) < $5" CLAIMABLE
                 " AND NOT EXISTS (SELECT 1 FROM dirs c WHERE c.parent = p.id)"
                 " AND NOT EXISTS (SELECT 1 FROM files f WHERE f.dir = p.id)"
                 " LIMIT $3::int8") DIRS_LEASED(NO_DIR_META);
/* clang-format on */

struct claim_args {
        enum ferry_pg_kind kind;
        size_t max;
        int lease_s;
        struct ferry_pg_claim *c;
};

void pg_get_row(const PGresult *r, int k, struct ferry_pg_row *w)
{
        w->id = pg_get_i64(r, k, 1);
        w->dir = pg_get_i64(r, k, 2);
        w->path = pg_get_bytes(r, k, 3, &w->path_len);
        w->name = pg_get_bytes(r, k, 4, &w->name_len);
        w->type = (int)pg_get_i64(r, k, 5);
        w->size = (uint64_t)pg_get_i64(r, k, 6);
        w->mtime_ns = pg_get_i64(r, k, 7);
        w->ctime_ns = pg_get_i64(r, k, 8);
        w->mode = (uint32_t)pg_get_i64(r, k, 9);
        w->uid = (uint32_t)pg_get_i64(r, k, 10);
        w->gid = (uint32_t)pg_get_i64(r, k, 11);
        w->dev = (uint64_t)pg_get_i64(r, k, 12);
        w->ino = (uint64_t)pg_get_i64(r, k, 13);
        w->rdev = (uint64_t)pg_get_i64(r, k, 14);
        w->dst_type = (int)pg_get_i64(r, k, 15);
        w->dst_size = (uint64_t)pg_get_i64(r, k, 16);
        w->dst_mtime_ns = pg_get_i64(r, k, 17);
}

/* A PG_FILES claim's columns past pg_get_row's (FILES_LEASED_LINKED). */
static void get_links(const PGresult *r, int k, struct ferry_pg_row *w)
{
        w->unmarked = pg_get_i64(r, k, 26) != 0;
        w->nlink = (uint64_t)pg_get_i64(r, k, 18);
        w->lead_path = pg_get_bytes(r, k, 19, &w->lead_path_len);
        w->lead_name = pg_get_bytes(r, k, 20, &w->lead_name_len);
        if (!w->lead_name)
                return;
        w->hash = pg_get_bytes(r, k, 21, &w->hash_len);
        w->lead_ctime_ns = pg_get_i64(r, k, 22);
        w->lead_dst_type = (int)pg_get_i64(r, k, 23);
        w->lead_dst_size = (uint64_t)pg_get_i64(r, k, 24);
        w->lead_dst_mtime_ns = pg_get_i64(r, k, 25);
}

/* Whether the job has moved on from this host's scan generation. */
static int gen_moved(struct ferry_pg *pg, bool *moved)
{
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(pg, "SELECT gen FROM jobs WHERE id = $1", &p, &r,
                         "job's scan");
        pg_params_release(&p);
        if (rc)
                return rc;
        *moved = PQntuples(r) != 1 || pg_get_i64(r, 0, 0) != pg->gen;
        PQclear(r);
        return 0;
}

static int claim_step(struct ferry_pg *pg, void *arg)
{
        struct claim_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_text(&p, pg->host);
        pg_param_int(&p, (int64_t)a->max);
        pg_param_int(&p, a->lease_s);
        pg_param_int(&p, pg->gen);
        /* a claim whose reply is lost stays with a token nobody knows
         * until its lease runs out: the next try takes other rows */
        int rc = pg_exec(pg,
                         a->kind == PG_DIRS        ? claim_dirs_sql
                         : a->kind == PG_FILES     ? claim_files_sql
                         : a->kind == PG_DEL_FILES ? claim_del_files_sql
                         : a->kind == PG_DEL_DIRS  ? claim_del_dirs_sql
                                                   : claim_meta_sql,
                         &p, &r, "claim");
        pg_params_release(&p);
        if (rc)
                return rc;
        size_t n = (size_t)PQntuples(r);
        if (n == 0) { /* nothing to lend: c stays empty */
                PQclear(r);
                return gen_moved(pg, &a->c->moved);
        }
        struct ferry_pg_row *rows = calloc(n, sizeof(*rows));
        if (!rows) {
                PQclear(r);
                return pg_fail(pg, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
                pg_get_row(r, (int)i, &rows[i]);
                if (a->kind == PG_FILES)
                        get_links(r, (int)i, &rows[i]);
        }
        a->c->token = pg_get_i64(r, 0, 0);
        a->c->n = n;
        a->c->rows = rows;
        a->c->res = r;
        return 0;
}

int ferry_pg_claim(struct ferry_pg *pg, enum ferry_pg_kind kind, size_t max,
                   int lease_s, struct ferry_pg_claim *c)
{
        memset(c, 0, sizeof(*c));
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (max == 0 || max > FERRY_PG_BATCH_MAX || lease_s < 1)
                return pg_fail(pg, "claim of %zu rows for %d s: out of range",
                               max, lease_s);
        struct claim_args a = {kind, max, lease_s, c};
        return pg_retry(pg, claim_step, &a);
}

void ferry_pg_claim_release(struct ferry_pg_claim *c)
{
        free(c->rows);
        PQclear(c->res);
        memset(c, 0, sizeof(*c));
}

/* ---- renewals -------------------------------------------------------- */

struct renew_args {
        const int64_t *tokens;
        size_t n;
        int lease_s;
        uint64_t renewed;
};

/* (clang-format cannot lay out a literal around MF_SQL_INT) */
/* clang-format off */
static const char renew_sql[] =
        "WITH h AS (UPDATE hosts SET last_seen = now(), prev_at = mark_at,"
        " prev_files = mark_files, prev_bytes = mark_bytes, mark_at = now(),"
        " mark_files = files_done, mark_bytes = bytes_done"
        " WHERE job = $1 AND host = $2),"
        " d AS (UPDATE dirs SET lease_until = now() +"
        " make_interval(secs => $4::float8) WHERE job = $1 AND"
        " claimed_by = $2 AND (list_state = " MF_SQL_INT(PG_LIST_PENDING)
        " OR state = " MF_SQL_INT(PG_META_TO_APPLY) ")"
        " AND claim_token = ANY($3::int8[]) RETURNING 1),"
        " f AS (UPDATE files SET lease_until = now() +"
        " make_interval(secs => $4::float8) WHERE job = $1 AND"
        " claimed_by = $2 AND state = " MF_SQL_INT(MF_ST_PENDING)
        " AND claim_token = ANY($3::int8[]) RETURNING 1)"
        " SELECT ((SELECT count(*) FROM d) + (SELECT count(*) FROM f))::int8";
/* clang-format on */

static int renew_step(struct ferry_pg *pg, void *arg)
{
        struct renew_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_text(&p, pg->host);
        pg_param_int_array(&p, a->tokens, a->n);
        pg_param_int(&p, a->lease_s);
        int rc = pg_exec(pg, renew_sql, &p, &r, "renewal");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->renewed = (uint64_t)pg_get_i64(r, 0, 0);
        PQclear(r);
        return 0;
}

int ferry_pg_renew(struct ferry_pg *pg, const int64_t *tokens, size_t n,
                   int lease_s, uint64_t *renewed)
{
        *renewed = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (lease_s < 1) /* 0 would end this host's own leases */
                return pg_fail(pg, "a lease of %d s", lease_s);
        struct renew_args a = {tokens, n, lease_s, 0};
        int rc = pg_retry(pg, renew_step, &a);
        *renewed = a.renewed;
        return rc;
}

/* ---- outcomes -------------------------------------------------------- */

struct complete_args {
        enum ferry_pg_kind kind;
        int64_t token;
        const struct ferry_pg_outcome *o;
        size_t n;
        bool refused;
};

/* Locks the rows of a and counts those still leased to its token (live)
 * and those it already completed (final). */
static int lock_rows(struct ferry_pg *pg, const struct complete_args *a,
                     size_t *live, size_t *final)
{
        struct pg_params p;
        PGresult *r = NULL;
        int64_t *ids = malloc(a->n * sizeof(*ids));
        if (!ids)
                return pg_fail(pg, "out of memory");
        for (size_t i = 0; i < a->n; i++)
                ids[i] = a->o[i].id;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int_array(&p, ids, a->n);
        pg_param_int(&p, a->token);
        free(ids);
        int rc = pg_exec(
                pg,
                a->kind == PG_DIRS ? "SELECT list_state::int8 FROM dirs WHERE "
                                     "job = $1 AND id = ANY($2::int8[]) AND "
                                     "claim_token = $3 FOR UPDATE"
                : a->kind == PG_FILES ? "SELECT state::int8 FROM files WHERE "
                                        "job = $1 AND id = ANY($2::int8[]) AND "
                                        "claim_token = $3 FOR UPDATE"
                                      : "SELECT state::int8 FROM dirs WHERE "
                                        "job = $1 AND id = ANY($2::int8[]) AND "
                                        "claim_token = $3 FOR UPDATE",
                &p, &r, "outcome check");
        pg_params_release(&p);
        if (rc)
                return rc;
        *live = *final = 0;
        for (int i = 0; i < PQntuples(r); i++)
                if (pg_get_i64(r, i, 0) == 0) /* pending, list pending */
                        ++*live;
                else
                        ++*final;
        PQclear(r);
        return 0;
}

static const char *const outcome_casts[] = {
        "int8", "int2", "bytea", "text", "int8", "int8", "int8",
        "int4", "int8", "int8",  "int2", "int8", "int8"};
#define OUTCOME_COLS 13

/* A done file's row takes the stat of the source as copied (NULL: keeps
 * its own). */
#define FILE_STAT_SET                                                          \
        " size = coalesce(v.size, f.size),"                                    \
        " mtime_ns = coalesce(v.mtime_ns, f.mtime_ns),"                        \
        " ctime_ns = coalesce(v.ctime_ns, f.ctime_ns),"                        \
        " mode = coalesce(v.mode, f.mode), uid = coalesce(v.uid, f.uid),"      \
        " gid = coalesce(v.gid, f.gid),"

/* ... and what its copy left in DST (NULL: keeps its own; type 0: none
 * known, nothing of DST is ferry's) */
#define FILE_DST_SET                                                           \
        " dst_type = CASE WHEN v.dst_type IS NULL THEN f.dst_type"             \
        " ELSE nullif(v.dst_type, 0) END,"                                     \
        " dst_size = coalesce(v.dst_size, f.dst_size),"                        \
        " dst_mtime_ns = coalesce(v.dst_mtime_ns, f.dst_mtime_ns),"

static void put_dst(struct pg_params *p, const struct ferry_pg_outcome *o)
{
        if (!o) {
                for (int k = 0; k < 3; k++)
                        pg_param_text(p, NULL);
                return;
        }
        pg_param_int(p, o->dst_type);
        pg_param_int(p, (int64_t)o->dst_size);
        pg_param_int(p, o->dst_mtime_ns);
}

static void put_stat(struct pg_params *p, const struct ferry_pg_outcome *o)
{
        if (!o) {
                for (int k = 0; k < 6; k++)
                        pg_param_text(p, NULL);
                return;
        }
        pg_param_int(p, (int64_t)o->size);
        pg_param_int(p, o->mtime_ns);
        pg_param_int(p, o->ctime_ns);
        pg_param_int(p, o->mode);
        pg_param_int(p, o->uid);
        pg_param_int(p, o->gid);
}

/* What an outcome sets, by kind. A directory listed with an error is one
 * gone from SRC (PG_VANISHED): nothing in it, no metadata to apply. */
/* clang-format off */
static const char list_outcome_set[] =
        "UPDATE dirs f SET list_state = v.state, error = v.error,"
        " state = CASE WHEN v.state = " MF_SQL_INT(PG_LISTED)
        " AND v.error IS NOT NULL THEN " MF_SQL_INT(PG_META_APPLIED)
        " ELSE f.state END,";
static const char file_outcome_set[] =
        "UPDATE files f SET state = v.state, hash = v.hash, error = v.error,"
        " attempts = f.attempts + 1, unmarked = f.unmarked AND v.state <> "
        MF_SQL_INT(MF_ST_DONE) "," FILE_STAT_SET FILE_DST_SET;
static const char meta_outcome_set[] =
        "UPDATE dirs f SET state = v.state, meta_error = v.error,";
/* clang-format on */

static int write_outcomes(struct ferry_pg *pg, const struct complete_args *a)
{
        struct ferry_buf sql = FERRY_BUF_INIT;
        struct pg_params p;
        PGresult *r = NULL;
        if (a->kind == PG_FILES)
                ferry_buf_adds(&sql, "WITH o AS (");
        ferry_buf_adds(&sql, a->kind == PG_DIRS    ? list_outcome_set
                             : a->kind == PG_FILES ? file_outcome_set
                                                   : meta_outcome_set);
        ferry_buf_adds(&sql, " lease_until = NULL FROM (VALUES ");
        pg_values_sql(&sql, a->n, 3, outcome_casts, OUTCOME_COLS, false);
        ferry_buf_adds(&sql, ") v (id, state, hash, error, size, mtime_ns,"
                             " ctime_ns, mode, uid, gid, dst_type, dst_size,"
                             " dst_mtime_ns) WHERE f.job = $1"
                             " AND f.claim_token = $2 AND f.id = v.id");
        if (a->kind == PG_FILES) /* the host's counts, in the same
                                  * statement: one row, the rows written */
                ferry_buf_addf(
                        &sql,
                        " RETURNING f.state, f.size) UPDATE hosts h SET"
                        " files_done = h.files_done + c.n, bytes_done ="
                        " h.bytes_done + c.b FROM (SELECT count(*) AS rows,"
                        " count(*) FILTER (WHERE state = %d) AS n,"
                        " coalesce(sum(size) FILTER (WHERE state = %d), 0)"
                        " AS b FROM o) c WHERE h.job = $1 AND h.host = $%zu"
                        " RETURNING c.rows::int8",
                        MF_ST_DONE, MF_ST_DONE, 3 + OUTCOME_COLS * a->n);
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, a->token);
        for (size_t i = 0; i < a->n; i++) {
                const struct ferry_pg_outcome *o = &a->o[i];
                bool done = o->result == PG_DONE;
                /* a directory gone from SRC: listed, nothing in it, and
                 * no metadata to apply (the error says why; DST gets no
                 * directory made for it) */
                bool gone = o->result == PG_VANISHED;
                int state =
                        a->kind == PG_DIRS
                                ? (done || gone ? PG_LISTED : PG_LIST_FAILED)
                        : a->kind == PG_FILES
                                ? (done                       ? MF_ST_DONE
                                   : o->result == PG_VANISHED ? MF_ST_VANISHED
                                                              : MF_ST_FAILED)
                                : (done ? PG_META_APPLIED : PG_META_FAILED);
                pg_param_int(&p, o->id);
                pg_param_int(&p, state);
                pg_param_bytes(&p, done ? o->hash : NULL, o->hash_len);
                pg_param_text(&p, done ? NULL : o->error);
                put_stat(&p, done && o->has_stat ? o : NULL);
                put_dst(&p, done && o->has_dst ? o : NULL);
        }
        if (a->kind == PG_FILES)
                pg_param_text(&p, pg->host);
        int rc = sql.oom ? pg_fail(pg, "out of memory")
                         : pg_exec(pg, sql.buf, &p, &r, "outcome");
        pg_params_release(&p);
        ferry_buf_release(&sql);
        if (rc)
                return rc;
        long changed = a->kind != PG_FILES ? atol(PQcmdTuples(r))
                       : PQntuples(r) == 1 ? (long)pg_get_i64(r, 0, 0)
                                           : -1; /* the host left the job */
        PQclear(r);
        if ((size_t)changed != a->n)
                return pg_fail(pg, "outcome failed: %ld rows written of %zu",
                               changed, a->n);
        return 0;
}

static int complete_step(struct ferry_pg *pg, void *arg)
{
        struct complete_args *a = arg;
        size_t live = 0, final = 0;
        a->refused = false;
        int rc = pg_begin(pg);
        if (!rc)
                rc = lock_rows(pg, a, &live, &final);
        if (rc)
                return rc;
        if (final == a->n) /* an earlier try committed, its reply lost */
                return pg_commit(pg);
        if (live != a->n) { /* pg_retry rolls back */
                a->refused = true;
                return 0;
        }
        rc = write_outcomes(pg, a);
        if (!rc && a->kind == PG_FILES)
                rc = pg_links_release(pg, a->o, a->n);
        return rc ? rc : pg_commit(pg);
}

int ferry_pg_complete(struct ferry_pg *pg, enum ferry_pg_kind kind,
                      int64_t token, const struct ferry_pg_outcome *o, size_t n,
                      bool *refused)
{
        *refused = false;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (n == 0)
                return 0;
        if (n > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "outcomes of %zu rows: more than %d", n,
                               FERRY_PG_BATCH_MAX);
        struct complete_args a = {kind, token, o, n, false};
        int rc = pg_retry(pg, complete_step, &a);
        *refused = a.refused;
        return rc;
}

/* ---- giving claims back ---------------------------------------------- */

/* (a row another claim took has that host's name in claimed_by; a
 * delete claim's rows are removed ones, a removed directory's of an
 * older gen) */
/* clang-format off */
static const char release_sql[] =
        "WITH d AS (UPDATE dirs SET lease_until = NULL WHERE job = $1"
        " AND claimed_by = $2 AND lease_until IS NOT NULL"
        " AND (list_state = " MF_SQL_INT(PG_LIST_PENDING)
        " OR state = " MF_SQL_INT(PG_META_TO_APPLY) " OR gen <"
        " (SELECT gen FROM jobs WHERE id = $1)) RETURNING 1),"
        " f AS (UPDATE files SET lease_until = NULL, unmarked = unmarked"
        " OR state = " MF_SQL_INT(MF_ST_PENDING) " WHERE job = $1"
        " AND claimed_by = $2 AND lease_until IS NOT NULL"
        " AND state IN (" MF_SQL_INT(MF_ST_PENDING) ", "
        MF_SQL_INT(MF_ST_REMOVED) ") RETURNING 1)"
        " SELECT ((SELECT count(*) FROM d) + (SELECT count(*) FROM f))::int8";
/* clang-format on */

int ferry_pg_release(struct ferry_pg *pg, uint64_t *n)
{
        return pg_job_count(pg, release_sql, PG_AND_HOST, n, "release");
}

static int leave_step(struct ferry_pg *pg, void *arg)
{
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_text(&p, pg->host);
        pg_param_int(&p, *(const int *)arg);
        int rc = pg_exec(pg,
                         "UPDATE hosts SET left_at = now(), last_seen = now(),"
                         " result = $3 WHERE job = $1 AND host = $2",
                         &p, NULL, "leave");
        pg_params_release(&p);
        return rc;
}

int ferry_pg_leave(struct ferry_pg *pg, int result)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, leave_step, &result);
}
