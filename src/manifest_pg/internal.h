/*
 * manifest_pg/internal.h - what the files of src/manifest_pg/ share: the
 * handle, statement parameters, reading binary results, and running an
 * operation again after a lost connection.
 *
 * conn.c owns the connection (connect, wait, reconnect) and the
 * migrations; job.c joining a job and adding rows; claims.c claims,
 * renewals, outcomes and leaving; verify.c what a verify of a job reads
 * and makes pending again; status.c what `ferry status` reads. Every
 * statement is sent with PQexecParams and asks for binary results
 * (pg_get_* read them).
 */
#ifndef FERRY_MANIFEST_PG_INTERNAL_H
#define FERRY_MANIFEST_PG_INTERNAL_H

#include "manifest_pg/pg.h"
#include "manifest_pg/pq.h" /* libpq, loaded at first use */

#include <stdbool.h>
#include <stdint.h>

/* dirs.list_state (sql/pg/001_schema.sql) */
#define PG_LIST_PENDING 0
#define PG_LISTED       1
#define PG_LIST_FAILED  2
/* dirs.state (sql/pg/002_dir_meta.sql) */
#define PG_META_TO_APPLY 0
#define PG_META_APPLIED  1
#define PG_META_FAILED   2

/* What a step returns besides 0 and FERRY_* codes: the connection was
 * lost, or the server asked for the transaction again (deadlock,
 * serialization): pg_retry runs the whole operation again. */
#define PG_AGAIN (-1)

/* The DST record of a file row (006_rerun.sql), as pg_get_row reads it:
 * columns 15-17 of a claim's or a page's rows. */
#define PG_DST_COLS(t)                                                         \
        "coalesce(" t ".dst_type, 0)::int8, coalesce(" t ".dst_size, 0),"      \
        " coalesce(" t ".dst_mtime_ns, 0)"

struct ferry_pg {
        PGconn *conn;
        char *url;
        int wait_s;
        unsigned reconnects;
        /* reconnects + 1 when a dry run made its table (dryrun.c), 0 */
        unsigned dry_conn;
        int64_t job;      /* 0 until ferry_pg_job_join */
        int64_t created;  /* its gen's start, whole seconds since the epoch
                           * (rounded down: ctimes from then on are at
                           * least it, copy_dst.c) */
        int64_t gen;      /* the job's scan generation (006_rerun.sql) */
        bool src_differs; /* the last join's refusal was SRC's */
        char *host;
        char errmsg[1024];
};

int pg_fail(struct ferry_pg *pg, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Parameters of one statement: text (numbers, arrays) or binary (bytea).
 * The values are copied into the set; pg_params_release frees them. */
struct pg_params {
        int n, cap;
        char **vals;
        int *lens, *fmts;
        bool oom;
};
void pg_params_init(struct pg_params *p);
void pg_params_release(struct pg_params *p);
void pg_param_int(struct pg_params *p, int64_t v);
void pg_param_text(struct pg_params *p, const char *s); /* NULL: SQL NULL */
void pg_param_bytes(struct pg_params *p, const void *b, size_t len);
/* A bigint[] in text form: "{1,2,3}". */
void pg_param_int_array(struct pg_params *p, const int64_t *v, size_t n);
/* An array of n strings as text[], each in hex (any bytes). */
void pg_param_hex_array(struct pg_params *p, const char *const *v, size_t n);

/* Runs sql with p (may be NULL), binary results. Returns 0 with *res
 * (caller PQclear()s; res may be NULL to drop it), PG_AGAIN (lost
 * connection, deadlock, serialization failure), or FERRY_EMANIFEST with
 * "manifest <what> failed: <server's message>". */
int pg_exec(struct ferry_pg *pg, const char *sql, const struct pg_params *p,
            PGresult **res, const char *what);
/* Runs sql, whose $1 is the joined job and $2 (arg) this host or its
 * gen, in pg_retry; *out: the first column of its one row (an int8). */
enum pg_count_arg { PG_JOB_ONLY, PG_AND_HOST, PG_AND_GEN };
int pg_job_count(struct ferry_pg *pg, const char *sql, enum pg_count_arg arg,
                 uint64_t *out, const char *what);
/* Whether row 0 of r (columns 1 and 2: a job's src_fp and dst_fp) is
 * job name's with these fingerprints: 0, or FERRY_EPATH with the message
 * naming the side that differs. */
int pg_job_check_fps(struct ferry_pg *pg, const char *name, const PGresult *r,
                     const char *src_fp, const char *dst_fp);
/* Job j (an SQL expression) has nothing left to do: no directory to list,
 * no listed one whose metadata is to apply, no file pending (what failed
 * is not work left), no deletion under a live claim (delete.c: a host
 * deleting a file SRC has again would delete the next gen's copy): a
 * host that joins it begins a new scan (rerun.c). */
/* clang-format off */
#define JOB_OVER(j) \
        " NOT EXISTS (SELECT 1 FROM dirs WHERE job = " j " AND (list_state = " \
        MF_SQL_INT(PG_LIST_PENDING) " OR (state = " \
        MF_SQL_INT(PG_META_TO_APPLY) " AND list_state = " \
        MF_SQL_INT(PG_LISTED) ") OR lease_until >= now()))" \
        " AND NOT EXISTS (SELECT 1 FROM files WHERE job = " j " AND (state = " \
        MF_SQL_INT(MF_ST_PENDING) " OR (state = " \
        MF_SQL_INT(MF_ST_REMOVED) " AND lease_until >= now())))"
/* clang-format on */

/* verify.c: page's rows from r (columns 0-17 as pg_get_row reads them;
 * the page owns r, cleared at once when it has no row); 0, or the
 * failure of no memory (r cleared). */
struct ferry_pg_page;
int pg_page_of_result(struct ferry_pg *pg, PGresult *r,
                      struct ferry_pg_page *page);
/* verify.c: ferry_pg_job_find of job name with DST dst_fp, whatever its
 * SRC's fingerprint (rerun.c: one a run would take as the job's new SRC). */
int pg_job_find_any_src(struct ferry_pg *pg, const char *name,
                        const char *dst_fp);
/* BEGIN, COMMIT, ROLLBACK (the last ignores failures: after a lost
 * connection there is nothing to roll back). */
int pg_begin(struct ferry_pg *pg);
/* del_limit.c: gives back a host's share of --max-delete it did not use,
 * and counts what it kept, in the caller's transaction (NULL: nothing). */
struct ferry_pg_del_share;
int pg_del_give_back(struct ferry_pg *pg, const struct ferry_pg_del_share *s);
int pg_commit(struct ferry_pg *pg);
void pg_rollback(struct ferry_pg *pg);

/* Runs step(pg, arg) until it returns anything but PG_AGAIN, making the
 * connection again in between (for up to pg->wait_s seconds). */
typedef int (*pg_step_fn)(struct ferry_pg *pg, void *arg);
int pg_retry(struct ferry_pg *pg, pg_step_fn step, void *arg);

/* Appends to b the rows of a VALUES list: rows times "(" ord, then $k::
 * casts[c] for each of ncols columns, k counting from first ")", joined
 * by commas. ord (when with_ord) is the row's index, a literal. */
struct ferry_buf;
void pg_values_sql(struct ferry_buf *b, size_t rows, int first,
                   const char *const *casts, int ncols, bool with_ord);

/* links.c: in the transaction of outcomes o[0..n-1], lets go the waiting
 * rows of the link groups of those with link set that may be claimed. */
struct ferry_pg_outcome;
int pg_links_release(struct ferry_pg *pg, const struct ferry_pg_outcome *o,
                     size_t n);

/* Row k of a result whose columns 1 to 14 are a PG_FILES claim's
 * (claims.c), into w (pointing into r). */
void pg_get_row(const PGresult *r, int k, struct ferry_pg_row *w);

/* Binary result columns (cast to bigint in the SQL: pg_get_i64 reads
 * int8 only). NULL reads as 0 / NULL. */
int64_t pg_get_i64(const PGresult *r, int row, int col);
const char *pg_get_bytes(const PGresult *r, int row, int col, size_t *len);

#endif
