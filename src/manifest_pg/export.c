/*
 * manifest_pg/export.c - `ferry export` of a shared job (pg.h): its file
 * rows as struct ferry_export_row, the SQLite export's (ferry.h), read a
 * page at a time in the order they were added.
 *
 * Each page is one statement (its own snapshot), keyed on the last row's
 * id: the hosts of a running job go on meanwhile, and a row they change
 * shows as one commit or the next left it, as the SQLite export reads.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "buf.h"
#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* Rows a page reads. */
#define EXPORT_PAGE 1000

/* clang-format off */
static const char page_sql[] =
        "SELECT f.id, d.path, f.name, f.type::int8, f.state::int8, f.size,"
        " f.mtime_ns, f.mode::int8, f.uid, f.gid, f.hash FROM files f"
        " JOIN dirs d ON d.id = f.dir WHERE f.job = $1 AND f.id > $2"
        " AND (NOT $3::bool OR f.state = " MF_SQL_INT(MF_ST_DONE) ")"
        " ORDER BY f.id LIMIT " MF_SQL_INT(EXPORT_PAGE);
/* clang-format on */

struct page_args {
        const char *name;
        int64_t job, after;
        bool done_only;
        PGresult *res;
};

static int page_step(struct ferry_pg *pg, void *arg)
{
        struct page_args *a = arg;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, a->job);
        pg_param_int(&p, a->after);
        pg_param_text(&p, a->done_only ? "true" : "false");
        int rc = pg_exec(pg, page_sql, &p, &a->res, "export");
        pg_params_release(&p);
        return rc;
}

/* The id of job name (a->job; 0 when there is none). */
static int job_step(struct ferry_pg *pg, void *arg)
{
        struct page_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        int rc = pg_exec(pg, "SELECT id FROM jobs WHERE name = $1", &p, &r,
                         "export");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->job = PQntuples(r) == 1 ? pg_get_i64(r, 0, 0) : 0;
        PQclear(r);
        return 0;
}

/* Hands row i of r to fn with its path (dir/name) built in b. */
static int put_row(const PGresult *r, int i, struct ferry_buf *b,
                   ferry_export_fn fn, void *arg)
{
        size_t dlen = 0, nlen = 0, hlen = 0;
        const char *dir = pg_get_bytes(r, i, 1, &dlen);
        const char *name = pg_get_bytes(r, i, 2, &nlen);
        ferry_buf_reset(b);
        ferry_buf_add(b, dir, dlen);
        if (dlen)
                ferry_buf_add(b, "/", 1);
        ferry_buf_add(b, name, nlen);
        if (b->oom)
                return FERRY_EINTERNAL;
        int64_t ns = pg_get_i64(r, i, 6);
        int64_t sec = ns / 1000000000, rem = ns % 1000000000;
        if (rem < 0)
                sec--, rem += 1000000000;
        struct ferry_export_row row = {
                .path = b->buf,
                .path_len = b->len,
                .type = (enum ferry_file_type)pg_get_i64(r, i, 3),
                .state = (enum ferry_file_state)pg_get_i64(r, i, 4),
                .size = (uint64_t)pg_get_i64(r, i, 5),
                .mtime_sec = sec,
                .mtime_nsec = (uint32_t)rem,
                .mode = (uint32_t)pg_get_i64(r, i, 7),
                .uid = (uint32_t)pg_get_i64(r, i, 8),
                .gid = (uint32_t)pg_get_i64(r, i, 9),
        };
        const char *hash =
                PQgetisnull(r, i, 10) ? NULL : pg_get_bytes(r, i, 10, &hlen);
        if (hash && hlen == sizeof(row.hash)) {
                row.has_hash = true;
                memcpy(row.hash, hash, hlen);
        }
        return fn(&row, arg);
}

int ferry_pg_export(struct ferry_pg *pg, const char *name, bool done_only,
                    ferry_export_fn fn, void *arg)
{
        struct page_args a = {.name = name, .done_only = done_only};
        int rc = pg_retry(pg, job_step, &a);
        if (rc)
                return rc;
        if (!a.job) {
                pg_fail(pg, "the shared manifest has no job '%s'", name);
                return FERRY_EPATH;
        }
        struct ferry_buf b = FERRY_BUF_INIT;
        for (;;) {
                a.res = NULL;
                rc = pg_retry(pg, page_step, &a);
                if (rc)
                        break;
                int rows = PQntuples(a.res);
                for (int i = 0; !rc && i < rows; i++)
                        rc = put_row(a.res, i, &b, fn, arg);
                if (rows)
                        a.after = pg_get_i64(a.res, rows - 1, 0);
                PQclear(a.res);
                if (rc == FERRY_EINTERNAL)
                        pg_fail(pg, "out of memory");
                if (rc || rows < EXPORT_PAGE)
                        break;
        }
        ferry_buf_release(&b);
        return rc;
}
