/*
 * manifest/export.c - what `ferry export` reads: the file rows with their
 * paths, by (directory id, name), the order of the files_by_name index.
 *
 * A job of millions of rows is read in chunks of EXPORT_CHUNK rows, one
 * short read transaction each, resumed after the last (dir, name) seen: a
 * running job's checkpoints are held back by one chunk at most, never by
 * the whole export, and never by a reader of the output that is slow (a
 * chunk is copied out and handed on after its transaction ended). Each
 * row is as a commit left it; a row a run changes between two chunks may
 * show in the state before or after the change, never twice.
 *
 * Read without write access (manifest/reader.c), each chunk is checked
 * against a run that wrote the file meanwhile (immutable) or made or took
 * down its -wal and -shm (shared); a torn chunk is not handed on, and
 * ferry_manifest_moved says so.
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_CHUNK 2000

_Static_assert(FERRY_FILE_REG == MF_FT_REG &&
                       FERRY_FILE_SYMLINK == MF_FT_LINK &&
                       FERRY_FILE_SPECIAL == MF_FT_SPECIAL,
               "ferry.h's file types are the manifest's");
_Static_assert(FERRY_FILE_PENDING == MF_ST_PENDING &&
                       FERRY_FILE_DONE == MF_ST_DONE &&
                       FERRY_FILE_FAILED == MF_ST_FAILED &&
                       FERRY_FILE_SKIPPED == MF_ST_SKIPPED &&
                       FERRY_FILE_VANISHED == MF_ST_VANISHED &&
                       FERRY_FILE_REMOVED == MF_ST_REMOVED,
               "ferry.h's file states are the manifest's");

enum export_stmt { E_BEGIN, E_COMMIT, E_ROWS, E_DONE_ROWS, E_NSTMTS };

/* Rows after (?1, ?2) in (dir, name) order, ?3 of them. Columns: dir id,
 * name, dir path, type, state, size, mtime, mode, uid, gid, hash. */
#define ROWS_SQL(WHERE)                                                        \
        "SELECT f.dir, f.name, d.path, f.type, f.state, f.size, f.mtime_ns,"   \
        " f.mode, f.uid, f.gid, f.hash"                                        \
        " FROM files f JOIN dirs d ON d.id = f.dir"                            \
        " WHERE (f.dir, f.name) > (?1, ?2)" WHERE                              \
        " ORDER BY f.dir, f.name LIMIT ?3"

static const char *const export_sql[E_NSTMTS] = {
        [E_BEGIN] = "BEGIN",
        [E_COMMIT] = "COMMIT",
        [E_ROWS] = ROWS_SQL(""),
        [E_DONE_ROWS] = ROWS_SQL(" AND f.state = " SQL_DONE),
};
_Static_assert(E_NSTMTS <= MF_TABLE_MAX, "export.c: statement table too big");

/* A chunk's rows, copied out of the read transaction; paths in one
 * buffer, each row's path at its offset (a pointer would move with
 * realloc). */
struct chunk {
        struct ferry_export_row rows[EXPORT_CHUNK];
        size_t off[EXPORT_CHUNK];
        size_t n;
        char *paths;
        size_t used, cap;
        int64_t last_dir; /* where the next chunk starts */
        unsigned char *last_name;
        size_t last_len;
};

static int keep_bytes(struct chunk *c, const void *p, size_t len)
{
        if (c->used + len + 1 > c->cap) {
                size_t cap = c->cap ? c->cap : 1 << 16;
                while (c->used + len + 1 > cap)
                        cap *= 2;
                char *np = realloc(c->paths, cap);
                if (!np)
                        return ENOMEM;
                c->paths = np;
                c->cap = cap;
        }
        if (len)
                memcpy(c->paths + c->used, p, len);
        c->used += len;
        return 0;
}

/* The path of the current row of s, "dir/name" ("name" at the top), into
 * the chunk. */
static int keep_path(struct chunk *c, sqlite3_stmt *s, size_t *len)
{
        size_t start = c->used;
        size_t dl = (size_t)sqlite3_column_bytes(s, 2);
        size_t nl = (size_t)sqlite3_column_bytes(s, 1);
        int rc = keep_bytes(c, sqlite3_column_blob(s, 2), dl);
        if (!rc && dl)
                rc = keep_bytes(c, "/", 1);
        if (!rc)
                rc = keep_bytes(c, sqlite3_column_blob(s, 1), nl);
        if (!rc)
                rc = keep_bytes(c, "", 1); /* the NUL */
        *len = c->used - start - 1;
        return rc;
}

static int keep_last(struct chunk *c, sqlite3_stmt *s)
{
        size_t nl = (size_t)sqlite3_column_bytes(s, 1);
        unsigned char *p = realloc(c->last_name, nl ? nl : 1);
        if (!p)
                return ENOMEM;
        if (nl)
                memcpy(p, sqlite3_column_blob(s, 1), nl);
        c->last_name = p;
        c->last_len = nl;
        c->last_dir = sqlite3_column_int64(s, 0);
        return 0;
}

static int keep_row(struct chunk *c, sqlite3_stmt *s)
{
        struct ferry_export_row *r = &c->rows[c->n];
        c->off[c->n] = c->used;
        if (keep_path(c, s, &r->path_len) || keep_last(c, s))
                return ENOMEM;
        r->type = (enum ferry_file_type)sqlite3_column_int(s, 3);
        r->state = (enum ferry_file_state)sqlite3_column_int(s, 4);
        r->size = (uint64_t)sqlite3_column_int64(s, 5);
        struct ferry_time t = mf_column_time(s, 6);
        r->mtime_sec = t.sec;
        r->mtime_nsec = t.nsec;
        r->mode = (uint32_t)sqlite3_column_int64(s, 7);
        r->uid = (uint32_t)sqlite3_column_int64(s, 8);
        r->gid = (uint32_t)sqlite3_column_int64(s, 9);
        r->has_hash = sqlite3_column_bytes(s, 10) == 16;
        if (r->has_hash)
                memcpy(r->hash, sqlite3_column_blob(s, 10), 16);
        c->n++;
        return 0;
}

/* Reads the next chunk, in its own read transaction. */
static int read_chunk(struct ferry_manifest *m, bool done_only, struct chunk *c)
{
        c->n = c->used = 0;
        int rc = mf_exec_sql(m, export_sql[E_BEGIN], "read");
        if (rc)
                return rc;
        int id = done_only ? E_DONE_ROWS : E_ROWS;
        sqlite3_stmt *s = mf_stmt(m, T_EXPORT, id, export_sql[id]);
        if (!s) {
                rc = mf_db_fail(m, "read");
                goto out;
        }
        sqlite3_bind_int64(s, 1, c->last_dir);
        /* a copy: keep_last moves c->last_name while s steps */
        sqlite3_bind_blob(s, 2, c->last_len ? (void *)c->last_name : "",
                          (int)c->last_len, SQLITE_TRANSIENT);
        sqlite3_bind_int(s, 3, EXPORT_CHUNK);
        int step;
        while ((step = sqlite3_step(s)) == SQLITE_ROW)
                if (keep_row(c, s)) {
                        rc = mf_fail(m, "out of memory reading the manifest");
                        break;
                }
        if (!rc && step != SQLITE_DONE)
                rc = mf_db_fail(m, "read");
        sqlite3_reset(s);
out:
        /* a run that starts or ends under a reader without write access
         * fails the query as it fails the open (reader.c): a chunk to
         * read again, as status does */
        if (rc && mf_shared_read_torn(m))
                m->moved = true;
        sqlite3_exec(m->db, export_sql[E_COMMIT], NULL, NULL, NULL);
        if (!rc && m->immutable && !mf_still_alone(m)) {
                m->moved = true;
                rc = mf_fail(m,
                             "manifest '%s' changed while export read it "
                             "without write access: run it again",
                             m->path);
        }
        return rc;
}

int ferry_manifest_export(struct ferry_manifest *m,
                          const struct ferry_export_req *req, uint64_t *handed)
{
        struct chunk *c = calloc(1, sizeof(*c));
        if (!c)
                return mf_fail(m, "out of memory reading the manifest");
        c->last_dir = INT64_MIN; /* before every row */
        int rc;
        *handed = 0;
        do {
                rc = read_chunk(m, req->done_only, c);
                for (size_t i = 0; !rc && i < c->n; i++) {
                        c->rows[i].path = c->paths + c->off[i];
                        rc = req->on_row(&c->rows[i], req->arg);
                        (*handed)++;
                }
        } while (!rc && c->n == EXPORT_CHUNK);
        free(c->paths);
        free(c->last_name);
        free(c);
        return rc;
}
