/*
 * manifest_pg/rerun.c - a shared job run again (pg.h, sql/pg/006_rerun.sql):
 * the next scan generation of a job that is over, SRC taken again when it
 * changed at its top level, and the rows a finished scan did not see
 * marked removed. Each listing's part (rows listed again) is job.c's
 * add_dirs and add_files.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"
#include "manifest_pg/pg_dry.h"

#include "manifest_types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ferry_pg_src_differs(const struct ferry_pg *pg)
{
        return pg->src_differs;
}

/* clang-format off */
/* The CTE r: SRC's root of job job, at the gen of from, back on the scan
 * queue with its metadata to apply. */
#define ROOT_AGAIN(from, job, gen) \
        " r AS (UPDATE dirs d SET list_state = " \
        MF_SQL_INT(PG_LIST_PENDING) ", state = " \
        MF_SQL_INT(PG_META_TO_APPLY) ", gen = " gen ", error = NULL," \
        " meta_error = NULL, claim_token = NULL, lease_until = NULL," \
        " claimed_by = NULL FROM " from " WHERE d.job = " job \
        " AND d.parent IS NULL RETURNING 1)"
/* clang-format on */

/* The job's top level, as its rows hold it (files not removed, and
 * directories its last scan saw, by name in hex), against this SRC's names
 * ($4); when at least half of the job's are still there and the job is over,
 * one statement takes this SRC's fingerprint and starts a scan of it (as
 * rerun_sql does: two hosts at once, one moves it). */
/* clang-format off */
static const char new_src_sql[] =
        "WITH j AS (SELECT id, gen FROM jobs WHERE name = $1 AND dst_fp = $3"
        " AND src_fp <> $2),"
        " root AS (SELECT d.id FROM dirs d JOIN j ON d.job = j.id"
        " WHERE d.parent IS NULL),"
        " top AS (SELECT encode(f.name, 'hex') AS n FROM files f"
        " JOIN root ON f.dir = root.id WHERE f.state <> "
        MF_SQL_INT(MF_ST_REMOVED)
        " UNION ALL SELECT encode(d.path, 'hex') FROM dirs d"
        " JOIN root ON d.parent = root.id JOIN j ON d.gen = j.gen),"
        " sim AS (SELECT count(*) AS total, count(*) FILTER (WHERE"
        " n = ANY($4::text[])) AS kept FROM top),"
        " over AS (SELECT" JOB_OVER("j.id") " AS ok FROM j),"
        " take AS (SELECT over.ok AND sim.total > 0"
        " AND sim.kept * 2 >= sim.total AS ok FROM over, sim),"
        " u AS (UPDATE jobs SET src_fp = $2, gen = jobs.gen + 1,"
        " gen_started = now() FROM j, take WHERE jobs.id = j.id"
        " AND $5::int8 = 0 AND jobs.gen = j.gen AND take.ok"
        " RETURNING jobs.id, jobs.gen)," ROOT_AGAIN("u", "u.id", "u.gen")
        " SELECT (SELECT count(*) FROM u)::int8, coalesce((SELECT kept FROM"
        " sim), 0)::int8, coalesce((SELECT total FROM sim), 0)::int8,"
        " coalesce((SELECT ok FROM over), false)::int::int8,"
        " (SELECT count(*) FROM r)::int8,"
        " coalesce((SELECT ok FROM take), false)::int::int8";
/* clang-format on */

struct new_src_args {
        const char *name, *src_fp, *dst_fp;
        const char *const *names;
        size_t n;
        bool taken;
        int64_t kept, total;
        bool over;
        bool would; /* the rule says take it (a dry run's answer) */
        bool dry;   /* a dry run's: changes nothing */
};

static int new_src_step(struct ferry_pg *pg, void *arg)
{
        struct new_src_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        pg_param_text(&p, a->src_fp);
        pg_param_text(&p, a->dst_fp);
        pg_param_hex_array(&p, a->names, a->n);
        pg_param_int(&p, a->dry);
        int rc = pg_exec(pg, new_src_sql, &p, &r, "new SRC");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->taken = a->taken || pg_get_i64(r, 0, 0) == 1;
        a->kept = pg_get_i64(r, 0, 1);
        a->total = pg_get_i64(r, 0, 2);
        a->over = pg_get_i64(r, 0, 3) != 0;
        a->would = pg_get_i64(r, 0, 5) != 0;
        PQclear(r);
        return 0;
}

/* Why a new SRC was not taken (a's verdict), after the join's refusal
 * was. */
static void not_taken(struct ferry_pg *pg, const struct new_src_args *a,
                      const char *was)
{
        if (a->total == 0) /* no such job with this DST, or no rows */
                pg_fail(pg, "%s", was);
        else if (!a->over)
                pg_fail(pg,
                        "%s; the job is not over, so it goes on with the "
                        "SRC it began with",
                        was);
        else
                pg_fail(pg,
                        "%s; only %lld of the %lld names at the job's "
                        "top level are in this SRC's: not taken as the "
                        "job's SRC changed (a new --job-name copies it)",
                        was, (long long)a->kept, (long long)a->total);
}

/* Asks new_src_sql (a dry run's: changing nothing); *was: the join's
 * refusal, kept for not_taken. */
static int ask(struct ferry_pg *pg, struct new_src_args *a, char *was)
{
        snprintf(was, sizeof(pg->errmsg), "%s", pg->errmsg);
        return pg_retry(pg, new_src_step, a);
}

int ferry_pg_job_new_src(struct ferry_pg *pg, const char *name,
                         const char *src_fp, const char *dst_fp,
                         const char *const *names, size_t n, bool *taken)
{
        struct new_src_args a = {.name = name,
                                 .src_fp = src_fp,
                                 .dst_fp = dst_fp,
                                 .names = names,
                                 .n = n};
        char was[sizeof(pg->errmsg)];
        int rc = ask(pg, &a, was);
        *taken = a.taken;
        if (rc || a.taken)
                return rc;
        /* the join's refusal stays, with why this SRC was not taken */
        not_taken(pg, &a, was);
        return 0;
}

int ferry_pg_job_find_new_src(struct ferry_pg *pg, const char *name,
                              const char *src_fp, const char *dst_fp,
                              const char *const *names, size_t n)
{
        struct new_src_args a = {.name = name,
                                 .src_fp = src_fp,
                                 .dst_fp = dst_fp,
                                 .names = names,
                                 .n = n,
                                 .dry = true};
        char was[sizeof(pg->errmsg)];
        int rc = ask(pg, &a, was);
        if (rc)
                return rc;
        if (a.would)
                return pg_job_find_any_src(pg, name, dst_fp);
        not_taken(pg, &a, was);
        return FERRY_EPATH;
}

int64_t ferry_pg_gen(const struct ferry_pg *pg)
{
        return pg->gen;
}

/* One statement: the job moves to gen + 1 only if it is still at gen
 * (two hosts that start at once: one moves it, the other's UPDATE finds
 * gen changed and does nothing) and has nothing left to do; SRC's root
 * goes back on the scan queue with it. Then the job's gen, whoever moved
 * it. */
/* clang-format off */
static const char rerun_sql[] =
        "WITH j AS (UPDATE jobs SET gen = gen + 1, gen_started = now()"
        " WHERE id = $1 AND gen = $2"
        " AND EXISTS (SELECT 1 FROM dirs WHERE job = $1 AND parent IS NULL)"
        " AND" JOB_OVER("$1") " RETURNING gen),"
        ROOT_AGAIN("j", "$1", "j.gen")
        " SELECT (SELECT count(*) FROM r)";
/* clang-format on */

static int rerun_step(struct ferry_pg *pg, void *arg)
{
        (void)arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, rerun_sql, &p, NULL, "new scan");
        pg_params_release(&p);
        if (rc)
                return rc;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        rc = pg_exec(pg,
                     "SELECT gen, floor(extract(epoch FROM"
                     " coalesce(gen_started, created)))::int8 FROM jobs"
                     " WHERE id = $1",
                     &p, &r, "job's scan");
        pg_params_release(&p);
        if (rc)
                return rc;
        if (PQntuples(r) != 1) {
                PQclear(r);
                return pg_fail(pg, "the job is no longer in the manifest");
        }
        pg->gen = pg_get_i64(r, 0, 0);
        pg->created = pg_get_i64(r, 0, 1);
        PQclear(r);
        return 0;
}

int ferry_pg_rerun(struct ferry_pg *pg)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, rerun_step, NULL);
}

/* Rows that gen's scan did not see are removed from SRC: only once no
 * directory is left to list, and only if every one of gen could be
 * listed (a directory not read hides its rows, and its subdirectories').
 * One row of the count alone when no row marked was not done; else one
 * per such row, each with the count, its id, directory and name. */
/* clang-format off */
static const char removed_sql[] =
        "WITH old AS (SELECT f.id, f.state FROM files f JOIN jobs j"
        " ON j.id = f.job WHERE j.id = $1 AND j.gen = $2 AND f.job = $1"
        " AND f.gen < j.gen AND f.state <> " MF_SQL_INT(MF_ST_REMOVED)
        " AND NOT EXISTS (SELECT 1 FROM dirs d WHERE d.job = $1 AND"
        " d.gen = j.gen AND d.list_state <> " MF_SQL_INT(PG_LISTED) ")"
        " FOR UPDATE OF f),"
        " upd AS (UPDATE files f SET state = " MF_SQL_INT(MF_ST_REMOVED) ","
        " claim_token = NULL, lease_until = NULL FROM old WHERE f.id = old.id"
        " RETURNING f.id, f.dir, f.name, old.state)"
        " SELECT c.n, t.id, t.path, t.name FROM"
        " (SELECT count(*)::int8 AS n FROM upd) c LEFT JOIN"
        " (SELECT u.id, d.path, u.name FROM upd u JOIN dirs d ON d.id = u.dir"
        " WHERE u.state <> " MF_SQL_INT(MF_ST_DONE) ") t ON true"
        " ORDER BY t.path, t.id";
/* clang-format on */

struct removed_args {
        uint64_t *n;
        struct ferry_pg_temp **temps;
        size_t *nt;
};

void ferry_pg_temps_free(struct ferry_pg_temp *t, size_t n)
{
        for (size_t i = 0; t && i < n; i++) {
                free(t[i].path);
                free(t[i].name);
        }
        free(t);
}

/* A copy of column col of row k: a bytea, NUL-terminated. */
static char *get_bytes_dup(const PGresult *r, int k, int col, size_t *len)
{
        const char *p = pg_get_bytes(r, k, col, len);
        char *d = malloc(*len + 1);
        if (d) {
                if (*len)
                        memcpy(d, p, *len);
                d[*len] = '\0';
        }
        return d;
}

static int removed_step(struct ferry_pg *pg, void *arg)
{
        struct removed_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, removed_sql, &p, &r, "removed rows");
        pg_params_release(&p);
        if (rc)
                return rc;
        int rows = PQntuples(r);
        *a->n = rows ? (uint64_t)pg_get_i64(r, 0, 0) : 0;
        struct ferry_pg_temp *t = NULL;
        size_t nt = 0;
        if (rows && !PQgetisnull(r, 0, 1))
                t = calloc((size_t)rows, sizeof(*t));
        for (int k = 0; t && k < rows; k++) {
                struct ferry_pg_temp *e = &t[nt++];
                e->id = pg_get_i64(r, k, 1);
                e->path = get_bytes_dup(r, k, 2, &e->path_len);
                e->name = get_bytes_dup(r, k, 3, &e->name_len);
                if (!e->path || !e->name) {
                        ferry_pg_temps_free(t, nt);
                        t = NULL;
                        nt = 0;
                }
        }
        PQclear(r);
        /* out of memory: the rows are marked; their temps stay (as a
         * host that dies here leaves them) */
        ferry_pg_temps_free(*a->temps, *a->nt);
        *a->temps = t;
        *a->nt = nt;
        return 0;
}

int ferry_pg_mark_removed(struct ferry_pg *pg, uint64_t *n,
                          struct ferry_pg_temp **temps, size_t *nt)
{
        *n = 0;
        *temps = NULL;
        *nt = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (pg->gen <= 1)
                return 0;
        /* (only while the job is at this host's gen: a host late at the
         * end of gen g, whose selection may not be g + 1's, marks nothing
         * of g + 1's) */
        struct removed_args a = {n, temps, nt};
        return pg_retry(pg, removed_step, &a);
}

/* (a listing of a row of an older gen, a failed one retried, that finds
 * it gone is none of this gen's: no listing of this gen saw it) */
/* clang-format off */
static const char dirs_vanished_sql[] =
        "SELECT count(*)::int8 FROM dirs d JOIN jobs j ON j.id = d.job"
        " WHERE d.job = $1 AND d.gen = j.gen AND d.list_state = "
        MF_SQL_INT(PG_LISTED) " AND d.error IS NOT NULL";
/* clang-format on */

int ferry_pg_dirs_vanished(struct ferry_pg *pg, uint64_t *n)
{
        return pg_job_count(pg, dirs_vanished_sql, PG_JOB_ONLY, n,
                            "vanished directories");
}
