/*
 * test_manifest_scan.c - what a scan records (ferry_manifest_record_listing)
 * does not depend on how a directory's listing is cut into chunks. A
 * listing that is its directory whole has the directory's rows read at
 * once (manifest/scan.c); one cut into chunks of one entry looks each row
 * up by name. Two manifests get the same scans of a seeded, changing SRC,
 * one whole, one in chunks; the oracle is SQLite itself: every column of
 * every row of files and dirs must agree after each scan, and so must what
 * each entry became. The SRC changes are those a re-run must notice: data
 * (size, mtime, inode), metadata alone (mode, ctime), names removed, added
 * and renamed (with and without the directory's mtime moving), names
 * listed twice, second links of a done file, and a directory with more
 * rows than are read at once. Also what a scan's start retries.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "buf.h"
#include "manifest.h"
#include "manifest/internal.h" /* m->db, mf_* */

#include <sqlite3.h>

#define NDIRS   6
#define BIG_DIR 5    /* the directory with more rows than are read at once */
#define MAXF    1200 /* names in one directory, at most */
#define GENS    14

struct file {
        char name[24];
        struct ferry_stat st;
        bool live;
};

struct dir {
        char path[16];
        int64_t mtime;
        struct file f[MAXF];
        size_t n;
};

struct model {
        struct dir d[NDIRS];
        uint64_t seed, next_ino;
        int64_t clock;
};

static uint64_t rnd(struct model *s, uint64_t n)
{
        s->seed = s->seed * 6364136223846793005ULL + 1442695040888963407ULL;
        return (s->seed >> 33) % n;
}

static struct ferry_stat file_stat(struct model *s)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = S_IFREG | 0644;
        st.size = 1 + rnd(s, 5000);
        st.mtime = (struct ferry_time){1700000000 + s->clock++, 500};
        st.ctime = st.mtime;
        st.atime = st.mtime;
        st.dev = 0xfe00;
        st.ino = s->next_ino++;
        st.nlink = 1;
        st.uid = 1000;
        st.gid = 1000;
        return st;
}

/* A file named prefix and k. */
static void add_file(struct model *s, struct dir *d, const char *prefix,
                     uint64_t k)
{
        if (d->n == MAXF)
                return;
        struct file *f = &d->f[d->n++];
        snprintf(f->name, sizeof(f->name), "%s%llu", prefix,
                 (unsigned long long)k);
        f->st = file_stat(s);
        f->live = true;
}

static void model_init(struct model *s, uint64_t seed)
{
        memset(s, 0, sizeof(*s));
        s->seed = seed;
        s->next_ino = 1000;
        for (int i = 0; i < NDIRS; i++) {
                struct dir *d = &s->d[i];
                if (i) /* d0 is SRC's root, "" */
                        snprintf(d->path, sizeof(d->path), "d%d", i);
                d->mtime = 1600000000 + i;
                size_t n = i == BIG_DIR ? 1100 : 3 + rnd(s, 60);
                for (size_t k = 0; k < n; k++)
                        add_file(s, d, "f", k);
        }
}

static struct file *pick(struct model *s, struct dir *d)
{
        for (int tries = 0; tries < 20 && d->n; tries++) {
                struct file *f = &d->f[rnd(s, d->n)];
                if (f->live)
                        return f;
        }
        return NULL;
}

/* One change of SRC in directory d; most move d's mtime as a real
 * directory's would, some do not (an mtime that lies). */
static void change(struct model *s, struct dir *d)
{
        struct file *f = pick(s, d), *g = pick(s, d);
        int64_t t = 1700000000 + s->clock++;
        bool moves = rnd(s, 4) != 0;
        switch (rnd(s, 8)) {
        case 0: /* data, same size */
                if (f)
                        f->st.mtime = f->st.ctime = (struct ferry_time){t, 1};
                break;
        case 1: /* size */
                if (f) {
                        f->st.size++;
                        f->st.ctime = (struct ferry_time){t, 2};
                }
                break;
        case 2: /* mode alone (ctime) */
                if (f) {
                        f->st.mode ^= 0040;
                        f->st.ctime = (struct ferry_time){t, 3};
                }
                break;
        case 3: /* replaced: a new inode */
                if (f)
                        f->st.ino = s->next_ino++;
                break;
        case 4: /* removed */
                if (f)
                        f->live = false;
                if (moves)
                        d->mtime = t;
                break;
        case 5: /* added */
                add_file(s, d, "new", s->next_ino);
                if (moves)
                        d->mtime = t;
                break;
        case 6: /* renamed */
                if (f) {
                        struct ferry_stat st = f->st;
                        f->live = false;
                        add_file(s, d, "ren", s->next_ino++);
                        d->f[d->n - 1].st = st;
                        d->mtime = t;
                }
                break;
        default: /* a second name of f's inode (g: another file) */
                if (f && g && f != g && f->st.nlink == 1) {
                        add_file(s, d, "ln", s->next_ino++);
                        f->st.nlink = 2;
                        f->st.ctime = (struct ferry_time){t, 4};
                        d->f[d->n - 1].st = f->st;
                        d->mtime = t;
                }
                break;
        }
}

/* The listing of d; one of its names twice now and then (a directory
 * changing while it is read). */
static struct ferry_listing *listing_of(struct model *s, const struct dir *d,
                                        bool twice)
{
        struct ferry_listing *l =
                ferry_listing_new(d->path, strlen(d->path), d->n + 1);
        CHECK(l != NULL);
        if (!l)
                return NULL;
        memset(&l->dir_st, 0, sizeof(l->dir_st));
        l->dir_st.mode = S_IFDIR | 0755;
        l->dir_st.mtime = l->dir_st.ctime = (struct ferry_time){d->mtime, 0};
        l->dir_st.dev = 0xfe00;
        l->dir_st.ino = 10 + (uint64_t)(d - s->d);
        /* in readdir's order: any, here from a random start */
        size_t start = d->n ? rnd(s, d->n) : 0;
        for (size_t j = 0; j < d->n; j++) {
                const struct file *f = &d->f[(start + j) % d->n];
                if (f->live)
                        CHECK_EQ(ferry_listing_add(l, f->name, strlen(f->name),
                                                   &f->st),
                                 0);
        }
        if (twice && l->n) {
                const struct ferry_entry *e = &l->entries[l->n / 2];
                char name[24];
                snprintf(name, sizeof(name), "%s", l->arena + e->name_off);
                struct ferry_stat st = e->st;
                CHECK_EQ(ferry_listing_add(l, name, strlen(name), &st), 0);
        }
        l->first = l->last = true;
        l->seen = l->n;
        return l;
}

/* l cut into chunks of one entry (an empty listing stays one chunk). */
static int record_in_chunks(struct ferry_manifest *m,
                            const struct ferry_listing *l,
                            const struct ferry_listing_rec *how,
                            struct ferry_entry_rec *out)
{
        if (!l->n)
                return ferry_manifest_record_listing(m, l, how, out);
        for (size_t i = 0; i < l->n; i++) {
                struct ferry_listing *c =
                        ferry_listing_new(l->path, l->path_len, 1);
                if (!c)
                        return ENOMEM;
                const struct ferry_entry *e = &l->entries[i];
                c->dir_st = l->dir_st;
                c->first = i == 0;
                c->last = i + 1 == l->n;
                c->seen = l->seen;
                int rc = ferry_listing_add(c, l->arena + e->name_off,
                                           e->name_len, &e->st);
                if (!rc)
                        rc = ferry_manifest_record_listing(m, c, how, out + i);
                ferry_listing_free(c);
                if (rc)
                        return rc;
        }
        return 0;
}

/* Every row of a table, one line each, in id order. */
static void dump(struct ferry_manifest *m, const char *table,
                 struct ferry_buf *b)
{
        char sql[64];
        snprintf(sql, sizeof(sql), "SELECT * FROM %s ORDER BY id", table);
        sqlite3_stmt *s = NULL;
        CHECK_EQ(sqlite3_prepare_v2(m->db, sql, -1, &s, NULL), SQLITE_OK);
        while (s && sqlite3_step(s) == SQLITE_ROW) {
                for (int c = 0; c < sqlite3_column_count(s); c++) {
                        const unsigned char *v = sqlite3_column_text(s, c);
                        int n = sqlite3_column_bytes(s, c);
                        ferry_buf_add(b, v ? (const char *)v : "NULL",
                                      v ? (size_t)n : 4);
                        ferry_buf_add(
                                b, c + 1 < sqlite3_column_count(s) ? "|" : "\n",
                                1);
                }
        }
        sqlite3_finalize(s);
}

/* Both manifests hold the same rows; says where they part on failure. */
static bool same_rows(struct ferry_manifest *a, struct ferry_manifest *b,
                      int gen)
{
        bool same = true;
        const char *tables[] = {"files", "dirs"};
        for (size_t t = 0; t < 2; t++) {
                struct ferry_buf x = FERRY_BUF_INIT, y = FERRY_BUF_INIT;
                dump(a, tables[t], &x);
                dump(b, tables[t], &y);
                if (x.len != y.len || memcmp(x.buf, y.buf, x.len)) {
                        size_t i = 0;
                        while (i < x.len && i < y.len && x.buf[i] == y.buf[i])
                                i++;
                        while (i && x.buf[i - 1] != '\n')
                                i--;
                        fprintf(stderr,
                                "  gen %d, %s differ:\n   whole:  %.160s\n"
                                "   chunks: %.160s\n",
                                gen, tables[t], x.buf + i, y.buf + i);
                        same = false;
                }
                ferry_buf_release(&x);
                ferry_buf_release(&y);
        }
        return same;
}

/* Every pending row done, as a copy would leave it, then the metadata of
 * every directory to apply applied. */
static void copy_all(struct ferry_manifest *m, int64_t gen)
{
        enum ferry_pass passes[] = {PASS_COPY_FIRST, PASS_COPY_NEXT};
        for (size_t p = 0; p < 2; p++) {
                struct ferry_handout h;
                ferry_manifest_handout_start(&h, passes[p], gen);
                struct ferry_batch *b = ferry_batch_new(WORK_COPY, 256);
                CHECK(b != NULL);
                for (;;) {
                        b->n = 0;
                        b->arena_len = 0;
                        CHECK_EQ(ferry_manifest_handout(m, &h, b, 256,
                                                        UINT64_MAX),
                                 0);
                        if (!b->n)
                                break;
                        struct ferry_outcome o[256];
                        for (size_t i = 0; i < b->n; i++)
                                o[i] = (struct ferry_outcome){
                                        .kind = FO_DONE,
                                        .id = b->items[i].id,
                                        .item = &b->items[i]};
                        CHECK_EQ(ferry_manifest_record_outcomes(m, o, b->n,
                                                                NULL),
                                 0);
                }
                ferry_batch_free(b);
        }
        struct ferry_dir_walk *w = NULL;
        const struct ferry_dir_row *rows;
        size_t n = 0;
        CHECK_EQ(ferry_manifest_dir_walk(m, DIRS_TO_APPLY, gen, &w), 0);
        while (w && !ferry_manifest_dir_walk_next(m, w, &rows, &n) && n)
                for (size_t i = 0; i < n; i++)
                        CHECK_EQ(ferry_manifest_dir_outcome(
                                         m, &rows[i], DIR_APPLIED, NULL, NULL),
                                 0);
        ferry_manifest_dir_walk_end(w);
}

/* How often the directory's rows were read at once (S_DIR_ROWS). */
static int rows_reads(struct ferry_manifest *m)
{
        int runs = 0;
        for (sqlite3_stmt *s = sqlite3_next_stmt(m->db, NULL); s;
             s = sqlite3_next_stmt(m->db, s))
                if (!strncmp(sqlite3_sql(s), "SELECT name, id, type", 21))
                        runs += sqlite3_stmt_status(s, SQLITE_STMTSTATUS_RUN,
                                                    0);
        return runs;
}

static struct ferry_manifest *mem_open(void)
{
        struct ferry_manifest *m = NULL;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(NULL, MF_MEMORY | MF_CREATE, &m, &err), 0);
        if (m)
                CHECK_EQ(ferry_manifest_begin(m), 0);
        return m;
}

/* One scan of the model into both manifests; false when they part. */
static bool scan_both(struct model *s, struct ferry_manifest *whole,
                      struct ferry_manifest *chunks, bool hard_links, int g)
{
        static struct ferry_entry_rec out_w[MAXF + 1], out_c[MAXF + 1];
        int64_t gw = 0, gc = 0;
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(whole, &gw, &files, &bytes), 0);
        CHECK_EQ(ferry_manifest_scan_start(chunks, &gc, &files, &bytes), 0);
        CHECK_EQ(gw, gc);
        struct ferry_listing_rec how = {.gen = gw, .hard_links = hard_links};
        bool same = true;
        for (int i = 0; i < NDIRS; i++) {
                struct ferry_listing *l =
                        listing_of(s, &s->d[i], rnd(s, 10) == 0);
                if (!l)
                        return false;
                int rw = ferry_manifest_record_listing(whole, l, &how, out_w);
                if (rw)
                        fprintf(stderr, "  %s\n", ferry_manifest_errmsg(whole));
                CHECK_EQ(rw, 0);
                CHECK_EQ(record_in_chunks(chunks, l, &how, out_c), 0);
                for (size_t k = 0; k < l->n; k++)
                        if (out_w[k].res != out_c[k].res ||
                            out_w[k].id != out_c[k].id ||
                            out_w[k].again != out_c[k].again ||
                            out_w[k].skipped != out_c[k].skipped) {
                                fprintf(stderr,
                                        "  gen %d, %s/%s: res %d/%d id "
                                        "%lld/%lld\n",
                                        g, s->d[i].path,
                                        l->arena + l->entries[k].name_off,
                                        out_w[k].res, out_c[k].res,
                                        (long long)out_w[k].id,
                                        (long long)out_c[k].id);
                                same = false;
                        }
                ferry_listing_free(l);
        }
        CHECK_EQ(ferry_manifest_scan_complete(whole, gw), 0);
        CHECK_EQ(ferry_manifest_scan_complete(chunks, gc), 0);
        return same && same_rows(whole, chunks, g);
}

static void run_model(uint64_t seed, bool hard_links)
{
        struct model *s = malloc(sizeof(*s));
        struct ferry_manifest *whole = mem_open(), *chunks = mem_open();
        CHECK(s != NULL);
        if (!s || !whole || !chunks)
                goto out;
        model_init(s, seed);
        for (int g = 1; g <= GENS; g++) {
                bool same = scan_both(s, whole, chunks, hard_links, g);
                CHECK(same);
                if (!same)
                        break;
                /* most scans copy; some leave rows pending (a run cut
                 * short), so that a scan finds pending rows again */
                if (rnd(s, 5)) {
                        copy_all(whole, g);
                        copy_all(chunks, g);
                }
                int changes = g % 3 == 0 ? 0 : 1 + (int)rnd(s, 12);
                for (int c = 0; c < changes; c++)
                        change(s, &s->d[rnd(s, NDIRS)]);
        }
        /* the whole listings were read at once, the chunks never */
        CHECK(rows_reads(whole) > 0);
        CHECK_EQ(rows_reads(chunks), 0);
out:
        ferry_manifest_close(whole);
        ferry_manifest_close(chunks);
        free(s);
}

static void test_whole_and_chunks_agree(void)
{
        for (uint64_t seed = 1; seed <= 6; seed++)
                run_model(seed, true);
}

static void test_whole_and_chunks_agree_no_links(void)
{
        for (uint64_t seed = 100; seed <= 102; seed++)
                run_model(seed, false);
}

/* A directory whose mtime did not move loses a name: its rows are kept
 * this time (counted from the rows read at once) and marked the next. */
static void test_unchanged_dir_lost_a_name(void)
{
        struct model *s = malloc(sizeof(*s));
        struct ferry_manifest *m = mem_open();
        CHECK(s != NULL);
        if (!s || !m)
                goto out;
        model_init(s, 7);
        static struct ferry_entry_rec out[MAXF + 1];
        struct dir *d = &s->d[1];
        for (int g = 1; g <= 3; g++) {
                int64_t gen = 0;
                uint64_t files, bytes;
                CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
                if (g == 2)
                        d->f[0].live = false; /* the mtime stays */
                struct ferry_listing *l = listing_of(s, d, false);
                struct ferry_listing_rec how = {.gen = gen};
                CHECK_EQ(ferry_manifest_record_listing(m, l, &how, out), 0);
                ferry_listing_free(l);
                CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
                uint64_t gone = 0;
                CHECK_EQ(ferry_manifest_count(m, COUNT_GONE, gen, &gone, NULL),
                         0);
                /* g 2: kept, the directory to be marked; g 3: marked */
                CHECK_EQ(gone, g == 3 ? 1u : 0u);
                copy_all(m, gen);
        }
        CHECK(rows_reads(m) >= 2); /* not the first: a new directory */
out:
        ferry_manifest_close(m);
        free(s);
}

static int64_t sql_int(struct ferry_manifest *m, const char *sql)
{
        sqlite3_stmt *s = NULL;
        int64_t v = -99;
        CHECK_EQ(sqlite3_prepare_v2(m->db, sql, -1, &s, NULL), SQLITE_OK);
        if (s && sqlite3_step(s) == SQLITE_ROW)
                v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        return v;
}

/* A new directory that lists a name twice (it changed while it was read):
 * one row, both entries name it, the second is not handed out again. */
static void test_new_dir_lists_a_name_twice(void)
{
        struct model *s = malloc(sizeof(*s));
        struct ferry_manifest *m = mem_open();
        CHECK(s != NULL);
        if (!s || !m)
                goto out;
        model_init(s, 11);
        static struct ferry_entry_rec out[MAXF + 1];
        int64_t gen = 0;
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        struct ferry_listing_rec how = {.gen = gen};
        struct ferry_listing *root = listing_of(s, &s->d[0], false);
        struct ferry_listing *l = listing_of(s, &s->d[1], true);
        CHECK_EQ(ferry_manifest_record_listing(m, root, &how, out), 0);
        int rc = ferry_manifest_record_listing(m, l, &how, out);
        if (rc)
                fprintf(stderr, "  %s\n", ferry_manifest_errmsg(m));
        CHECK_EQ(rc, 0);
        size_t n = l->n;
        CHECK_EQ(out[n - 1].id, out[(n - 1) / 2].id); /* listing_of */
        CHECK_EQ(out[n - 1].res, UP_RESUMED);
        CHECK(!out[n - 1].again);
        char sql[128];
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM files WHERE dir ="
                 " (SELECT id FROM dirs WHERE path = CAST('%.15s' AS BLOB))",
                 s->d[1].path);
        CHECK_EQ(sql_int(m, sql), (int64_t)n - 1);
        ferry_listing_free(root);
        ferry_listing_free(l);
out:
        ferry_manifest_close(m);
        free(s);
}

/* A scan's start makes failed rows pending again (their need kept) and a
 * done row whose metadata fell short pending for its metadata alone; no
 * other row changes. */
static void test_scan_start_retries(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        struct model s;
        model_init(&s, 3);
        int64_t gen = 0, dir = 0;
        uint64_t files, bytes;
        bool is_new = false, marking = false;
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        struct ferry_stat dst = file_stat(&s);
        dst.mode = S_IFDIR | 0755;
        CHECK_EQ(mf_dir_upsert(m, "", 0, &dst, gen, &dir, &is_new, &marking),
                 0);
        /* state, need, meta_step before; state, need after */
        static const int rows[][5] = {
                {MF_ST_FAILED, MF_NEED_DATA, 0, MF_ST_PENDING, MF_NEED_DATA},
                {MF_ST_FAILED, MF_NEED_META, 0, MF_ST_PENDING, MF_NEED_META},
                {MF_ST_DONE, MF_NEED_DATA, 0, MF_ST_DONE, MF_NEED_DATA},
                {MF_ST_DONE, MF_NEED_DATA, 7, MF_ST_PENDING, MF_NEED_META},
                {MF_ST_PENDING, MF_NEED_DATA, 7, MF_ST_PENDING, MF_NEED_DATA},
                {MF_ST_SKIPPED, MF_NEED_DATA, 7, MF_ST_SKIPPED, MF_NEED_DATA},
                {MF_ST_REMOVED, MF_NEED_DATA, 7, MF_ST_REMOVED, MF_NEED_DATA},
        };
        size_t n = sizeof(rows) / sizeof(rows[0]);
        for (size_t i = 0; i < n; i++) {
                char name[8], sql[160];
                snprintf(name, sizeof(name), "r%zu", i);
                struct ferry_stat st = file_stat(&s);
                struct ferry_entry_rec o;
                CHECK_EQ(mf_file_upsert(m, dir, true, true, name, strlen(name),
                                        &st, gen, false, &o),
                         0);
                snprintf(sql, sizeof(sql),
                         "UPDATE files SET state = %d, need = %d,"
                         " meta_step = %d WHERE id = %lld",
                         rows[i][0], rows[i][1], rows[i][2], (long long)o.id);
                CHECK_EQ(sqlite3_exec(m->db, sql, NULL, NULL, NULL), SQLITE_OK);
        }
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        for (size_t i = 0; i < n; i++) {
                char sql[96];
                snprintf(sql, sizeof(sql),
                         "SELECT state * 10 + need FROM files"
                         " WHERE name = CAST('r%zu' AS BLOB)",
                         i);
                CHECK_EQ(sql_int(m, sql), rows[i][3] * 10 + rows[i][4]);
        }
        ferry_manifest_close(m);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_whole_and_chunks_agree);
        RUN(test_whole_and_chunks_agree_no_links);
        RUN(test_unchanged_dir_lost_a_name);
        RUN(test_new_dir_lists_a_name_twice);
        RUN(test_scan_start_retries);
        return unit_done();
}
