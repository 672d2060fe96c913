/*
 * manifest_pg/select.c - the selection of a shared job's scan generation
 * (pg.h, sql/pg/009_selection.sql): one for every host of a gen, the first
 * one's; and the rows a finished scan did not see, which the host asks the
 * selection about (src/shared/select.c): a row left out takes the gen, so
 * that it is not marked removed.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* The first host of the gen ($3) records its selection; the others read
 * it. No row: the job has moved on to another gen (claims say so). */
/* clang-format off */
static const char selection_sql[] =
        "UPDATE jobs SET selection = CASE WHEN selection_gen IS DISTINCT FROM"
        " gen THEN $2 ELSE selection END, selection_gen = gen"
        " WHERE id = $1 AND gen = $3 RETURNING selection";
/* clang-format on */

struct selection_args {
        const char *mine;
        char **theirs;
};

static int selection_step(struct ferry_pg *pg, void *arg)
{
        struct selection_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_text(&p, a->mine);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, selection_sql, &p, &r, "job's selection");
        pg_params_release(&p);
        if (rc)
                return rc;
        size_t len = 0;
        const char *t = PQntuples(r) == 1 ? pg_get_bytes(r, 0, 0, &len) : NULL;
        if (t && (len != strlen(a->mine) || memcmp(t, a->mine, len))) {
                *a->theirs = strndup(t, len);
                if (!*a->theirs)
                        rc = pg_fail(pg, "out of memory");
        }
        PQclear(r);
        return rc;
}

int ferry_pg_selection(struct ferry_pg *pg, const char *mine, char **theirs)
{
        *theirs = NULL;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct selection_args a = {mine, theirs};
        return pg_retry(pg, selection_step, &a);
}

/* Rows of an older gen than the job's that are not removed (a finished
 * scan of the gen did not see them), in id order from $3. */
/* clang-format off */
static const char unseen_sql[] =
        "SELECT f.id, d.path, f.name, f.type::int8, f.size FROM files f"
        " JOIN dirs d ON d.id = f.dir WHERE f.job = $1 AND f.gen < $2"
        " AND f.state <> " MF_SQL_INT(MF_ST_REMOVED) " AND f.id > $3"
        " ORDER BY f.id LIMIT $4::int8";
static const char keep_sql[] =
        "UPDATE files SET gen = $2 WHERE job = $1 AND gen < $2"
        " AND id = ANY($3::int8[])";
/* clang-format on */

struct unseen_args {
        int64_t after;
        size_t max;
        struct ferry_pg_claim *c;
};

static int unseen_step(struct ferry_pg *pg, void *arg)
{
        struct unseen_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        pg_param_int(&p, a->after);
        pg_param_int(&p, (int64_t)a->max);
        int rc = pg_exec(pg, unseen_sql, &p, &r, "unseen rows");
        pg_params_release(&p);
        if (rc)
                return rc;
        size_t n = (size_t)PQntuples(r);
        struct ferry_pg_row *rows = n ? calloc(n, sizeof(*rows)) : NULL;
        if (n && !rows) {
                PQclear(r);
                return pg_fail(pg, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
                struct ferry_pg_row *w = &rows[i];
                w->id = pg_get_i64(r, (int)i, 0);
                w->path = pg_get_bytes(r, (int)i, 1, &w->path_len);
                w->name = pg_get_bytes(r, (int)i, 2, &w->name_len);
                w->type = (int)pg_get_i64(r, (int)i, 3);
                w->size = (uint64_t)pg_get_i64(r, (int)i, 4);
        }
        a->c->n = n;
        a->c->rows = rows;
        a->c->res = r;
        return 0;
}

int ferry_pg_unseen(struct ferry_pg *pg, int64_t after, size_t max,
                    struct ferry_pg_claim *c)
{
        memset(c, 0, sizeof(*c));
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (max == 0 || max > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "%zu unseen rows: out of range", max);
        struct unseen_args a = {after, max, c};
        return pg_retry(pg, unseen_step, &a);
}

struct keep_args {
        const int64_t *ids;
        size_t n;
};

static int keep_step(struct ferry_pg *pg, void *arg)
{
        const struct keep_args *a = arg;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, pg->gen);
        pg_param_int_array(&p, a->ids, a->n);
        int rc = pg_exec(pg, keep_sql, &p, NULL, "rows left out");
        pg_params_release(&p);
        return rc;
}

int ferry_pg_keep_unseen(struct ferry_pg *pg, const int64_t *ids, size_t n)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct keep_args a = {ids, n};
        return n ? pg_retry(pg, keep_step, &a) : 0;
}

/* The listed paths ($2 directories, $3 names, hex) that gen $4 of job $1
 * has no row of: the 1-based positions */
/* clang-format off */
static const char absent_sql[] =
        "SELECT v.i FROM unnest($2::text[], $3::text[]) WITH ORDINALITY"
        " AS v (dir, name, i) WHERE NOT EXISTS (SELECT 1 FROM dirs d"
        " JOIN files f ON f.dir = d.id WHERE d.job = $1"
        " AND d.path = decode(v.dir, 'hex') AND f.name = decode(v.name, 'hex')"
        " AND f.gen = $4 AND f.state <> " MF_SQL_INT(MF_ST_REMOVED) ")"
        " AND NOT EXISTS (SELECT 1 FROM dirs d WHERE d.job = $1 AND d.gen = $4"
        " AND d.path = CASE WHEN v.dir = '' THEN decode(v.name, 'hex')"
        " ELSE decode(v.dir, 'hex') || '\\x2f'::bytea"
        " || decode(v.name, 'hex') END)";
/* clang-format on */

struct absent_args {
        const char *const *dirs, *const *names;
        size_t n;
        bool *absent;
};

static int absent_step(struct ferry_pg *pg, void *arg)
{
        struct absent_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_hex_array(&p, a->dirs, a->n);
        pg_param_hex_array(&p, a->names, a->n);
        pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, absent_sql, &p, &r, "listed paths");
        pg_params_release(&p);
        if (rc)
                return rc;
        memset(a->absent, 0, a->n * sizeof(*a->absent));
        for (int i = 0; i < PQntuples(r); i++) {
                int64_t k = pg_get_i64(r, i, 0);
                if (k >= 1 && (uint64_t)k <= a->n)
                        a->absent[k - 1] = true;
        }
        PQclear(r);
        return 0;
}

int ferry_pg_paths_absent(struct ferry_pg *pg, const char *const *dirs,
                          const char *const *names, size_t n, bool *absent)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        if (n > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "%zu listed paths: out of range", n);
        if (!n)
                return 0;
        struct absent_args a = {dirs, names, n, absent};
        return pg_retry(pg, absent_step, &a);
}
