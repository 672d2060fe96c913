/*
 * manifest/query.c - reading rows out: the hand-out queries of the copy,
 * verify and clean-up passes (mf_fill: items and their paths
 * into a batch, a big file with its chunk plan from chunks.c), the counts
 * of rows still to copy, done, removed or not done, and the even sample of
 * done rows that checks DST. A verify with a selection
 * (ferry_manifest_set_keep) leaves out the rows it does not select.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The statements: first the hand-out queries, by enum mf_query. */
enum query_stmt {
        S_PENDING_COUNT = Q_NQUERIES,
        S_MAX_ID,
        S_COUNT_DONE,
        S_COUNT_REMOVED,
        S_NOT_DONE,
        S_SAMPLE,
        S_VERIFY_KEEP,
        S_NSTMTS
};

#define FILE_COLS                                                              \
        "f.id, f.dir, d.path, f.name, f.type, f.size, f.mtime_ns,"             \
        " f.ctime_ns, f.mode, f.uid, f.gid, f.dev, f.ino, f.hash,"             \
        " f.dst_type, f.dst_size, f.dst_mtime_ns, f.need, f.applied,"          \
        " f.xdigest, f.nlink, f.rdev"
/* the first column after FILE_COLS */
#define COL_AFTER 22

/* ?1 cursor, ?2 limit, ?3 generation */
// clang-format off
static const char *const query_sql[S_NSTMTS] = {
        [Q_FIRST_PASS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = " SQL_PENDING " AND f.id > ?1"
                " AND f.gen = ?3 AND (f.hl IS NULL OR f.hl = " SQL_LEADER ")"
                " ORDER BY f.id LIMIT ?2",
        [Q_NEXT_PASS] =
                "SELECT " FILE_COLS ", l.state, l.gen = ?3 OR ld.listed = ?3,"
                " ld.path, l.name, l.hash"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " LEFT JOIN files l ON f.hl > 0 AND l.id = f.hl"
                " LEFT JOIN dirs ld ON ld.id = l.dir"
                " WHERE f.state = " SQL_PENDING " AND f.id > ?1"
                " AND f.gen = ?3"
                " AND (l.state IS NULL OR l.state != " SQL_PENDING ")"
                " ORDER BY f.id LIMIT ?2",
        /* a hardlink name's first name, whose copy it is to be a link to */
        [Q_VERIFY] =
                "SELECT " FILE_COLS ", l.state, l.gen = ?3 OR ld.listed = ?3,"
                " ld.path, l.name, l.hash"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " LEFT JOIN files l ON f.hl > 0 AND l.id = f.hl"
                " LEFT JOIN dirs ld ON ld.id = l.dir"
                " WHERE f.state = " SQL_DONE
                " AND (f.gen = ?3 OR d.listed = ?3) AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        /* Q_VERIFY but for the rows the selection leaves out (its columns
         * are Q_VERIFY's: read_item reads them as such) */
        [S_VERIFY_KEEP] =
                "SELECT " FILE_COLS ", l.state, l.gen = ?3 OR ld.listed = ?3,"
                " ld.path, l.name, l.hash"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " LEFT JOIN files l ON f.hl > 0 AND l.id = f.hl"
                " LEFT JOIN dirs ld ON ld.id = l.dir"
                " WHERE f.state = " SQL_DONE
                " AND (f.gen = ?3 OR d.listed = ?3) AND f.id > ?1"
                " AND NOT ferry_keep(d.path, f.name, f.type, f.size, 0)"
                " ORDER BY f.id LIMIT ?2",
        /* with whether the row is a hardlink name that is not its
         * group's first (a run links it: ferry_item.follower) */
        [Q_PENDING] =
                "SELECT " FILE_COLS ", coalesce(f.hl > 0, 0)"
                " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.state = " SQL_PENDING " AND f.gen = ?3 AND f.id > ?1"
                " ORDER BY f.id LIMIT ?2",
        /* Each state through its partial index, in id order: "state IN
         * (vanished, removed) AND state = removed" lets SQLite use
         * files_removed, which a bare "state = removed" or the IN list
         * with ORDER BY id would not (a scan, or a sort of every removed
         * row per page). */
        [Q_REMOVED_FILES] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id IN (SELECT id FROM (SELECT id FROM files"
                " WHERE state IN " SQL_GONE " AND state = " SQL_VANISHED
                " AND id > ?1"
                " ORDER BY id LIMIT ?2) UNION ALL SELECT id FROM (SELECT id"
                " FROM files WHERE state IN " SQL_GONE
                " AND state = " SQL_REMOVED " AND id > ?1"
                " ORDER BY id LIMIT ?2))"
                " ORDER BY f.id LIMIT ?2",
        /* pending rows not seen, those removed by this scan, and gone
         * rows whose temp file holds chunks (partial: few rows) */
        [Q_STALE_TEMPS] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id IN (SELECT id FROM (SELECT id FROM files"
                " WHERE state = " SQL_PENDING " AND gen < ?3 AND id > ?1"
                " ORDER BY id LIMIT ?2) UNION ALL SELECT id FROM (SELECT id"
                " FROM files WHERE state IN " SQL_GONE
                " AND state = " SQL_REMOVED " AND gen = ?3 AND hash IS NULL"
                " AND id > ?1"
                " ORDER BY id LIMIT ?2) UNION ALL SELECT file_id FROM"
                " (SELECT p.file_id FROM partial p JOIN files g"
                " ON g.id = p.file_id WHERE g.state IN " SQL_GONE
                " AND p.file_id > ?1 ORDER BY p.file_id LIMIT ?2))"
                " ORDER BY f.id LIMIT ?2",
        [Q_ONE_PENDING] =
                "SELECT " FILE_COLS " FROM files f JOIN dirs d ON d.id = f.dir"
                " WHERE f.id = ?1 AND f.state = " SQL_PENDING " AND f.gen = ?3"
                " AND (f.hl IS NULL OR f.hl = " SQL_LEADER ") LIMIT ?2",
        [S_PENDING_COUNT] =
                "SELECT count(*), sum(CASE WHEN type = " SQL_REG
                " AND need = " SQL_NEED_DATA
                " AND (hl IS NULL OR hl = " SQL_LEADER ") THEN size END)"
                " FROM files WHERE state = " SQL_PENDING " AND gen >= ?1",
        [S_MAX_ID] = "SELECT coalesce(max(id), 0) FROM files",
        [S_COUNT_DONE] =
                "SELECT count(*) FROM files WHERE state = " SQL_DONE,
        [S_COUNT_REMOVED] =
                "SELECT count(*) FROM files WHERE state IN " SQL_GONE
                " AND state = " SQL_REMOVED " AND gen = ?1",
        [S_NOT_DONE] =
                "SELECT count(*) FROM files f JOIN dirs d"
                " ON d.id = f.dir WHERE f.state IN (" SQL_PENDING ", "
                SQL_FAILED ") AND (f.gen = ?1 OR d.listed = ?1)",
        [S_SAMPLE] =
                "SELECT f.id, d.path, f.name, f.type, f.size,"
                " f.mtime_ns FROM files f"
                " JOIN dirs d ON d.id = f.dir"
                " WHERE f.id >= ?1 AND f.state = " SQL_DONE
                " AND f.type IN (" SQL_REG ", " SQL_LINK ")"
                " ORDER BY f.id LIMIT 1",
};
// clang-format on
_Static_assert(S_NSTMTS <= MF_TABLE_MAX, "query.c: statement table too big");

#define STMT(id) mf_stmt(m, T_QUERY, id, query_sql[id])

/* Row i of n evenly spaced points in 1..max, without overflow. */
static int64_t spread(int64_t max, unsigned i, unsigned n)
{
        return 1 + max / n * i + max % n * i / n;
}

static int put_blob(struct ferry_batch *b, sqlite3_stmt *s, int col,
                    uint32_t *off)
{
        const void *p = sqlite3_column_blob(s, col);
        size_t n = (size_t)sqlite3_column_bytes(s, col);
        return ferry_batch_str(b, p ? p : "", n, off);
}

/* Appends blob column col (none when it is empty). */
static void add_blob(struct ferry_buf *b, sqlite3_stmt *s, int col)
{
        const void *p = sqlite3_column_blob(s, col);
        if (p)
                ferry_buf_add(b, p, (size_t)sqlite3_column_bytes(s, col));
}

/* The leader's destination path "dir/name" of a hardlink follower, and
 * for a copy (not a verify: the row's own hash is checked) its hash. */
static int put_leader(struct ferry_batch *b, sqlite3_stmt *s,
                      struct ferry_item *it, bool copy)
{
        it->link_off = 0;
        const int c = COL_AFTER;
        if (sqlite3_column_type(s, c) == SQLITE_NULL ||
            sqlite3_column_int(s, c) != ST_DONE ||
            !sqlite3_column_int(s, c + 1) ||
            sqlite3_column_bytes(s, c + 4) != 16)
                return 0;
        struct ferry_buf path = FERRY_BUF_INIT;
        add_blob(&path, s, c + 2);
        if (path.len)
                ferry_buf_add(&path, "/", 1);
        add_blob(&path, s, c + 3);
        int rc = path.oom ? ENOMEM
                          : ferry_batch_str(b, path.buf, path.len,
                                            &it->link_off);
        ferry_buf_release(&path);
        if (copy)
                memcpy(it->hash, sqlite3_column_blob(s, c + 4), 16);
        return rc;
}

static int read_item(struct ferry_batch *b, sqlite3_stmt *s, enum mf_query q)
{
        struct ferry_item *it = &b->items[b->n];
        memset(it, 0, sizeof(*it));
        it->id = sqlite3_column_int64(s, 0);
        it->dir_id = sqlite3_column_int64(s, 1);
        if (put_blob(b, s, 2, &it->dir_off) || put_blob(b, s, 3, &it->name_off))
                return ENOMEM;
        it->type = (enum ferry_ftype)sqlite3_column_int(s, 4);
        it->st.size = (uint64_t)sqlite3_column_int64(s, 5);
        it->st.mtime = mf_column_time(s, 6);
        it->st.ctime = mf_column_time(s, 7);
        it->st.mode = (uint32_t)sqlite3_column_int64(s, 8);
        it->st.uid = (uint32_t)sqlite3_column_int64(s, 9);
        it->st.gid = (uint32_t)sqlite3_column_int64(s, 10);
        it->st.dev = (uint64_t)sqlite3_column_int64(s, 11);
        it->st.ino = (uint64_t)sqlite3_column_int64(s, 12);
        if (sqlite3_column_bytes(s, 13) == 16)
                memcpy(it->hash, sqlite3_column_blob(s, 13), 16);
        if (sqlite3_column_type(s, 14) != SQLITE_NULL) {
                it->dst.type = (enum ferry_ftype)sqlite3_column_int(s, 14);
                it->dst.size = (uint64_t)sqlite3_column_int64(s, 15);
                it->dst.mtime = mf_column_time(s, 16);
        }
        /* the metadata layer: what the row needs, what was applied */
        it->need = sqlite3_column_int(s, 17);
        it->rec_applied = (uint32_t)sqlite3_column_int64(s, 18);
        it->rec_has_xdigest = sqlite3_column_type(s, 19) != SQLITE_NULL;
        it->rec_xdigest = (uint64_t)sqlite3_column_int64(s, 19);
        it->st.nlink = (uint64_t)sqlite3_column_int64(s, 20);
        it->st.rdev = (uint64_t)sqlite3_column_int64(s, 21);
        if (q == Q_PENDING)
                it->follower = sqlite3_column_int(s, COL_AFTER) != 0;
        if ((q == Q_NEXT_PASS || q == Q_VERIFY) &&
            put_leader(b, s, it, q == Q_NEXT_PASS))
                return ENOMEM;
        b->n++;
        return 0;
}

int mf_fill(struct ferry_manifest *m, enum mf_query q, int64_t gen,
            int64_t *cursor, struct ferry_batch *b, size_t max,
            uint64_t max_bytes)
{
        uint64_t bytes = 0;
        /* --verify with a selection: the rows it leaves out are not its */
        sqlite3_stmt *s =
                q == Q_VERIFY && m->keep ? STMT(S_VERIFY_KEEP) : STMT((int)q);
        if (!s)
                return mf_db_fail(m, "query");
        if (max > b->cap - b->n)
                max = b->cap - b->n;
        sqlite3_bind_int64(s, 1, *cursor);
        sqlite3_bind_int64(s, 2, (int64_t)max);
        sqlite3_bind_int64(s, 3, gen);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
                if (read_item(b, s, q)) {
                        sqlite3_reset(s);
                        return mf_fail(m, "out of memory");
                }
                /* a big file's chunks (chunks.c) */
                int plan = mf_chunk_plan(m, q, b, b->n - 1);
                if (plan) {
                        sqlite3_reset(s);
                        return plan;
                }
                *cursor = b->items[b->n - 1].id;
                bytes += b->items[b->n - 1].st.size;
                if (bytes >= max_bytes)
                        break;
        }
        sqlite3_reset(s);
        return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0
                                                     : mf_db_fail(m, "query");
}

int ferry_manifest_sample_done(struct ferry_manifest *m, unsigned n,
                               ferry_sample_fn fn, void *arg, unsigned *seen)
{
        *seen = 0;
        int64_t max = 0;
        int rc = mf_max_id(m, &max);
        if (rc || !n || max < 1)
                return rc;
        sqlite3_stmt *s = STMT(S_SAMPLE);
        if (!s)
                return mf_db_fail(m, "read");
        int64_t next = 1;
        bool more = true;
        for (unsigned i = 0; i < n && more; i++) {
                int64_t at = spread(max, i, n);
                sqlite3_bind_int64(s, 1, at > next ? at : next);
                int step = sqlite3_step(s);
                if (step != SQLITE_ROW) {
                        rc = step == SQLITE_DONE ? 0 : mf_db_fail(m, "read");
                        break; /* no done row beyond this point */
                }
                next = sqlite3_column_int64(s, 0) + 1;
                struct ferry_done_file f = {
                        .id = sqlite3_column_int64(s, 0),
                        .dir = mf_column_str(s, 1),
                        .name = mf_column_str(s, 2),
                        .type = (enum ferry_ftype)sqlite3_column_int(s, 3),
                        .size = (uint64_t)sqlite3_column_int64(s, 4),
                        .mtime = mf_column_time(s, 5),
                };
                (*seen)++;
                more = fn(&f, arg);
                sqlite3_reset(s);
        }
        sqlite3_reset(s);
        return rc;
}

static int count_to_copy(struct ferry_manifest *m, int64_t gen, uint64_t *files,
                         uint64_t *bytes)
{
        int64_t v[2] = {0, 0};
        int rc = mf_select_ints(m, STMT(S_PENDING_COUNT), gen, v, 2);
        *files = (uint64_t)v[0];
        *bytes = (uint64_t)v[1];
        return rc;
}

int mf_max_id(struct ferry_manifest *m, int64_t *id)
{
        return mf_select_ints(m, STMT(S_MAX_ID), 0, id, 1);
}

/* The count(*) of statement id, whose ?1 (if any) is gen. */
static int count_rows(struct ferry_manifest *m, int id, int64_t gen,
                      uint64_t *files)
{
        int64_t n = 0;
        int rc = mf_select_ints(m, STMT(id), gen, &n, 1);
        *files = (uint64_t)n;
        return rc;
}

/* ---- operation-level calls (manifest.h) ---- */

static const enum mf_query pass_query[] = {
        [PASS_COPY_FIRST] = Q_FIRST_PASS, [PASS_COPY_NEXT] = Q_NEXT_PASS,
        [PASS_VERIFY] = Q_VERIFY,         [PASS_DRY_RUN] = Q_PENDING,
        [PASS_REMOVED] = Q_REMOVED_FILES, [PASS_STALE_TEMPS] = Q_STALE_TEMPS,
};

void ferry_manifest_handout_start(struct ferry_handout *h, enum ferry_pass pass,
                                  int64_t gen)
{
        *h = (struct ferry_handout){.pass = pass, .gen = gen, .pos = 0};
}

int ferry_manifest_handout(struct ferry_manifest *m, struct ferry_handout *h,
                           struct ferry_batch *b, size_t max,
                           uint64_t max_bytes)
{
        if (h->pass < PASS_COPY_FIRST || h->pass > PASS_STALE_TEMPS)
                return mf_fail(m, "manifest: no such pass %d", (int)h->pass);
        int rc = mf_fill(m, pass_query[h->pass], h->gen, &h->pos, b, max,
                         max_bytes);
        if (h->pass == PASS_COPY_FIRST && h->pos > m->first_pass_at)
                m->first_pass_at = h->pos; /* mf_regroup */
        return rc;
}

int ferry_manifest_handout_again(struct ferry_manifest *m,
                                 const struct ferry_handout *h, int64_t id,
                                 struct ferry_batch *b)
{
        return mf_fill(m, Q_ONE_PENDING, h->gen, &id, b, 1, UINT64_MAX);
}

bool ferry_manifest_handout_passed(const struct ferry_handout *h, int64_t id)
{
        return id > 0 && id <= h->pos;
}

int ferry_manifest_count(struct ferry_manifest *m, enum ferry_count what,
                         int64_t gen, uint64_t *files, uint64_t *bytes)
{
        uint64_t unused;
        if (!bytes)
                bytes = &unused;
        *files = *bytes = 0;
        switch (what) {
        case COUNT_TO_COPY: return count_to_copy(m, gen, files, bytes);
        case COUNT_DONE: return count_rows(m, S_COUNT_DONE, 0, files);
        case COUNT_GONE: return count_rows(m, S_COUNT_REMOVED, gen, files);
        case COUNT_NOT_DONE: return count_rows(m, S_NOT_DONE, gen, files);
        }
        return mf_fail(m, "manifest: no such count %d", (int)what);
}
