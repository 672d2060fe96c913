/*
 * manifest_pg/chunks.c - a large file's chunks in a shared job (pg.h,
 * sql/pg/013_chunks.sql): a chunk durable in a host's temp file recorded
 * under the claim that holds its row (ferry_pg_record_chunk), the plan a
 * claim of the row hands out from what was recorded
 * (ferry_pg_chunk_plan), and the rows dropped once the file is done
 * (ferry_pg_chunks_drop). As the SQLite manifest's (manifest/chunks.c),
 * without its repair of a done file's chunks: a shared --verify names
 * the file.
 */
#define _GNU_SOURCE
#include "manifest_pg/internal.h"

#include "chunks.h"
#include "manifest_types.h"

#include <stdlib.h>
#include <string.h>

/* ---- recording ------------------------------------------------------ */

/* clang-format off */
/* $1 file, $2 the claim's token: the row, locked, when still the claim's
 * and pending */
static const char mine_sql[] =
        "SELECT 1 FROM files WHERE id = $1 AND claim_token = $2 AND state = "
        MF_SQL_INT(MF_ST_PENDING) " FOR UPDATE";
/* $1 file, $2... the temp and SRC (ident): another record's rows go
 * first */
static const char other_sql[] =
        "DELETE FROM partial WHERE file = $1 AND (chunk_size, tmp_ino,"
        " src_size, src_mtime_ns, src_ctime_ns) IS DISTINCT FROM"
        " ($2::int8, $3::int8, $4::int8, $5::int8, $6::int8)";
static const char partial_sql[] =
        "INSERT INTO partial (file, chunk_size, tmp_ino, src_size,"
        " src_mtime_ns, src_ctime_ns) VALUES ($1, $2, $3, $4, $5, $6)"
        " ON CONFLICT (file) DO NOTHING";
/* $1 file, $2 idx, $3 hash */
static const char chunk_sql[] =
        "INSERT INTO chunks (file, idx, hash) VALUES ($1, $2, $3)"
        " ON CONFLICT (file, idx) DO UPDATE SET hash = EXCLUDED.hash";
/* clang-format on */

enum chunk_stmt { C_MINE, C_OTHER, C_PARTIAL, C_CHUNK };

/* Runs statement k of a chunk's record with its parameters. */
static int exec_chunk(struct ferry_pg *pg, enum chunk_stmt k,
                      const struct ferry_pg_chunk *c, PGresult **r)
{
        static const char *const sql[] = {mine_sql, other_sql, partial_sql,
                                          chunk_sql};
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int(&p, c->file);
        if (k == C_MINE)
                pg_param_int(&p, c->token);
        if (k == C_OTHER || k == C_PARTIAL) {
                pg_param_int(&p, (int64_t)c->chunk_size);
                pg_param_int(&p, (int64_t)c->tmp_ino);
                pg_param_int(&p, (int64_t)c->src_size);
                pg_param_int(&p, c->src_mtime_ns);
                pg_param_int(&p, c->src_ctime_ns);
        }
        if (k == C_CHUNK) {
                pg_param_int(&p, c->idx);
                pg_param_bytes(&p, c->hash, sizeof(c->hash));
        }
        int rc = p.oom ? pg_fail(pg, "out of memory")
                       : pg_exec(pg, sql[k], &p, r, "chunk record");
        pg_params_release(&p);
        return rc;
}

/* One transaction: nothing when the row is no longer the claim's (a late
 * host's chunk is not the copy's that holds the row now). */
static int record_step(struct ferry_pg *pg, void *arg)
{
        const struct ferry_pg_chunk *c = arg;
        PGresult *r = NULL;
        int rc = pg_begin(pg);
        if (!rc)
                rc = exec_chunk(pg, C_MINE, c, &r);
        bool mine = !rc && PQntuples(r) == 1;
        PQclear(r);
        if (!rc && mine)
                rc = exec_chunk(pg, C_OTHER, c, NULL);
        if (!rc && mine)
                rc = exec_chunk(pg, C_PARTIAL, c, NULL);
        if (!rc && mine)
                rc = exec_chunk(pg, C_CHUNK, c, NULL);
        return rc ? rc : pg_commit(pg);
}

int ferry_pg_record_chunk(struct ferry_pg *pg, const struct ferry_pg_chunk *c)
{
        if (!pg->job)
                return pg_fail(pg, "no job joined");
        return pg_retry(pg, record_step, (void *)c);
}

/* ---- the plan at a claim ---------------------------------------------- */

struct plan_args {
        int64_t file;
        const struct ferry_pg_chunk *src; /* the row's SRC (no idx, hash) */
        struct ferry_chunk_plan *plan;
};

/* clang-format off */
static const char plan_sql[] =
        "SELECT p.chunk_size, p.tmp_ino, p.src_size, p.src_mtime_ns,"
        " p.src_ctime_ns, c.idx::int8, c.hash FROM partial p"
        " JOIN chunks c ON c.file = p.file WHERE p.file = $1 ORDER BY c.idx";
/* clang-format on */

static int plan_step(struct ferry_pg *pg, void *arg)
{
        struct plan_args *a = arg;
        struct pg_params p;
        PGresult *r = NULL;
        pg_params_init(&p);
        pg_param_int(&p, a->file);
        int rc = pg_exec(pg, plan_sql, &p, &r, "chunk plan");
        pg_params_release(&p);
        if (rc)
                return rc;
        struct ferry_chunk_plan *plan = a->plan;
        const struct ferry_pg_chunk *s = a->src;
        uint32_t done = 0;
        for (int i = 0; i < PQntuples(r); i++) {
                size_t len = 0;
                const char *hash = pg_get_bytes(r, i, 6, &len);
                int64_t idx = pg_get_i64(r, i, 5);
                /* another chunk size, temp or SRC: not this copy's */
                if ((uint64_t)pg_get_i64(r, i, 0) != plan->chunk_size ||
                    (uint64_t)pg_get_i64(r, i, 2) != s->src_size ||
                    pg_get_i64(r, i, 3) != s->src_mtime_ns ||
                    pg_get_i64(r, i, 4) != s->src_ctime_ns || !hash ||
                    len != 16 || idx < 0 || idx >= plan->n)
                        continue;
                plan->tmp_ino = (uint64_t)pg_get_i64(r, i, 1);
                plan->chunks[idx].state = CH_DONE;
                memcpy(plan->chunks[idx].hash, hash, 16);
                done++;
        }
        PQclear(r);
        if (done) {
                plan->resume = true;
                plan->tmp_any_dev = true; /* another host's mount, perhaps */
                plan->tmp_dev = 0;
        }
        return 0;
}

int ferry_pg_chunk_plan(struct ferry_pg *pg, const struct ferry_pg_chunk *src,
                        struct ferry_chunk_plan *plan)
{
        struct plan_args a = {src->file, src, plan};
        return pg_retry(pg, plan_step, &a);
}

/* ---- done ------------------------------------------------------------- */

struct ids {
        const int64_t *ids;
        size_t n;
};

static int drop_step(struct ferry_pg *pg, void *arg)
{
        const struct ids *ids = arg;
        struct pg_params p;
        pg_params_init(&p);
        pg_param_int_array(&p, ids->ids, ids->n);
        int rc = p.oom ? pg_fail(pg, "out of memory")
                       : pg_exec(pg,
                                 "DELETE FROM partial WHERE file ="
                                 " ANY($1::int8[])",
                                 &p, NULL, "chunk clean-up");
        pg_params_release(&p);
        return rc;
}

int ferry_pg_chunks_drop(struct ferry_pg *pg, const int64_t *ids, size_t n)
{
        struct ids a = {ids, n};
        return n ? pg_retry(pg, drop_step, &a) : 0;
}
