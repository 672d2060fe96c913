/*
 * manifest_pg/dryrun.c - what a dry run with --delete asks of a shared
 * job (pg.h; src/shared/dryrun.c).
 *
 * A run marks removed the file rows its scan did not see (rerun.c,
 * removed_sql: a row of an older gen once every directory of the run's
 * gen was listed) and then its --delete claims the removed rows not yet
 * tried in that gen (claims.c, claim_del_files_sql). A dry run writes
 * none of that: the ids of the rows its own listing finds are kept in a
 * temporary table of its session (ferry_dry_seen), and the rows a run
 * would delete are then those of the same two kinds that it does not
 * hold. The table lives as long as the connection: when pg_retry had to
 * connect anew it is gone, and the dry run says so instead of listing
 * every row as removed.
 *
 * The run's gen: the job's own while its run is under way, the next one
 * when it is over (a run of a job that is over begins a new scan).
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"
#include "manifest_pg/pg_dry.h"

#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* the rows a run's --delete would claim: $2 (0 or 1) is added to the
 * job's gen to make the run's; f: files, j: the job */
#define WOULD_GO                                                               \
        " (CASE WHEN f.state = " MF_SQL_INT(                                   \
                MF_ST_REMOVED) " THEN coalesce(f.del_tried, 0) < j.gen + $2"   \
                               " ELSE f.gen < j.gen + $2 END)"                 \
                               " AND NOT EXISTS (SELECT 1 FROM "               \
                               "pg_temp.ferry_dry_seen s"                      \
                               " WHERE s.id = f.id)"

/* what the guard weighs besides the rows that would go (counted by the
 * dry run: the selection keeps some): whether the run's scan saw a file
 * so far, and the files done now */
/* clang-format off */
static const char check_sql[] =
        "SELECT EXISTS (SELECT 1 FROM files f JOIN jobs j ON j.id = f.job"
        " WHERE f.job = $1 AND $2 = 0 AND f.gen = j.gen AND f.state <> "
        MF_SQL_INT(MF_ST_REMOVED) ")::int::int8,"
        " (SELECT coalesce(sum(files_done), 0) FROM counts"
        " WHERE job = $1)::int8";

/* the columns of a PG_FILES claim (pg_get_row), its token's place 0, and
 * the row's state (18) */
static const char removed_sql[] =
        "SELECT 0::int8, f.id, f.dir, d.path, f.name, f.type::int8, f.size,"
        " f.mtime_ns, f.ctime_ns, f.mode::int8, f.uid, f.gid, f.dev, f.ino,"
        " f.rdev, " PG_DST_COLS("f") ", f.state::int8 FROM files f"
        " JOIN dirs d ON d.id = f.dir JOIN jobs j ON j.id = f.job"
        " WHERE f.job = $1 AND f.id > $3::int8 AND" WOULD_GO
        " ORDER BY f.id LIMIT $4::int8";
/* clang-format on */

/* The table is this connection's: fails when pg_retry made a new one. */
static int same_conn(struct ferry_pg *pg)
{
        if (pg->dry_conn && pg->dry_conn == pg->reconnects + 1)
                return 0;
        return pg_fail(pg, "the connection to the database was lost during "
                           "the dry run: run it again");
}

static int begin_step(struct ferry_pg *pg, void *arg)
{
        (void)arg;
        int rc = pg_exec(pg,
                         "CREATE TEMP TABLE IF NOT EXISTS ferry_dry_seen"
                         " (id bigint PRIMARY KEY)",
                         NULL, NULL, "dry run's table");
        return rc ? rc
                  : pg_exec(pg, "TRUNCATE pg_temp.ferry_dry_seen", NULL, NULL,
                            "dry run's table");
}

int ferry_pg_dry_seen_begin(struct ferry_pg *pg)
{
        if (!pg->job)
                return pg_fail(pg, "no job found");
        int rc = pg_retry(pg, begin_step, NULL);
        pg->dry_conn = rc ? 0 : pg->reconnects + 1;
        return rc;
}

struct seen_args {
        const int64_t *ids;
        size_t n;
};

static int seen_step(struct ferry_pg *pg, void *arg)
{
        const struct seen_args *a = arg;
        int rc = same_conn(pg);
        if (rc)
                return rc;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int_array(&p, a->ids, a->n);
        rc = p.oom ? pg_fail(pg, "out of memory")
                   : pg_exec(pg,
                             "INSERT INTO pg_temp.ferry_dry_seen SELECT"
                             " unnest($1::int8[]) ON CONFLICT DO NOTHING",
                             &p, NULL, "dry run's table");
        pg_params_release(&p);
        return rc;
}

int ferry_pg_dry_seen(struct ferry_pg *pg, const int64_t *ids, size_t n)
{
        if (!n)
                return 0;
        struct seen_args a = {ids, n};
        return pg_retry(pg, seen_step, &a);
}

/* Runs sql with $1 the job, $2 over, and when paging, $3 after and $4
 * max (page: the table must still be this connection's). */
static int dry_exec(struct ferry_pg *pg, const char *sql, bool over,
                    const int64_t *page, PGresult **r, const char *what)
{
        int rc = page ? same_conn(pg) : 0;
        if (rc)
                return rc;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        pg_param_int(&p, over);
        for (int i = 0; page && i < 2; i++)
                pg_param_int(&p, page[i]);
        rc = pg_exec(pg, sql, &p, r, what);
        pg_params_release(&p);
        return rc;
}

struct check_args {
        bool over;
        struct ferry_pg_delete_check *out;
};

static int check_step(struct ferry_pg *pg, void *arg)
{
        struct check_args *a = arg;
        PGresult *r = NULL;
        int rc = dry_exec(pg, check_sql, a->over, NULL, &r,
                          "dry run's delete check");
        if (rc)
                return rc;
        a->out->complete = true;
        a->out->seen = pg_get_i64(r, 0, 0) != 0;
        a->out->done = (uint64_t)pg_get_i64(r, 0, 1);
        PQclear(r);
        return 0;
}

int ferry_pg_dry_removed_check(struct ferry_pg *pg, bool over,
                               struct ferry_pg_delete_check *out)
{
        memset(out, 0, sizeof(*out));
        struct check_args a = {over, out};
        return pg_retry(pg, check_step, &a);
}

struct removed_args {
        bool over;
        int64_t after;
        size_t max;
        struct ferry_pg_page *page;
};

static int removed_step(struct ferry_pg *pg, void *arg)
{
        struct removed_args *a = arg;
        int64_t page[2] = {a->after, (int64_t)a->max};
        PGresult *r = NULL;
        int rc = dry_exec(pg, removed_sql, a->over, page, &r,
                          "dry run's removed rows");
        if (rc || (rc = pg_page_of_result(pg, r, a->page)))
                return rc;
        for (size_t i = 0; i < a->page->n; i++)
                a->page->rows[i].state = (int)pg_get_i64(r, (int)i, 18);
        return 0;
}

int ferry_pg_dry_removed(struct ferry_pg *pg, bool over, int64_t after,
                         size_t max, struct ferry_pg_page *page)
{
        memset(page, 0, sizeof(*page));
        if (max == 0 || max > FERRY_PG_BATCH_MAX)
                return pg_fail(pg, "a page of %zu rows: out of range", max);
        struct removed_args a = {over, after, max, page};
        return pg_retry(pg, removed_step, &a);
}

/* ---- what the run under way was given ---------------------------------- */

struct options_args {
        bool *over;
        char **selection;
        bool *has_limit;
        int64_t *limit;
};

static int options_step(struct ferry_pg *pg, void *arg)
{
        struct options_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        int rc = pg_exec(pg,
                         "SELECT CASE WHEN selection_gen = gen THEN"
                         " convert_to(selection, 'UTF8') END,"
                         " (del_gen IS NOT DISTINCT FROM gen)::int::int8,"
                         " coalesce(del_limit, -1),"
                         " (EXISTS (SELECT 1 FROM dirs WHERE job = $1"
                         " AND parent IS NULL) AND" JOB_OVER(
                                 "$1") ")::int::int8"
                                       " FROM jobs WHERE id = $1",
                         &p, &r, "job's options");
        pg_params_release(&p);
        if (rc)
                return rc;
        free(*a->selection);
        *a->selection = NULL;
        *a->has_limit = false;
        if (PQntuples(r) == 1) {
                size_t len = 0;
                const char *t = pg_get_bytes(r, 0, 0, &len);
                if (t && !(*a->selection = strndup(t, len)))
                        rc = pg_fail(pg, "out of memory");
                *a->has_limit = pg_get_i64(r, 0, 1) != 0;
                *a->limit = pg_get_i64(r, 0, 2);
                *a->over = pg_get_i64(r, 0, 3) != 0;
        }
        PQclear(r);
        return rc;
}

int ferry_pg_dry_job_state(struct ferry_pg *pg, bool *over, char **selection,
                           bool *has_limit, int64_t *limit)
{
        *over = false;
        *selection = NULL;
        *has_limit = false;
        *limit = -1;
        struct options_args a = {over, selection, has_limit, limit};
        return pg_retry(pg, options_step, &a);
}
