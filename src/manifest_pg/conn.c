/*
 * manifest_pg/conn.c - the connection to the shared manifest: connecting
 * (and waiting while the server is down or restarting), the migrations of
 * sql/pg/ at connect, running statements, and running an operation again
 * on a new connection after the old one was lost (pg_retry).
 *
 * Migrations: one transaction that first takes a transaction-scoped
 * advisory lock, so that of several hosts connecting at once the first
 * migrates and the others wait for its COMMIT and find the schema done;
 * schema_version holds one row per migration applied. A schema newer
 * than this ferry knows is refused.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "buf.h"
#include "config.h"
#include "manifest.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Generated from sql/pg/ at build time, in ascending version order. */
extern const struct ferry_migration ferry_pg_migrations[];
extern const int ferry_pg_n_migrations;

/* pg_advisory_xact_lock's key for the migrations: "FRRY" and 1 */
#define PG_MIGRATE_LOCK "5063461478213009409" /* 0x4652525900000001 */

int pg_fail(struct ferry_pg *pg, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(pg->errmsg, sizeof(pg->errmsg), fmt, ap);
        va_end(ap);
        /* libpq's messages span lines ("...failed: ...\n\tIs the server
         * running...?\n"): ours is one line, each break one space */
        char *w = pg->errmsg;
        for (const char *r = pg->errmsg; *r;) {
                if (*r != '\n') {
                        *w++ = *r++;
                        continue;
                }
                while (*r == '\n' || *r == '\t' || *r == ' ')
                        r++;
                if (*r)
                        *w++ = ' ';
        }
        *w = '\0';
        return FERRY_EMANIFEST;
}

const char *ferry_pg_errmsg(const struct ferry_pg *pg)
{
        return pg->errmsg;
}

unsigned ferry_pg_reconnects(const struct ferry_pg *pg)
{
        return pg->reconnects;
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0)
                ;
}

/* libpq's settings before the url's own (which override them): a
 * connection that stops answering (a cut link) fails within seconds
 * instead of TCP's minutes, and every call waits and tries again. */
static const char *const conn_keys[] = {
        "connect_timeout",     "keepalives",       "keepalives_idle",
        "keepalives_interval", "keepalives_count", "tcp_user_timeout",
        "application_name",    "dbname",           NULL};

/* The server's notices ("already exists, skipping") are no failures and
 * no business of ferry's output. */
static void drop_notice(void *arg, const char *message)
{
}

/* One connection, waiting up to pg->wait_s while the server does not
 * answer or refuses connections for now. */
static int conn_make(struct ferry_pg *pg)
{
        const char *vals[] = {"5",     "1",     "5",     "2", "3",
                              "10000", "ferry", pg->url, NULL};
        double deadline = now_s() + pg->wait_s, delay = 0.1;
        bool answered_once = false;
        for (;;) {
                PGconn *c = PQconnectdbParams(conn_keys, vals, 1);
                if (c && PQstatus(c) == CONNECTION_OK) {
                        PQsetNoticeProcessor(c, drop_notice, NULL);
                        /* every statement names its tables unqualified;
                         * a COMMIT is durable before it returns (a server
                         * set to synchronous_commit off: not ours) */
                        PGresult *r = PQexec(
                                c, "SET search_path = ferry;"
                                   "SELECT set_config('synchronous_commit',"
                                   " 'on', false) WHERE current_setting("
                                   "'synchronous_commit') = 'off'");
                        bool set = PQresultStatus(r) == PGRES_TUPLES_OK;
                        PQclear(r);
                        if (set) {
                                pg->conn = c;
                                return 0;
                        }
                }
                pg_fail(pg, "cannot connect to the shared manifest: %s",
                        c ? PQerrorMessage(c) : "out of memory");
                PQfinish(c);
                PGPing ping = PQpingParams(conn_keys, vals, 1);
                if (ping == PQPING_NO_ATTEMPT)
                        return FERRY_EMANIFEST;
                /* it answers, yet refused us: once more (it may have come
                 * up between the two), then it is this login's fault */
                if (ping == PQPING_OK) {
                        if (answered_once)
                                return FERRY_EMANIFEST;
                        answered_once = true;
                        continue;
                }
                double left = deadline - now_s();
                if (left <= 0) {
                        size_t len = strlen(pg->errmsg);
                        snprintf(pg->errmsg + len, sizeof(pg->errmsg) - len,
                                 " (waited %d s)", pg->wait_s);
                        return FERRY_EMANIFEST;
                }
                sleep_s(delay < left ? delay : left);
                delay = delay * 2 > 2 ? 2 : delay * 2;
        }
}

/* ---- statements ------------------------------------------------------ */

void pg_params_init(struct pg_params *p)
{
        memset(p, 0, sizeof(*p));
}

void pg_params_release(struct pg_params *p)
{
        for (int i = 0; i < p->n; i++)
                free(p->vals[i]);
        free(p->vals);
        free(p->lens);
        free(p->fmts);
        pg_params_init(p);
}

static void param_add(struct pg_params *p, char *val, int len, int fmt)
{
        if (p->n == p->cap) {
                int cap = p->cap ? 2 * p->cap : 16;
                char **v = realloc(p->vals, (size_t)cap * sizeof(*v));
                if (v)
                        p->vals = v;
                int *l = realloc(p->lens, (size_t)cap * sizeof(*l));
                if (l)
                        p->lens = l;
                int *f = realloc(p->fmts, (size_t)cap * sizeof(*f));
                if (f)
                        p->fmts = f;
                if (!v || !l || !f) {
                        p->oom = true;
                        free(val);
                        return;
                }
                p->cap = cap;
        }
        p->vals[p->n] = val;
        p->lens[p->n] = len;
        p->fmts[p->n] = fmt;
        p->n++;
}

void pg_param_int(struct pg_params *p, int64_t v)
{
        char *s = NULL;
        if (asprintf(&s, "%lld", (long long)v) < 0) {
                p->oom = true;
                return;
        }
        param_add(p, s, 0, 0);
}

void pg_param_text(struct pg_params *p, const char *s)
{
        char *d = s ? strdup(s) : NULL;
        if (s && !d) {
                p->oom = true;
                return;
        }
        param_add(p, d, 0, 0);
}

void pg_param_bytes(struct pg_params *p, const void *b, size_t len)
{
        if (!b) {
                param_add(p, NULL, 0, 1);
                return;
        }
        char *d = malloc(len ? len : 1);
        if (!d) {
                p->oom = true;
                return;
        }
        memcpy(d, b, len);
        param_add(p, d, (int)len, 1);
}

void pg_param_int_array(struct pg_params *p, const int64_t *v, size_t n)
{
        char *s = malloc(n * 21 + 3), *e = s;
        if (!s) {
                p->oom = true;
                return;
        }
        *e++ = '{';
        for (size_t i = 0; i < n; i++)
                e += sprintf(e, "%s%lld", i ? "," : "", (long long)v[i]);
        *e++ = '}';
        *e = '\0';
        param_add(p, s, 0, 0);
}

void pg_param_hex_array(struct pg_params *p, const char *const *v, size_t n)
{
        size_t len = 3;
        for (size_t i = 0; i < n; i++)
                len += 2 * strlen(v[i]) + 3;
        char *s = malloc(len), *e = s;
        if (!s) {
                p->oom = true;
                return;
        }
        *e++ = '{';
        for (size_t i = 0; i < n; i++) {
                if (i)
                        *e++ = ',';
                *e++ = '"'; /* "" is an element: an empty string */
                for (const unsigned char *c = (const unsigned char *)v[i]; *c;
                     c++)
                        e += sprintf(e, "%02x", *c);
                *e++ = '"';
        }
        *e++ = '}';
        *e = '\0';
        param_add(p, s, 0, 0);
}

void pg_values_sql(struct ferry_buf *b, size_t rows, int first,
                   const char *const *casts, int ncols, bool with_ord)
{
        int k = first;
        for (size_t i = 0; i < rows; i++) {
                ferry_buf_adds(b, i ? ",(" : "(");
                if (with_ord)
                        ferry_buf_addf(b, "%zu,", i);
                for (int c = 0; c < ncols; c++)
                        ferry_buf_addf(b, "%s$%d::%s", c ? "," : "", k++,
                                       casts[c]);
                ferry_buf_adds(b, ")");
        }
}

/* The server's failures that another try answers. */
static bool is_transient(const char *state)
{
        if (!state)
                return false;
        return !strncmp(state, "08", 2) || /* connection exception */
               !strcmp(state, "40001") ||  /* serialization failure */
               !strcmp(state, "40P01") ||  /* deadlock detected */
               !strcmp(state, "57P01") ||  /* admin shutdown */
               !strcmp(state, "57P02") ||  /* crash shutdown */
               !strcmp(state, "57P03");    /* cannot connect now */
}

int pg_exec(struct ferry_pg *pg, const char *sql, const struct pg_params *p,
            PGresult **res, const char *what)
{
        if (res)
                *res = NULL;
        if (!pg->conn)
                return PG_AGAIN;
        if (p && p->oom)
                return pg_fail(pg, "manifest %s failed: out of memory", what);
        PGresult *r = PQexecParams(pg->conn, sql, p ? p->n : 0, NULL,
                                   p ? (const char *const *)p->vals : NULL,
                                   p ? p->lens : NULL, p ? p->fmts : NULL, 1);
        ExecStatusType st = PQresultStatus(r);
        if (r && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)) {
                if (res)
                        *res = r;
                else
                        PQclear(r);
                return 0;
        }
        const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        bool again =
                PQstatus(pg->conn) == CONNECTION_BAD || is_transient(state);
        pg_fail(pg, "manifest %s failed: %s", what,
                r ? PQresultErrorMessage(r) : PQerrorMessage(pg->conn));
        PQclear(r);
        return again ? PG_AGAIN : FERRY_EMANIFEST;
}

int pg_begin(struct ferry_pg *pg)
{
        return pg_exec(pg, "BEGIN", NULL, NULL, "BEGIN");
}

int pg_commit(struct ferry_pg *pg)
{
        return pg_exec(pg, "COMMIT", NULL, NULL, "COMMIT");
}

void pg_rollback(struct ferry_pg *pg)
{
        if (pg->conn && PQtransactionStatus(pg->conn) != PQTRANS_IDLE)
                PQclear(PQexec(pg->conn, "ROLLBACK"));
}

/* A failure the server asks to try again, on a live connection: this
 * many times, then it is reported. */
#define PG_AGAIN_MAX 20

int pg_retry(struct ferry_pg *pg, pg_step_fn step, void *arg)
{
        for (int tries = 0;; tries++) {
                int rc = step(pg, arg);
                pg_rollback(pg); /* a step that failed mid-transaction */
                if (rc != PG_AGAIN)
                        return rc;
                if (pg->conn && PQstatus(pg->conn) == CONNECTION_OK) {
                        if (tries >= PG_AGAIN_MAX)
                                return FERRY_EMANIFEST;
                        continue;
                }
                PQfinish(pg->conn);
                pg->conn = NULL;
                rc = conn_make(pg);
                if (rc)
                        return rc;
                pg->reconnects++;
        }
}

int64_t pg_get_i64(const PGresult *r, int row, int col)
{
        if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
                return 0;
        uint64_t v;
        memcpy(&v, PQgetvalue(r, row, col), 8);
        return (int64_t)be64toh(v);
}

const char *pg_get_bytes(const PGresult *r, int row, int col, size_t *len)
{
        if (PQgetisnull(r, row, col)) {
                *len = 0;
                return NULL;
        }
        *len = (size_t)PQgetlength(r, row, col);
        return PQgetvalue(r, row, col);
}

/* ---- migrations ------------------------------------------------------ */

#ifdef FERRY_TESTING
/* t73: a migration that takes this long, so that a second host must wait
 * for it (FERRY_PG_MIGRATE_PAUSE_MS) */
static void migrate_pause(void)
{
        const char *ms = getenv("FERRY_PG_MIGRATE_PAUSE_MS");
        if (ms && *ms)
                sleep_s(atof(ms) / 1000);
}
#else
static void migrate_pause(void)
{
}
#endif

static int migrate(struct ferry_pg *pg, void *arg)
{
        PGresult *r;
        int rc = pg_begin(pg);
        if (!rc)
                rc = pg_exec(
                        pg, "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK ")",
                        NULL, NULL, "migration lock");
        if (rc)
                return rc;
        migrate_pause();
        rc = pg_exec(pg, "CREATE SCHEMA IF NOT EXISTS ferry", NULL, NULL,
                     "schema");
        if (!rc)
                rc = pg_exec(pg,
                             "CREATE TABLE IF NOT EXISTS ferry.schema_version ("
                             " version integer PRIMARY KEY, name text NOT NULL,"
                             " applied timestamptz NOT NULL DEFAULT now())",
                             NULL, NULL, "schema_version");
        if (!rc)
                rc = pg_exec(pg,
                             "SELECT coalesce(max(version), 0)::int8 FROM "
                             "ferry.schema_version",
                             NULL, &r, "schema version");
        if (rc)
                return rc;
        int64_t have = pg_get_i64(r, 0, 0);
        PQclear(r);
        int latest = ferry_pg_migrations[ferry_pg_n_migrations - 1].version;
        if (have > latest)
                return pg_fail(pg,
                               "the shared manifest's schema is version "
                               "%lld, newer than this ferry's (%d)",
                               (long long)have, latest);
        for (int i = 0; i < ferry_pg_n_migrations; i++) {
                const struct ferry_migration *mg = &ferry_pg_migrations[i];
                if (mg->version <= have)
                        continue;
                /* several statements: the simple protocol (no params) */
                PGresult *x = PQexec(pg->conn, mg->sql);
                if (PQresultStatus(x) != PGRES_COMMAND_OK) {
                        bool lost = PQstatus(pg->conn) == CONNECTION_BAD;
                        pg_fail(pg, "migration %s failed: %s", mg->name,
                                PQresultErrorMessage(x));
                        PQclear(x);
                        return lost ? PG_AGAIN : FERRY_EMANIFEST;
                }
                PQclear(x);
                struct pg_params p;
                pg_params_init(&p);
                pg_param_int(&p, mg->version);
                pg_param_text(&p, mg->name);
                rc = pg_exec(pg,
                             "INSERT INTO ferry.schema_version (version, name) "
                             "VALUES ($1, $2)",
                             &p, NULL, "schema_version insert");
                pg_params_release(&p);
                if (rc)
                        return rc;
        }
        return pg_commit(pg);
}

int ferry_pg_connect(const char *url, int wait_s, struct ferry_pg **out,
                     struct ferry_error *err)
{
        *out = NULL;
        if (ferry_pq_load(err->msg, sizeof(err->msg)))
                return FERRY_EMANIFEST;
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(url, &perr);
        if (!opts) {
                snprintf(err->msg, sizeof(err->msg),
                         "the shared manifest's address is not a libpq "
                         "connection string: %s",
                         perr ? perr : "out of memory");
                err->msg[strcspn(err->msg, "\n")] = '\0';
                PQfreemem(perr);
                return FERRY_EUSAGE;
        }
        PQconninfoFree(opts);
        struct ferry_pg *pg = calloc(1, sizeof(*pg));
        if (!pg || !(pg->url = strdup(url))) {
                free(pg);
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        pg->wait_s = wait_s;
        int rc = conn_make(pg);
        if (!rc)
                rc = pg_retry(pg, migrate, NULL);
        if (rc) {
                snprintf(err->msg, sizeof(err->msg), "%s", pg->errmsg);
                ferry_pg_close(pg);
                return rc;
        }
        *out = pg;
        return 0;
}

void ferry_pg_close(struct ferry_pg *pg)
{
        if (!pg)
                return;
        PQfinish(pg->conn);
        free(pg->url);
        free(pg->host);
        free(pg);
}

struct count_args {
        const char *sql, *what;
        enum pg_count_arg arg;
        uint64_t n;
};

static int count_step(struct ferry_pg *pg, void *arg)
{
        struct count_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, pg->job);
        if (a->arg == PG_AND_HOST)
                pg_param_text(&p, pg->host);
        else if (a->arg == PG_AND_GEN)
                pg_param_int(&p, pg->gen);
        int rc = pg_exec(pg, a->sql, &p, &r, a->what);
        pg_params_release(&p);
        if (rc)
                return rc;
        a->n = (uint64_t)pg_get_i64(r, 0, 0);
        PQclear(r);
        return 0;
}

int pg_job_count(struct ferry_pg *pg, const char *sql, enum pg_count_arg arg,
                 uint64_t *out, const char *what)
{
        *out = 0;
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        struct count_args a = {sql, what, arg, 0};
        int rc = pg_retry(pg, count_step, &a);
        *out = a.n;
        return rc;
}
