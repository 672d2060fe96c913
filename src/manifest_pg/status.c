/*
 * manifest_pg/status.c - what `ferry status` reads of a shared manifest
 * (pg.h): every job with its counts, and one job's hosts with what each
 * did, its rate and the claims it holds, and its failures.
 *
 * Read-only: nothing here joins a job or writes a row. The counts of a
 * job are its rows of counts (sql/pg/005_counts.sql), not its file rows;
 * the claims a host holds come from the partial indexes files_held and
 * dirs_held (sql/pg/003_hosts.sql), small whatever the size of the job.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* A host runs while it did not leave and was seen within its lease. */
#define RUNNING                                                                \
        "(h.left_at IS NULL AND h.last_seen + make_interval(secs =>"           \
        " h.lease_s) >= now())"

/* clang-format off */
static const char jobs_sql[] =
        "SELECT j.name, extract(epoch FROM j.created)::int8, j.src_fp,"
        " j.dst_fp, f.n, f.done, f.failed, f.pending, f.bytes, f.bytes_done,"
        " f.vanished,"
        " d.n, d.to_list, d.list_failed, d.to_apply, d.meta_failed,"
        " h.n, h.running, j.paused::int::int8,"
        " coalesce(j.host_jobs, 0)::int8 FROM jobs j,"
        " LATERAL (SELECT coalesce(sum(files), 0)::int8 AS n,"
        " coalesce(sum(files_done), 0)::int8 AS done,"
        " coalesce(sum(files_failed), 0)::int8 AS failed,"
        " coalesce(sum(files_pending), 0)::int8 AS pending,"
        " coalesce(sum(bytes), 0)::int8 AS bytes,"
        " coalesce(sum(bytes_done), 0)::int8 AS bytes_done,"
        " coalesce(sum(files_vanished), 0)::int8 AS vanished"
        " FROM counts WHERE job = j.id) f,"
        " LATERAL (SELECT coalesce(sum(dirs), 0)::int8 AS n,"
        " coalesce(sum(dirs_to_list), 0)::int8 AS to_list,"
        " coalesce(sum(dirs_list_failed), 0)::int8 AS list_failed,"
        " coalesce(sum(dirs_to_apply), 0)::int8 AS to_apply,"
        " coalesce(sum(dirs_meta_failed), 0)::int8 AS meta_failed"
        " FROM counts WHERE job = j.id) d,"
        " LATERAL (SELECT count(*)::int8 AS n,"
        " count(*) FILTER (WHERE " RUNNING ")::int8 AS running"
        " FROM hosts h WHERE h.job = j.id) h"
        " WHERE $1::text IS NULL OR j.name = $1 ORDER BY j.name";

/* running hosts first, then the latest seen */
static const char hosts_sql[] =
        "SELECT h.host, extract(epoch FROM h.joined)::int8,"
        " extract(epoch FROM h.last_seen)::int8,"
        " coalesce(extract(epoch FROM h.left_at)::int8, 0),"
        " coalesce(h.result, -1)::int8, h.lease_s::int8,"
        " (" RUNNING ")::int4::int8, h.files_done, h.bytes_done,"
        " h.files_done - h.prev_files, h.bytes_done - h.prev_bytes,"
        " (extract(epoch FROM now() - h.prev_at) * 1000)::int8,"
        " (SELECT count(*) FROM files f WHERE f.job = h.job"
        " AND f.claimed_by = h.host AND f.state = " MF_SQL_INT(MF_ST_PENDING)
        " AND f.lease_until IS NOT NULL AND f.lease_until >= now())::int8,"
        " (SELECT count(*) FROM dirs d WHERE d.job = h.job"
        " AND d.claimed_by = h.host AND d.lease_until IS NOT NULL"
        " AND (d.list_state = " MF_SQL_INT(PG_LIST_PENDING) " OR d.state = "
        MF_SQL_INT(PG_META_TO_APPLY) ") AND d.lease_until >= now())::int8,"
        " (SELECT count(*) FROM files f WHERE f.job = h.job"
        " AND f.claimed_by = h.host AND f.state = " MF_SQL_INT(MF_ST_PENDING)
        " AND f.lease_until IS NOT NULL AND f.lease_until < now())::int8 +"
        " (SELECT count(*) FROM dirs d WHERE d.job = h.job"
        " AND d.claimed_by = h.host AND d.lease_until IS NOT NULL"
        " AND (d.list_state = " MF_SQL_INT(PG_LIST_PENDING) " OR d.state = "
        MF_SQL_INT(PG_META_TO_APPLY) ") AND d.lease_until < now())::int8"
        " FROM hosts h JOIN jobs j ON j.id = h.job WHERE j.name = $1"
        " ORDER BY " RUNNING " DESC, h.last_seen DESC, h.host";

/* files that failed, directories that could not be listed, directories
 * whose metadata failed; by path */
static const char failures_sql[] =
        "SELECT * FROM (SELECT d.path, f.name, f.error, CASE f.state WHEN "
        MF_SQL_INT(MF_ST_FAILED) " THEN 0 ELSE 3 END::int8 AS what"
        " FROM files f JOIN dirs d ON d.id = f.dir JOIN jobs j ON"
        " j.id = f.job WHERE j.name = $1 AND f.state IN ("
        MF_SQL_INT(MF_ST_FAILED) ", " MF_SQL_INT(MF_ST_VANISHED) ")"
        " UNION ALL SELECT d.path, NULL, d.error, 1 FROM dirs d JOIN jobs j"
        " ON j.id = d.job WHERE j.name = $1 AND d.list_state = "
        MF_SQL_INT(PG_LIST_FAILED)
        " UNION ALL SELECT d.path, NULL, d.meta_error, 2 FROM dirs d"
        " JOIN jobs j ON j.id = d.job WHERE j.name = $1 AND d.state = "
        MF_SQL_INT(PG_META_FAILED) ") x"
        " ORDER BY what, path, name LIMIT $2::int8";
/* clang-format on */

static char *dup_col(const PGresult *r, int row, int col, bool *oom)
{
        size_t len = 0;
        const char *v = pg_get_bytes(r, row, col, &len);
        char *s = malloc(len + 1);
        if (!s) {
                *oom = true;
                return NULL;
        }
        if (len)
                memcpy(s, v, len);
        s[len] = '\0';
        return s;
}

struct read_args {
        const char *sql, *name;
        int64_t limit; /* failures_sql's $2 */
        PGresult *res;
};

static int read_step(struct ferry_pg *pg, void *arg)
{
        struct read_args *a = arg;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_text(&p, a->name);
        if (a->limit)
                pg_param_int(&p, a->limit);
        int rc = pg_exec(pg, a->sql, &p, &a->res, "status");
        pg_params_release(&p);
        return rc;
}

static int read_rows(struct ferry_pg *pg, const char *sql, const char *name,
                     int64_t limit, PGresult **res)
{
        struct read_args a = {sql, name, limit, NULL};
        int rc = pg_retry(pg, read_step, &a);
        *res = a.res;
        return rc;
}

void ferry_pg_jobs_free(struct ferry_pg_job_info *jobs, size_t n)
{
        for (size_t i = 0; jobs && i < n; i++) {
                free(jobs[i].name);
                free(jobs[i].src_fp);
                free(jobs[i].dst_fp);
        }
        free(jobs);
}

int ferry_pg_jobs(struct ferry_pg *pg, const char *name,
                  struct ferry_pg_job_info **out, size_t *n)
{
        PGresult *r = NULL;
        *out = NULL;
        *n = 0;
        int rc = read_rows(pg, jobs_sql, name, 0, &r);
        if (rc)
                return rc;
        size_t rows = (size_t)PQntuples(r);
        struct ferry_pg_job_info *j = calloc(rows + 1, sizeof(*j));
        bool oom = !j;
        for (size_t i = 0; !oom && i < rows; i++) {
                int k = (int)i;
                j[i].name = dup_col(r, k, 0, &oom);
                j[i].created = pg_get_i64(r, k, 1);
                j[i].src_fp = dup_col(r, k, 2, &oom);
                j[i].dst_fp = dup_col(r, k, 3, &oom);
                uint64_t *v[] = {&j[i].c.files,
                                 &j[i].c.files_done,
                                 &j[i].c.files_failed,
                                 &j[i].files_pending,
                                 &j[i].c.bytes,
                                 &j[i].c.bytes_done,
                                 &j[i].c.files_vanished,
                                 &j[i].c.dirs,
                                 &j[i].dirs_to_list,
                                 &j[i].c.dirs_failed,
                                 &j[i].meta_to_apply,
                                 &j[i].c.meta_failed,
                                 &j[i].hosts,
                                 &j[i].hosts_running};
                for (int c = 0; c < 14; c++)
                        *v[c] = (uint64_t)pg_get_i64(r, k, 4 + c);
                j[i].paused = pg_get_i64(r, k, 18) != 0;
                j[i].host_jobs = (unsigned)pg_get_i64(r, k, 19);
        }
        PQclear(r);
        if (oom) {
                ferry_pg_jobs_free(j, rows);
                return pg_fail(pg, "out of memory");
        }
        *out = j;
        *n = rows;
        return 0;
}

void ferry_pg_hosts_free(struct ferry_pg_host_info *hosts, size_t n)
{
        for (size_t i = 0; hosts && i < n; i++)
                free(hosts[i].host);
        free(hosts);
}

int ferry_pg_hosts(struct ferry_pg *pg, const char *name,
                   struct ferry_pg_host_info **out, size_t *n)
{
        PGresult *r = NULL;
        *out = NULL;
        *n = 0;
        int rc = read_rows(pg, hosts_sql, name, 0, &r);
        if (rc)
                return rc;
        size_t rows = (size_t)PQntuples(r);
        struct ferry_pg_host_info *h = calloc(rows + 1, sizeof(*h));
        bool oom = !h;
        for (size_t i = 0; !oom && i < rows; i++) {
                int k = (int)i;
                struct ferry_pg_host_info *x = &h[i];
                x->host = dup_col(r, k, 0, &oom);
                x->joined = pg_get_i64(r, k, 1);
                x->last_seen = pg_get_i64(r, k, 2);
                x->left_at = pg_get_i64(r, k, 3);
                x->result = (int)pg_get_i64(r, k, 4);
                x->lease_s = (int)pg_get_i64(r, k, 5);
                x->running = pg_get_i64(r, k, 6) != 0;
                x->files_done = (uint64_t)pg_get_i64(r, k, 7);
                x->bytes_done = (uint64_t)pg_get_i64(r, k, 8);
                /* since its last-but-one renewal (003_hosts.sql) */
                double s = (double)pg_get_i64(r, k, 11) / 1000.0;
                if (x->running && s > 0) {
                        x->files_per_s = (double)pg_get_i64(r, k, 9) / s;
                        x->bytes_per_s = (double)pg_get_i64(r, k, 10) / s;
                }
                x->held_files = (uint64_t)pg_get_i64(r, k, 12);
                x->held_dirs = (uint64_t)pg_get_i64(r, k, 13);
                x->held_expired = (uint64_t)pg_get_i64(r, k, 14);
        }
        PQclear(r);
        if (oom) {
                ferry_pg_hosts_free(h, rows);
                return pg_fail(pg, "out of memory");
        }
        *out = h;
        *n = rows;
        return 0;
}

int ferry_pg_failures(struct ferry_pg *pg, const char *name, uint64_t max,
                      ferry_pg_failure_fn fn, void *arg)
{
        PGresult *r = NULL;
        /* 0: all (a limit no job reaches) */
        int64_t limit = max ? (int64_t)max : INT64_MAX;
        int rc = read_rows(pg, failures_sql, name, limit, &r);
        if (rc)
                return rc;
        for (int i = 0; i < PQntuples(r); i++) {
                struct ferry_pg_failure f = {0};
                f.what = (enum ferry_pg_failure_kind)pg_get_i64(r, i, 3);
                f.path = pg_get_bytes(r, i, 0, &f.path_len);
                if (!PQgetisnull(r, i, 1))
                        f.name = pg_get_bytes(r, i, 1, &f.name_len);
                if (!PQgetisnull(r, i, 2))
                        f.error = pg_get_bytes(r, i, 2, &f.error_len);
                fn(&f, arg);
        }
        PQclear(r);
        return 0;
}
