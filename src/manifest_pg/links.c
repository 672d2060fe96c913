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

/* $1: the job; $2: the rows whose groups to look at (NULL: every group
 * with a row waiting). Nothing while a directory is left to list. Also
 * returns whether the scan is over. */
/* clang-format off */
#define IN_GROUP(t, g) \
        t ".job = $1 AND " t ".lgroup = " g ".lgroup AND " t ".size = " g \
        ".size AND " t ".mtime_ns = " g ".mtime_ns"
static const char release_sql[] =
        "WITH over AS (SELECT NOT EXISTS (SELECT 1 FROM dirs WHERE job = $1"
        " AND list_state = " MF_SQL_INT(PG_LIST_PENDING) ") AS yes),"
        " g AS (SELECT DISTINCT w.lgroup, w.size, w.mtime_ns FROM files w"
        " WHERE w.job = $1 AND w.lwait AND (SELECT yes FROM over) AND"
        " $2::int8[] IS NULL"
        /* the groups of the outcome's rows, from those rows (not from
         * every waiting row), that have a row waiting */
        " UNION SELECT o.lgroup, o.size, o.mtime_ns FROM"
        " (SELECT unnest($2::int8[]) AS id) ids JOIN files o ON o.id = ids.id"
        " WHERE o.job = $1 AND o.lgroup IS NOT NULL"
        " AND (SELECT yes FROM over) AND EXISTS (SELECT 1 FROM files w"
        " WHERE w.lwait AND " IN_GROUP("w", "o") ")),"
        " r AS (SELECT g.lgroup, g.size, g.mtime_ns,"
        " EXISTS (SELECT 1 FROM files l WHERE " IN_GROUP("l", "g")
        " AND l.state = " MF_SQL_INT(MF_ST_DONE) " AND l.gen ="
        " (SELECT gen FROM jobs WHERE id = $1)) AS has_done,"
        " EXISTS (SELECT 1 FROM files l WHERE " IN_GROUP("l", "g")
        " AND l.state = " MF_SQL_INT(MF_ST_PENDING) " AND NOT l.lwait)"
        " AS has_lead FROM g),"
        " first AS (SELECT (SELECT min(w.id) FROM files w WHERE w.lwait AND "
        IN_GROUP("w", "r") ") AS id FROM r"
        " WHERE NOT r.has_done AND NOT r.has_lead),"
        " u AS (UPDATE files f SET lwait = false FROM r WHERE f.lwait AND "
        IN_GROUP("f", "r") " AND (r.has_done OR f.id IN (SELECT id FROM"
        " first)) RETURNING 1),"
        /* (none should: a row no listing finds in a group waits no more,
         * job.c; but none that does may wait for ever) */
        " n AS (UPDATE files SET lwait = false WHERE job = $1 AND lwait"
        " AND lgroup IS NULL AND $2::int8[] IS NULL RETURNING 1)"
        " SELECT (SELECT count(*) FROM u)::int8 + (SELECT count(*) FROM n),"
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
        else
                pg_param_text(&p, NULL);
        int rc = pg_exec(pg, release_sql, &p, &r, "link groups");
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
