/*
 * test_export.c - ferry_manifest_export (manifest/export.c): every file
 * row once, in (directory, name) order across the chunks of its read
 * transactions, with its path, type, state, size, mtime (a far one too),
 * mode, owner and hash; done rows only when asked; a stop code from the
 * callback ends the export and comes back; and no read transaction is
 * open while a row is handed on (a second connection's TRUNCATE
 * checkpoint, which waits for no reader, succeeds from the callback).
 * SQLite, through a connection of its own, sets the states and hashes.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "manifest.h"
#include "manifest/internal.h"

#include <sqlite3.h>

#define TOP_ROWS 4500 /* more than two chunks of EXPORT_CHUNK (2000) */

struct fixture {
        char dir[PATH_MAX];
        char db[PATH_MAX + 16];
};

static bool unit_marking;

static struct ferry_stat mkstat(uint32_t mode, uint64_t size, int64_t mtime,
                                uint64_t ino)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = mode;
        st.size = size;
        st.mtime = (struct ferry_time){mtime, 123456789};
        st.ctime = (struct ferry_time){mtime, 0};
        st.dev = 0xfe00;
        st.ino = ino;
        st.nlink = 1;
        st.uid = 1000;
        st.gid = 100;
        return st;
}

static void add_file(struct ferry_manifest *m, int64_t dir, bool is_new,
                     const char *name, size_t len, const struct ferry_stat *st,
                     int64_t gen)
{
        struct ferry_entry_rec rec;
        CHECK_EQ(mf_file_upsert(m, dir, is_new, true, name, len, st, gen, false,
                                &rec),
                 0);
}

/* TOP_ROWS files at the top, and in "d" a symlink, a name that is not
 * UTF-8 and a file of the year 3000. */
static void make_manifest(struct fixture *fx)
{
        unit_tmpdir(fx->dir, "export");
        snprintf(fx->db, sizeof(fx->db), "%s/m.db", fx->dir);
        struct ferry_manifest *m;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(fx->db, MF_CREATE, &m, &err), 0);
        CHECK_EQ(ferry_manifest_bind_job(m, "/the/src", "/the/dst"), 0);
        int64_t gen, top, d;
        bool top_new, d_new;
        struct ferry_stat dst = mkstat(S_IFDIR | 0755, 0, 1, 1);
        CHECK_EQ(ferry_manifest_begin(m), 0);
        mf_next_gen(m, &gen);
        mf_dir_upsert(m, "", 0, &dst, gen, &top, &top_new, &unit_marking);
        for (int i = 0; i < TOP_ROWS; i++) {
                char name[64];
                int n = snprintf(name, sizeof(name), "f%05d", i);
                struct ferry_stat st = mkstat(S_IFREG | 0640, (uint64_t)i,
                                              1000 + i, 10 + (uint64_t)i);
                add_file(m, top, top_new, name, (size_t)n, &st, gen);
        }
        mf_dir_upsert(m, "d", 1, &dst, gen, &d, &d_new, &unit_marking);
        struct ferry_stat ln = mkstat(S_IFLNK | 0777, 3, 5, 90001);
        add_file(m, d, d_new, "link", 4, &ln, gen);
        struct ferry_stat bad = mkstat(S_IFREG | 0600, 7, 6, 90002);
        add_file(m, d, d_new, "\xff\xfe", 2, &bad, gen);
        struct ferry_stat far = mkstat(S_IFREG | 0644, 1, 32503680000LL, 90003);
        add_file(m, d, d_new, "year3000", 8, &far, gen);
        CHECK_EQ(ferry_manifest_commit(m), 0);
        ferry_manifest_close(m);
        /* every other row done, with a hash */
        sqlite3 *db;
        CHECK_EQ(sqlite3_open(fx->db, &db), SQLITE_OK);
        CHECK_EQ(sqlite3_exec(db,
                              "UPDATE files SET state = 1,"
                              " hash = randomblob(16) WHERE id % 2 = 1",
                              NULL, NULL, NULL),
                 SQLITE_OK);
        sqlite3_close(db);
}

struct seen {
        uint64_t rows, done;
        char last[64];
        bool ordered, top_ok, d_ok;
        int stop_after;  /* return 99 after this many rows; 0: never */
        sqlite3 *writer; /* checkpoints from the callback when set */
        bool checkpointed;
};

static void check_d_row(struct seen *s, const struct ferry_export_row *r)
{
        if (r->path_len == 6 && !memcmp(r->path, "d/link", 6))
                s->d_ok &= r->type == FERRY_FILE_SYMLINK && r->size == 3;
        else if (r->path_len == 4 && !memcmp(r->path, "d/\xff\xfe", 4))
                s->d_ok &= r->type == FERRY_FILE_REG && r->mode == 0100600;
        else if (r->path_len == 10 && !memcmp(r->path, "d/year3000", 10))
                s->d_ok &= r->mtime_sec == 32503680000LL &&
                           r->mtime_nsec == 123456789;
        else
                s->d_ok = false;
}

static int on_row(const struct ferry_export_row *r, void *arg)
{
        struct seen *s = arg;
        s->rows++;
        s->done += r->state == FERRY_FILE_DONE;
        if (r->state == FERRY_FILE_DONE && !r->has_hash)
                s->top_ok = false;
        if (r->path_len < 2 || memcmp(r->path, "d/", 2)) {
                /* top-level names come in name order */
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int)r->path_len, r->path);
                s->ordered &= strcmp(name, s->last) > 0;
                snprintf(s->last, sizeof(s->last), "%s", name);
                int i = atoi(name + 1);
                s->top_ok &= r->size == (uint64_t)i &&
                             r->mtime_sec == 1000 + i && r->uid == 1000 &&
                             r->gid == 100 && r->mode == (S_IFREG | 0640) &&
                             r->type == FERRY_FILE_REG;
        } else {
                snprintf(s->last, sizeof(s->last), "~"); /* after f... */
                check_d_row(s, r);
        }
        if (s->writer && s->rows == 1) {
                CHECK_EQ(sqlite3_exec(s->writer,
                                      "INSERT OR REPLACE INTO meta VALUES "
                                      "('unit', 1)",
                                      NULL, NULL, NULL),
                         SQLITE_OK);
                int log = -1, ckpt = -1;
                s->checkpointed =
                        sqlite3_wal_checkpoint_v2(s->writer, NULL,
                                                  SQLITE_CHECKPOINT_TRUNCATE,
                                                  &log, &ckpt) == SQLITE_OK;
        }
        return s->stop_after && s->rows == (uint64_t)s->stop_after ? 99 : 0;
}

static int export(struct fixture *fx, bool done_only, struct seen *s,
                  uint64_t *handed)
{
        struct ferry_manifest *m;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(fx->db, MF_READONLY, &m, &err), 0);
        s->ordered = s->top_ok = s->d_ok = true;
        struct ferry_export_req req = {done_only, on_row, s};
        int rc = ferry_manifest_export(m, &req, handed);
        ferry_manifest_close(m);
        return rc;
}

static void test_every_row_in_order(void)
{
        struct fixture fx;
        make_manifest(&fx);
        struct seen s = {0};
        uint64_t handed;
        CHECK_EQ(export(&fx, false, &s, &handed), 0);
        CHECK_EQ(s.rows, (uint64_t)TOP_ROWS + 3);
        CHECK_EQ(handed, s.rows);
        CHECK_EQ(s.done, (uint64_t)(TOP_ROWS + 3 + 1) / 2);
        CHECK(s.ordered);
        CHECK(s.top_ok);
        CHECK(s.d_ok);

        struct seen d = {0};
        CHECK_EQ(export(&fx, true, &d, &handed), 0);
        CHECK_EQ(d.rows, s.done);
        CHECK_EQ(d.done, s.done);
        unit_rmtree(fx.dir);
}

static void test_stop_and_no_open_transaction(void)
{
        struct fixture fx;
        make_manifest(&fx);
        struct seen s = {.stop_after = 2500};
        CHECK_EQ(sqlite3_open(fx.db, &s.writer), SQLITE_OK);
        sqlite3_exec(s.writer, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        uint64_t handed;
        CHECK_EQ(export(&fx, false, &s, &handed), 99);
        CHECK_EQ(s.rows, 2500u);
        CHECK_EQ(handed, 2500u);
        CHECK(s.checkpointed); /* no reader held the WAL back */
        sqlite3_close(s.writer);
        unit_rmtree(fx.dir);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_every_row_in_order);
        RUN(test_stop_and_no_open_transaction);
        return unit_done();
}
