/*
 * manifest/chunks.c - large files in chunks (chunks.h, sql/009_chunks.sql):
 * a chunk durable in a temp file recorded (record_chunk), the plan a
 * big row is handed out with (mf_chunk_plan: a resume, a repair, or a
 * fresh start; and for --verify the chunk hashes of a done file), what
 * a row's outcome does to its partial row and chunks (mf_chunk_outcome),
 * the rows dropped when their file row changes or goes (mf_chunks_drop,
 * mf_partial_drop, mf_chunks_orphans), and the bytes of unfinished
 * files' committed chunks that `ferry status` counts as done
 * (mf_chunk_status). The lifecycle is manifest.h's ("The life of a
 * partial row and its chunks").
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "chunks.h"

#include <string.h>

enum chunks_stmt {
        S_PARTIAL_GET,
        S_PARTIAL_PUT,
        S_PARTIAL_DROP,
        S_CHUNKS_DROP,
        S_CHUNK_PUT,
        S_CHUNKS_GET,
        S_CHUNK_BAD,
        S_ORPHANS, /* several statements, for sqlite3_exec */
        S_STATUS,
        S_ROW_PENDING,
        S_NSTMTS
};

// clang-format off
static const char *const chunks_sql[S_NSTMTS] = {
        [S_PARTIAL_GET] =
                "SELECT chunk_size, tmp_dev, tmp_ino, src_size, src_mtime_ns,"
                " src_ctime_ns, src_dev, src_ino FROM partial"
                " WHERE file_id = ?1",
        [S_PARTIAL_PUT] =
                "INSERT OR REPLACE INTO partial (file_id, chunk_size,"
                " tmp_dev, tmp_ino, src_size, src_mtime_ns, src_ctime_ns,"
                " src_dev, src_ino) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        [S_PARTIAL_DROP] = "DELETE FROM partial WHERE file_id = ?1",
        [S_CHUNKS_DROP] = "DELETE FROM chunks WHERE file_id = ?1",
        [S_CHUNK_PUT] =
                "INSERT OR REPLACE INTO chunks (file_id, idx, chunk_size,"
                " hash, bad) VALUES (?1, ?2, ?3, ?4, 0)",
        [S_CHUNKS_GET] =
                "SELECT idx, chunk_size, hash, bad FROM chunks"
                " WHERE file_id = ?1 ORDER BY idx",
        [S_CHUNK_BAD] =
                "UPDATE chunks SET bad = ?3 WHERE file_id = ?1 AND idx = ?2",
        /* rows of file rows that are gone (a safety net: each path that
         * deletes a file row drops them too); one pass over the small
         * tables, a primary-key lookup in files each */
        [S_ORPHANS] =
                "DELETE FROM partial WHERE file_id NOT IN"
                " (SELECT id FROM files);"
                "DELETE FROM chunks WHERE file_id NOT IN"
                " (SELECT id FROM files);",
        /* unfinished files and the bytes of their committed chunks (the
         * last chunk of a file is shorter) */
        [S_STATUS] =
                "SELECT count(DISTINCT p.file_id), coalesce(sum(min("
                "c.chunk_size, p.src_size - c.idx * c.chunk_size)), 0)"
                " FROM partial p JOIN chunks c ON c.file_id = p.file_id"
                " AND c.chunk_size = p.chunk_size"
                " AND c.idx * c.chunk_size < p.src_size",
        [S_ROW_PENDING] =
                "SELECT count(*) FROM files WHERE id = ?1"
                " AND state = " SQL_PENDING,
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "chunks.c: statement table too big");

#define STMT(id) mf_stmt(m, T_CHUNKS, id, chunks_sql[id])

/* A chunk size a plan may carry (the rows may come from a hostile or an
 * older manifest): a power of two from 1 MiB to 1 GiB. */
static bool sane_chunk_size(int64_t cs)
{
        return cs >= (1 << 20) && cs <= (1 << 30) && !(cs & (cs - 1));
}

/* A partial row: the temp file and SRC as its chunks were read. */
struct partial {
        uint64_t chunk_size, tmp_dev, tmp_ino;
        struct ferry_stat src; /* size, mtime, ctime, dev, ino */
};

static bool same_time(struct ferry_time a, struct ferry_time b)
{
        return a.sec == b.sec && a.nsec == b.nsec;
}

/* SRC as its chunks were read, and as it is: the copier's rule
 * (ferry_copier_same_source), without st_dev, which a share remounted
 * (a reboot) changes for the same files. */
static bool same_src(const struct ferry_stat *a, const struct ferry_stat *b)
{
        return a->size == b->size && same_time(a->mtime, b->mtime) &&
               same_time(a->ctime, b->ctime) && a->ino == b->ino;
}

static int partial_get(struct ferry_manifest *m, int64_t id, struct partial *p,
                       bool *found)
{
        sqlite3_stmt *s = STMT(S_PARTIAL_GET);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, id);
        int rc = sqlite3_step(s);
        *found = rc == SQLITE_ROW;
        memset(p, 0, sizeof(*p));
        if (*found) {
                p->chunk_size = (uint64_t)sqlite3_column_int64(s, 0);
                p->tmp_dev = (uint64_t)sqlite3_column_int64(s, 1);
                p->tmp_ino = (uint64_t)sqlite3_column_int64(s, 2);
                p->src.size = (uint64_t)sqlite3_column_int64(s, 3);
                p->src.mtime = mf_column_time(s, 4);
                p->src.ctime = mf_column_time(s, 5);
                p->src.dev = (uint64_t)sqlite3_column_int64(s, 6);
                p->src.ino = (uint64_t)sqlite3_column_int64(s, 7);
        }
        sqlite3_reset(s);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
                                                     : mf_db_fail(m, "read");
}

int mf_partial_drop(struct ferry_manifest *m, int64_t id)
{
        return mf_exec_id(m, STMT(S_PARTIAL_DROP), id, "chunk update");
}

int mf_chunks_drop(struct ferry_manifest *m, int64_t id)
{
        int rc = mf_partial_drop(m, id);
        return rc ? rc : mf_exec_id(m, STMT(S_CHUNKS_DROP), id, "chunk update");
}

int mf_chunks_orphans(struct ferry_manifest *m)
{
        return mf_exec_sql(m, chunks_sql[S_ORPHANS], "chunk clean-up");
}

static int chunk_put(struct ferry_manifest *m, int64_t id, uint32_t idx,
                     uint64_t chunk_size, const uint8_t hash[16])
{
        sqlite3_stmt *s = STMT(S_CHUNK_PUT);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, idx);
        sqlite3_bind_int64(s, 3, (int64_t)chunk_size);
        sqlite3_bind_blob(s, 4, hash, 16, SQLITE_STATIC);
        return mf_exec_stmt(m, s, "chunk update");
}

static int partial_put(struct ferry_manifest *m,
                       const struct ferry_chunk_msg *c)
{
        sqlite3_stmt *s = STMT(S_PARTIAL_PUT);
        if (!s)
                return mf_db_fail(m, "write");
        sqlite3_bind_int64(s, 1, c->file_id);
        sqlite3_bind_int64(s, 2, (int64_t)c->chunk_size);
        sqlite3_bind_int64(s, 3, (int64_t)c->tmp_dev);
        sqlite3_bind_int64(s, 4, (int64_t)c->tmp_ino);
        sqlite3_bind_int64(s, 5, (int64_t)c->src.size);
        mf_bind_time(s, 6, c->src.mtime);
        mf_bind_time(s, 7, c->src.ctime);
        sqlite3_bind_int64(s, 8, (int64_t)c->src.dev);
        sqlite3_bind_int64(s, 9, (int64_t)c->src.ino);
        return mf_exec_stmt(m, s, "chunk update");
}

/* A lost chunk row costs a re-copy of the chunk only: no sync is owed
 * (results.c's commit policy); the worker made the chunk durable first. */
int ferry_manifest_record_chunk(struct ferry_manifest *m,
                                const struct ferry_chunk_msg *c)
{
        if (!sane_chunk_size((int64_t)c->chunk_size) ||
            (uint64_t)c->idx * c->chunk_size >= c->src.size)
                return mf_fail(m, "manifest: a chunk out of its file");
        /* a row no longer pending (done, removed, deleted) keeps what it
         * has: a late chunk is not of its copy */
        int64_t pending = 0;
        int rc =
                mf_select_ints(m, STMT(S_ROW_PENDING), c->file_id, &pending, 1);
        if (rc || !pending)
                return rc;
        struct partial p;
        bool found = false;
        if ((rc = partial_get(m, c->file_id, &p, &found)))
                return rc;
        /* another temp file, source or chunk size: what was recorded
         * (an earlier copy's chunks, a done file's) goes first */
        if (!found || p.chunk_size != c->chunk_size ||
            p.tmp_dev != c->tmp_dev || p.tmp_ino != c->tmp_ino ||
            !same_src(&p.src, &c->src)) {
                rc = mf_chunks_drop(m, c->file_id);
                if (!rc)
                        rc = partial_put(m, c);
        }
        return rc ? rc
                  : chunk_put(m, c->file_id, c->idx, c->chunk_size, c->hash);
}

/* ---- the plan at hand-out ------------------------------------------- */

/* What the chunks table holds of a file of size bytes. */
struct chunk_rows {
        uint64_t chunk_size; /* of every row, or 0 when they disagree */
        uint32_t rows, bad;  /* rows in range, rows marked bad */
        bool any;            /* any row at all */
};

/* Reads row id's chunks into plan (when not NULL: state CH_DONE, or CH_BAD
 * when marked bad, and the hash, for rows of plan's chunk size in range). */
static int chunks_read(struct ferry_manifest *m, int64_t id, uint64_t size,
                       struct ferry_chunk_plan *plan, struct chunk_rows *r)
{
        memset(r, 0, sizeof(*r));
        sqlite3_stmt *s = STMT(S_CHUNKS_GET);
        if (!s)
                return mf_db_fail(m, "read");
        sqlite3_bind_int64(s, 1, id);
        int rc;
        bool first = true;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                int64_t idx = sqlite3_column_int64(s, 0);
                uint64_t cs = (uint64_t)sqlite3_column_int64(s, 1);
                r->any = true;
                if (first)
                        r->chunk_size = cs;
                else if (cs != r->chunk_size)
                        r->chunk_size = 0;
                first = false;
                if (!sane_chunk_size((int64_t)cs) || idx < 0 ||
                    (uint64_t)idx * cs >= size ||
                    sqlite3_column_bytes(s, 2) != 16)
                        continue;
                r->rows++;
                bool bad = sqlite3_column_int(s, 3) != 0;
                r->bad += bad;
                if (!plan || cs != plan->chunk_size || (uint32_t)idx >= plan->n)
                        continue;
                struct ferry_chunk_rec *c = &plan->chunks[idx];
                c->state = bad ? CH_BAD : CH_DONE;
                memcpy(c->hash, sqlite3_column_blob(s, 2), 16);
        }
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? 0 : mf_db_fail(m, "read");
}

/* A zeroed plan of n chunks of chunk_size in b's arena for the item at
 * index k (the arena may move: the item is found again by index); NULL
 * when out of memory (m says so). */
static struct ferry_chunk_plan *plan_new(struct ferry_manifest *m,
                                         struct ferry_batch *b, size_t k,
                                         uint64_t chunk_size)
{
        struct ferry_item *it = &b->items[k];
        uint32_t n = ferry_chunk_count(it->st.size, chunk_size), off = 0;
        size_t len = sizeof(struct ferry_chunk_plan) +
                     (size_t)n * sizeof(struct ferry_chunk_rec);
        if (ferry_batch_reserve(b, len, &off)) {
                mf_fail(m, "out of memory");
                return NULL;
        }
        b->items[k].plan_off = off;
        struct ferry_chunk_plan *plan =
                (struct ferry_chunk_plan *)(void *)(b->arena + off);
        plan->chunk_size = chunk_size;
        plan->n = n;
        return plan;
}

/* --verify of a done file: its chunks' hashes, when every chunk has one
 * (a file copied before chunks were recorded gets no plan). */
static int verify_plan(struct ferry_manifest *m, struct ferry_batch *b,
                       size_t k)
{
        const struct ferry_item *it = &b->items[k];
        struct chunk_rows r;
        int rc = chunks_read(m, it->id, it->st.size, NULL, &r);
        if (rc || !r.chunk_size || !sane_chunk_size((int64_t)r.chunk_size) ||
            !ferry_chunk_plan_fits(it->st.size, r.chunk_size) ||
            r.rows != ferry_chunk_count(it->st.size, r.chunk_size))
                return rc;
        struct ferry_chunk_plan *plan = plan_new(m, b, k, r.chunk_size);
        return !plan ? FERRY_EMANIFEST
                     : chunks_read(m, b->items[k].id, it->st.size, plan, &r);
}

/* A copy: a resume (the partial row's temp file and SRC as they are now),
 * a repair (a done file whose chunks verify marked bad, no temp file), or
 * a fresh start (stale rows dropped). */
/* A copy's plan; dry: the dry run's (it needs to know resume and repair,
 * as --adopt's test does, and drops no stale chunks: it writes nothing). */
static int copy_plan(struct ferry_manifest *m, struct ferry_batch *b, size_t k,
                     bool dry)
{
        const int64_t id = b->items[k].id;
        const uint64_t size = b->items[k].st.size;
        struct partial p;
        bool found = false;
        struct chunk_rows r;
        int rc = partial_get(m, id, &p, &found);
        if (!rc)
                rc = chunks_read(m, id, size, NULL, &r);
        if (rc)
                return rc;
        bool resume = found && sane_chunk_size((int64_t)p.chunk_size) &&
                      ferry_chunk_plan_fits(size, p.chunk_size) &&
                      same_src(&p.src, &b->items[k].st) &&
                      (!r.any || r.chunk_size == p.chunk_size) && !r.bad;
        bool repair = !found && r.bad && r.chunk_size &&
                      sane_chunk_size((int64_t)r.chunk_size) &&
                      ferry_chunk_plan_fits(size, r.chunk_size) &&
                      r.rows == ferry_chunk_count(size, r.chunk_size);
        if (!resume && !repair && (found || r.any) && !dry &&
            (rc = mf_chunks_drop(m, id)))
                return rc;
        uint64_t cs = resume   ? p.chunk_size
                      : repair ? r.chunk_size
                               : ferry_chunk_size_for(size);
        if (!cs)
                return 0; /* over 64 TiB: copied whole, as a small file */
        struct ferry_chunk_plan *plan = plan_new(m, b, k, cs);
        if (!plan)
                return FERRY_EMANIFEST;
        plan->resume = resume;
        plan->repair = repair;
        plan->tmp_dev = resume ? p.tmp_dev : 0;
        plan->tmp_ino = resume ? p.tmp_ino : 0;
        return resume || repair ? chunks_read(m, id, size, plan, &r) : 0;
}

int mf_chunk_plan(struct ferry_manifest *m, enum mf_query q,
                  struct ferry_batch *b, size_t k)
{
        const struct ferry_item *it = &b->items[k];
        /* one lookup or two, for big files only: a small file costs none */
        if (it->type != FT_REG || it->st.size < FERRY_CHUNK_MIN_FILE)
                return 0;
        switch (q) {
        case Q_VERIFY: return verify_plan(m, b, k);
        case Q_FIRST_PASS:
        case Q_NEXT_PASS:
        case Q_ONE_PENDING:
        case Q_PENDING:
                /* its metadata alone, or a hard link: no data is copied */
                if (it->need != MF_NEED_DATA || it->link_off)
                        return 0;
                return copy_plan(m, b, k, q == Q_PENDING);
        default: return 0;
        }
}

/* ---- what an outcome does to them ----------------------------------- */

/* A done file keeps its chunks' hashes as the copier left them (bad 0),
 * for --verify; its partial row goes. A plan with a chunk not done (a
 * copier's bug) leaves no chunks: verify then checks the whole file. */
static int chunks_done(struct ferry_manifest *m, int64_t id,
                       const struct ferry_chunk_plan *plan)
{
        int rc = mf_chunks_drop(m, id);
        for (uint32_t i = 0; i < plan->n && !rc; i++)
                if (plan->chunks[i].state != CH_DONE)
                        return mf_chunks_drop(m, id);
        for (uint32_t i = 0; i < plan->n && !rc; i++)
                rc = chunk_put(m, id, i, plan->chunk_size,
                               plan->chunks[i].hash);
        return rc;
}

/* --verify's result: the chunks the copier found differing are marked
 * bad (the next run repairs only those), the others not. */
static int chunks_bad(struct ferry_manifest *m, int64_t id,
                      const struct ferry_chunk_plan *plan)
{
        sqlite3_stmt *s = STMT(S_CHUNK_BAD);
        if (!s)
                return mf_db_fail(m, "write");
        int rc = 0;
        for (uint32_t i = 0; i < plan->n && !rc; i++) {
                sqlite3_bind_int64(s, 1, id);
                sqlite3_bind_int64(s, 2, i);
                sqlite3_bind_int(s, 3, plan->chunks[i].state == CH_BAD);
                rc = mf_exec_stmt(m, s, "chunk update");
        }
        return rc;
}

int mf_chunk_outcome(struct ferry_manifest *m, const struct ferry_outcome *o)
{
        switch (o->kind) {
        case FO_DONE:
                /* its metadata alone applied: the data and chunks stay */
                if (!o->plan || o->item->need == MF_NEED_META)
                        return 0;
                return chunks_done(m, o->id, o->plan);
        case FO_AGAIN:
                /* verify: ranges that differ (a size that differs, or a
                 * missing file: the next hand-out starts it afresh) */
                return o->plan ? chunks_bad(m, o->id, o->plan) : 0;
        case FO_FAILED:
                /* chunks of a source that changed are of the old content */
                return o->src_changed ? mf_chunks_drop(m, o->id) : 0;
        default: return 0; /* vanished: kept until the row goes */
        }
}

int mf_chunk_status(struct ferry_manifest *m, uint64_t *files, uint64_t *bytes)
{
        int64_t v[2] = {0, 0};
        int rc = mf_select_ints(m, STMT(S_STATUS), 0, v, 2);
        *files = (uint64_t)v[0];
        *bytes = (uint64_t)v[1];
        return rc;
}

int ferry_manifest_temp_removed(struct ferry_manifest *m,
                                const struct ferry_item *it)
{
        if (it->type != FT_REG || it->st.size < FERRY_CHUNK_MIN_FILE)
                return 0;
        return mf_chunks_drop(m, it->id);
}
