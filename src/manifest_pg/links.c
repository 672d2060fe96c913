/*
 * manifest_pg/links.c - the rows of link groups (sql/pg/008_links.sql) a
 * claim may take: a row of a group made pending waits (lwait) until it is
 * let go here, once the scan of its gen is over. A group with a row done
 * in the gen lets every waiting row go (the claim hands them out as links
 * to that row's copy: claims.c, LEAD); a group with none lets its lowest
 * waiting row go for its data, unless one is let go and pending already.
 * Every host runs it for the groups of its outcomes of names copied (or
 * failed: not those linked, which nothing waits for), in their
 * transaction, and for the whole job when it finds nothing to claim.
 *
 * Cost (bench, one host, 5,000 files in 21 cp -al snapshots, 105,000
 * names): every waiting name is updated once more, when let go; the
 * claims no longer walk them: claims 17.0 s and run 39.1 s before (each
 * claim filtered every pending name), claims 6.1 s, letting go 5.0 s and
 * run 32.3 s with it (the server's times, pg_stat_statements).
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "manifest_types.h"

#include <stdlib.h>

/* $1: the job; $2 (release_of_sql): the rows whose groups to look at.
 * Nothing while a directory is left to list: every part is gated by
 * `over` (a host with nothing to claim runs release_sql every 10-100 ms
 * during the scan). Each group's waiting rows are found by an index
 * lookup of that group (LATERAL), so that no plan depends on estimates
 * of rows a scan has just added (a join the planner took for 1 row by 1
 * compared 7,700 waiting rows with 770 groups: 3.3 s). Also returns
 * whether the scan is over. */
/* clang-format off */
#define IN_GROUP(t, g) \
        t ".job = $1 AND " t ".lgroup = " g ".lgroup AND " t ".size = " g \
        ".size AND " t ".mtime_ns = " g ".mtime_ns"
#define OVER \
        "WITH over AS (SELECT NOT EXISTS (SELECT 1 FROM dirs WHERE job = $1" \
        " AND list_state = " MF_SQL_INT(PG_LIST_PENDING) ") AS yes),"
/* after g (the groups): a group with a row done in the job's gen lets all
 * its waiting rows go; one with none, and no row let go and pending, its
 * lowest */
#define LET_GO \
        " r AS (SELECT g.lgroup, g.size, g.mtime_ns," \
        " EXISTS (SELECT 1 FROM files l WHERE " IN_GROUP("l", "g") \
        " AND l.state = " MF_SQL_INT(MF_ST_DONE) " AND l.gen =" \
        " (SELECT gen FROM jobs WHERE id = $1)) AS has_done," \
        " EXISTS (SELECT 1 FROM files l WHERE " IN_GROUP("l", "g") \
        " AND l.state = " MF_SQL_INT(MF_ST_PENDING) " AND NOT l.lwait)" \
        " AS has_lead FROM g)," \
        " pick AS (SELECT w.id FROM r CROSS JOIN LATERAL (SELECT w.id" \
        " FROM files w WHERE w.lwait AND " IN_GROUP("w", "r") \
        " ORDER BY w.id LIMIT CASE WHEN r.has_done THEN NULL ELSE 1 END) w" \
        " WHERE r.has_done OR NOT r.has_lead)," \
        " u AS (UPDATE files f SET lwait = false FROM pick WHERE" \
        " f.id = pick.id AND f.lwait RETURNING 1)"
static const char release_sql[] =
        OVER
        " g AS (SELECT DISTINCT w.lgroup, w.size, w.mtime_ns FROM files w"
        " WHERE w.job = $1 AND w.lwait AND (SELECT yes FROM over)),"
        LET_GO ","
        /* (none should: a row no listing finds in a group waits no more,
         * job.c; but none that does may wait for ever) */
        " n AS (UPDATE files SET lwait = false WHERE job = $1 AND lwait"
        " AND lgroup IS NULL AND (SELECT yes FROM over) RETURNING 1)"
        " SELECT (SELECT count(*) FROM u)::int8 + (SELECT count(*) FROM n),"
        " (SELECT yes FROM over)::int::int8";
/* the groups of an outcome's rows, from those rows by id */
static const char release_of_sql[] =
        OVER
        " g AS (SELECT DISTINCT o.lgroup, o.size, o.mtime_ns FROM"
        " unnest($2::int8[]) AS ids (id) CROSS JOIN LATERAL (SELECT"
        " o.lgroup, o.size, o.mtime_ns FROM files o WHERE o.id = ids.id"
        " AND o.job = $1 AND o.lgroup IS NOT NULL) o"
        " WHERE (SELECT yes FROM over)),"
        LET_GO
        " SELECT (SELECT count(*) FROM u)::int8,"
        " (SELECT yes FROM over)::int::int8";
/* clang-format on */

static int release(struct ferry_pg *pg, const int64_t *ids, size_t n,
                   uint64_t *let_go, bool *scan_over)
{
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        if (ids)
                pg_param_int_array(&p, ids, n);
        int rc = pg_exec(pg, ids ? release_of_sql : release_sql, &p, &r,
                         "link groups");
        pg_params_release(&p);
        if (rc)
                return rc;
        if (let_go)
                *let_go = (uint64_t)pg_get_i64(r, 0, 0);
        if (scan_over)
                *scan_over = pg_get_i64(r, 0, 1) != 0;
        PQclear(r);
        return 0;
}

int pg_links_release(struct ferry_pg *pg, const struct ferry_pg_outcome *o,
                     size_t n)
{
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += o[i].link;
        if (!k)
                return 0;
        int64_t *ids = malloc(k * sizeof(*ids));
        if (!ids)
                return pg_fail(pg, "out of memory");
        k = 0;
        for (size_t i = 0; i < n; i++)
                if (o[i].link)
                        ids[k++] = o[i].id;
        int rc = release(pg, ids, k, NULL, NULL);
        free(ids);
        return rc;
}

struct release_args {
        uint64_t let_go;
        bool scan_over;
};

static int release_step(struct ferry_pg *pg, void *arg)
{
        struct release_args *a = arg;
        return release(pg, NULL, 0, &a->let_go, &a->scan_over);
}

int ferry_pg_links_release(struct ferry_pg *pg, uint64_t *let_go,
                           bool *scan_over)
{
        *let_go = 0;
        *scan_over = false;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct release_args a = {0, false};
        int rc = pg_retry(pg, release_step, &a);
        *let_go = a.let_go;
        *scan_over = a.scan_over;
        return rc;
}

/* Whether a row of the job waits, and whether a file row is leased (a
 * claim in flight: its outcome may let rows go), each by a partial index
 * (files_lwait; files_leased, whose rows with a token are the few ever
 * claimed and still pending), not a count of the pending rows. */
/* clang-format off */
static const char waiting_sql[] =
        "SELECT EXISTS (SELECT 1 FROM files WHERE job = $1 AND lwait)::int::int8,"
        " EXISTS (SELECT 1 FROM files WHERE claim_token IS NOT NULL AND state = "
        MF_SQL_INT(MF_ST_PENDING) " AND job = $1 AND lease_until >= now())"
        "::int::int8";
/* clang-format on */

struct waiting_args {
        bool waiting, leased;
};

static int waiting_step(struct ferry_pg *pg, void *arg)
{
        struct waiting_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(pg, waiting_sql, &p, &r, "link groups");
        pg_params_release(&p);
        if (rc)
                return rc;
        a->waiting = pg_get_i64(r, 0, 0) != 0;
        a->leased = pg_get_i64(r, 0, 1) != 0;
        PQclear(r);
        return 0;
}

int ferry_pg_links_waiting(struct ferry_pg *pg, bool *waiting, bool *leased)
{
        *waiting = *leased = false;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct waiting_args a = {false, false};
        int rc = pg_retry(pg, waiting_step, &a);
        *waiting = a.waiting;
        *leased = a.leased;
        return rc;
}
