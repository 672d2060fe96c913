/*
 * test_chunks.c - large files in chunks, the manifest's side
 * (src/manifest/chunks.c, chunks.h): record_chunk (a first row, the same
 * temp file, another temp file or SRC replacing the old rows, chunks out
 * of range refused, late chunks of a row no longer pending ignored); the
 * plan a big row is handed out with (resume, fresh start with stale rows
 * dropped, verify's chunk hashes, repair of the chunks verify marked
 * bad); what each outcome and each other path does to them (done keeps
 * the chunks, a changed SRC drops them, a failure keeps them, reset_done,
 * forget_file, temp_removed, a changed scan entry); the end-of-run temp
 * pass finding gone rows with chunks; and the bytes that
 * `ferry status` counts for unfinished files. A second SQLite connection
 * is the oracle for what was stored.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "chunks.h"
#include "manifest.h"

#include <sqlite3.h>

#define MIB (1ull << 20)
#define BIG (100 * MIB)
/* its chunks: 7 of 16 MiB (16 x 6, 4), or 4 of 32 MiB (32 x 3, 4) */
#define NCH ((uint32_t)((BIG + FERRY_CHUNK_SIZE - 1) / FERRY_CHUNK_SIZE))

struct fx {
        char dir[PATH_MAX];
        char db[PATH_MAX + 16];
        struct ferry_manifest *m;
        int64_t gen;
        int64_t big, small; /* the rows */
};

static struct ferry_stat file_stat(uint64_t size, int64_t mtime, uint64_t ino)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = S_IFREG | 0644;
        st.size = size;
        st.mtime = (struct ferry_time){mtime, 500};
        st.ctime = (struct ferry_time){mtime + 7, 0};
        st.dev = 0xfe00;
        st.ino = ino;
        st.nlink = 1;
        return st;
}

/* The root's listing: "big" (st_big) and "small" (1 KiB). */
static int list_root(struct fx *f, const struct ferry_stat *st_big)
{
        struct ferry_listing *l = ferry_listing_new("", 0, 4);
        if (!l)
                return -1;
        l->dir_st = file_stat(0, 50, 1);
        l->dir_st.mode = S_IFDIR | 0755;
        l->first = l->last = true;
        l->seen = 2;
        struct ferry_stat small = file_stat(1024, 1000, 11);
        ferry_listing_add(l, "big", 3, st_big);
        ferry_listing_add(l, "small", 5, &small);
        struct ferry_entry_rec out[2];
        struct ferry_listing_rec how = {.gen = f->gen};
        int rc = ferry_manifest_record_listing(f->m, l, &how, out);
        ferry_listing_free(l);
        f->big = out[0].id;
        f->small = out[1].id;
        return rc;
}

static void fx_open(struct fx *f)
{
        memset(f, 0, sizeof(*f));
        unit_tmpdir(f->dir, "chunks");
        snprintf(f->db, sizeof(f->db), "%s/m.db", f->dir);
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(f->db, MF_CREATE, &f->m, &err), 0);
        CHECK_EQ(ferry_manifest_bind_job(f->m, "/src", "/dst"), 0);
        CHECK_EQ(ferry_manifest_begin(f->m), 0);
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(f->m, &f->gen, &files, &bytes), 0);
        struct ferry_stat big = file_stat(BIG, 1000, 10);
        CHECK_EQ(list_root(f, &big), 0);
        CHECK_EQ(ferry_manifest_scan_complete(f->m, f->gen), 0);
}

static void fx_close(struct fx *f)
{
        ferry_manifest_close(f->m);
        unit_rmtree(f->dir);
}

/* One integer through a connection of our own (after a commit); -999
 * when the query fails. */
static int64_t sql_int(struct fx *f, const char *sql, int64_t arg)
{
        CHECK_EQ(ferry_manifest_commit(f->m), 0);
        sqlite3 *h = NULL;
        sqlite3_stmt *s = NULL;
        int64_t v = -999;
        if (sqlite3_open_v2(f->db, &h, SQLITE_OPEN_READONLY, NULL) ==
                    SQLITE_OK &&
            sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
                if (sqlite3_bind_parameter_count(s) >= 1)
                        sqlite3_bind_int64(s, 1, arg);
                if (sqlite3_step(s) == SQLITE_ROW)
                        v = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
        sqlite3_close(h);
        CHECK_EQ(ferry_manifest_begin(f->m), 0);
        return v;
}

static int64_t n_partial(struct fx *f, int64_t id)
{
        return sql_int(f, "SELECT count(*) FROM partial WHERE file_id = ?1",
                       id);
}

static int64_t n_chunks(struct fx *f, int64_t id)
{
        return sql_int(f, "SELECT count(*) FROM chunks WHERE file_id = ?1", id);
}

static void hash_of(uint32_t idx, uint8_t seed, uint8_t h[16])
{
        for (int i = 0; i < 16; i++)
                h[i] = (uint8_t)(seed + idx * 16 + (unsigned)i);
}

/* A chunk message for row id, read from src, in temp (dev 7, ino). */
static struct ferry_chunk_msg
chunk_msg(int64_t id, uint32_t idx, const struct ferry_stat *src, uint64_t ino)
{
        struct ferry_chunk_msg c;
        memset(&c, 0, sizeof(c));
        c.msg.kind = MSG_CHUNK;
        c.file_id = id;
        c.idx = idx;
        c.chunk_size = FERRY_CHUNK_SIZE;
        hash_of(idx, 1, c.hash);
        c.src = *src;
        c.tmp_dev = 7;
        c.tmp_ino = ino;
        return c;
}

/* A batch of the rows pass hands out. */
static struct ferry_batch *hand_out(struct fx *f, enum ferry_pass pass)
{
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, pass, f->gen);
        struct ferry_batch *b = ferry_batch_new(
                pass == PASS_VERIFY ? WORK_VERIFY_DST : WORK_COPY, 16);
        CHECK(b != NULL);
        if (b)
                CHECK_EQ(ferry_manifest_handout(f->m, &h, b, 16, UINT64_MAX),
                         0);
        return b;
}

static struct ferry_item *item_of(struct ferry_batch *b, int64_t id)
{
        for (size_t i = 0; b && i < b->n; i++)
                if (b->items[i].id == id)
                        return &b->items[i];
        return NULL;
}

/* The big row copied: handed out, every chunk done (hash seed 9), and
 * recorded FO_DONE with its plan. */
static void copy_done(struct fx *f)
{
        struct ferry_batch *b = hand_out(f, PASS_COPY_FIRST);
        struct ferry_item *it = item_of(b, f->big);
        CHECK(it && it->plan_off);
        if (!it || !it->plan_off) {
                ferry_batch_free(b);
                return;
        }
        struct ferry_chunk_plan *p = ferry_item_plan(b, it);
        for (uint32_t i = 0; i < p->n; i++) {
                p->chunks[i].state = CH_DONE;
                hash_of(i, 9, p->chunks[i].hash);
        }
        it->result = R_DONE;
        it->dst = (struct ferry_dst_rec){FT_REG, BIG, {2000, 0}};
        struct ferry_outcome o = {
                .kind = FO_DONE, .id = it->id, .item = it, .plan = p};
        CHECK_EQ(ferry_manifest_record_outcomes(f->m, &o, 1, NULL), 0);
        ferry_batch_free(b);
}

static void test_record_chunk(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 0, &src, 500);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        c = chunk_msg(f.big, 2, &src, 500);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_partial(&f, f.big), 1);
        CHECK_EQ(n_chunks(&f, f.big), 2);
        CHECK_EQ(sql_int(&f, "SELECT tmp_ino FROM partial WHERE file_id = ?1",
                         f.big),
                 500);
        CHECK_EQ(sql_int(&f, "SELECT src_size FROM partial WHERE file_id = ?1",
                         f.big),
                 (int64_t)BIG);
        CHECK_EQ(sql_int(&f,
                         "SELECT length(hash) FROM chunks WHERE file_id = ?1"
                         " AND idx = 2",
                         f.big),
                 16);
        /* the same chunk again replaces its row */
        c = chunk_msg(f.big, 2, &src, 500);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_chunks(&f, f.big), 2);

        /* another temp file: the old chunks go */
        c = chunk_msg(f.big, 1, &src, 501);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_chunks(&f, f.big), 1);
        CHECK_EQ(
                sql_int(&f, "SELECT idx FROM chunks WHERE file_id = ?1", f.big),
                1);
        CHECK_EQ(sql_int(&f, "SELECT tmp_ino FROM partial WHERE file_id = ?1",
                         f.big),
                 501);
        /* another SRC (its ctime moved) */
        struct ferry_stat moved = src;
        moved.ctime.nsec++;
        c = chunk_msg(f.big, 3, &moved, 501);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_chunks(&f, f.big), 1);
        CHECK_EQ(
                sql_int(&f, "SELECT idx FROM chunks WHERE file_id = ?1", f.big),
                3);
        CHECK_EQ(n_partial(&f, f.big), 1);

        /* out of the file, and a chunk size no copier uses: refused */
        c = chunk_msg(f.big, NCH, &src, 501);
        CHECK(ferry_manifest_record_chunk(f.m, &c) != 0);
        c = chunk_msg(f.big, 0, &src, 501);
        c.chunk_size = 12345;
        CHECK(ferry_manifest_record_chunk(f.m, &c) != 0);
        fx_close(&f);
}

static void test_plan_resume_and_fresh(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 1, &src, 600);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        struct ferry_batch *b = hand_out(&f, PASS_COPY_FIRST);
        CHECK_EQ(b ? b->n : 0, 2);
        struct ferry_item *small = item_of(b, f.small);
        CHECK(small && small->plan_off == 0); /* too small for chunks */
        struct ferry_item *it = item_of(b, f.big);
        const struct ferry_chunk_plan *p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p != NULL);
        if (p) {
                CHECK_EQ(p->n, NCH);
                CHECK_EQ(p->chunk_size, FERRY_CHUNK_SIZE);
                CHECK(p->resume);
                CHECK(!p->repair);
                CHECK_EQ(p->tmp_dev, 7);
                CHECK_EQ(p->tmp_ino, 600);
                CHECK_EQ(p->chunks[0].state, CH_TODO);
                CHECK_EQ(p->chunks[1].state, CH_DONE);
                CHECK(!memcmp(p->chunks[1].hash, c.hash, 16));
                CHECK_EQ(p->chunks[2].state, CH_TODO);
                CHECK_EQ(p->chunks[3].state, CH_TODO);
        }
        ferry_batch_free(b);

        /* chunks read from another SRC than the row's: no resume, and
         * the stale rows are dropped at the hand-out */
        struct ferry_stat other = src;
        other.mtime.sec++;
        c = chunk_msg(f.big, 0, &other, 601);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_partial(&f, f.big), 1);
        b = hand_out(&f, PASS_COPY_FIRST);
        it = item_of(b, f.big);
        p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p && !p->resume && !p->repair && p->n == NCH);
        for (uint32_t i = 0; p && i < p->n; i++)
                CHECK_EQ(p->chunks[i].state, CH_TODO);
        ferry_batch_free(b);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);
        fx_close(&f);
}

/* The row's SRC with another st_dev (a share remounted: the same inode,
 * size and times) keeps the chunks for a resume; another inode drops
 * them. The partial row is the oracle's (sqlite3), the plan the hand-out's. */
static void test_remounted_src(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 1, &src, 650);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        /* recorded with another device than the row's */
        CHECK_EQ(ferry_manifest_commit(f.m), 0);
        sqlite3 *h = NULL;
        CHECK_EQ(sqlite3_open(f.db, &h), SQLITE_OK);
        CHECK_EQ(sqlite3_exec(h, "UPDATE partial SET src_dev = 77", NULL, NULL,
                              NULL),
                 SQLITE_OK);
        sqlite3_close(h);
        CHECK_EQ(ferry_manifest_begin(f.m), 0);
        struct ferry_batch *b = hand_out(&f, PASS_COPY_FIRST);
        struct ferry_item *it = item_of(b, f.big);
        const struct ferry_chunk_plan *p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p && p->resume && p->n == NCH);
        CHECK(p && p->chunks[1].state == CH_DONE &&
              p->chunks[0].state == CH_TODO);
        ferry_batch_free(b);
        /* a chunk of the resumed run, read from the remounted SRC: added to
         * the kept ones */
        struct ferry_stat remounted = src;
        remounted.dev = 78;
        c = chunk_msg(f.big, 2, &remounted, 650);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_chunks(&f, f.big), 2);
        /* another inode (the same size and times): another file */
        struct ferry_stat other = src;
        other.ino = 99;
        c = chunk_msg(f.big, 3, &other, 650);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_chunks(&f, f.big), 1);
        b = hand_out(&f, PASS_COPY_FIRST);
        it = item_of(b, f.big);
        p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p && !p->resume);
        for (uint32_t i = 0; p && i < p->n; i++)
                CHECK_EQ(p->chunks[i].state, CH_TODO);
        ferry_batch_free(b);
        CHECK_EQ(n_chunks(&f, f.big), 0);
        fx_close(&f);
}

/* Done keeps the chunks (bad 0) and drops the partial row; verify gets
 * them; verify's CH_BAD marks them; the next copy repairs those; done
 * again clears the marks. */
static void test_done_verify_repair(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 0, &src, 700);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        copy_done(&f);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), NCH);
        CHECK_EQ(sql_int(&f, "SELECT sum(bad) FROM chunks WHERE file_id = ?1",
                         f.big),
                 0);
        CHECK_EQ(sql_int(&f, "SELECT state FROM files WHERE id = ?1", f.big),
                 ST_DONE);
        /* a late chunk of a done row changes nothing */
        c = chunk_msg(f.big, 2, &src, 701);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), NCH);

        struct ferry_batch *b = hand_out(&f, PASS_VERIFY);
        struct ferry_item *it = item_of(b, f.big);
        struct ferry_chunk_plan *p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p && p->n == NCH && !p->resume && !p->repair);
        uint8_t h[16];
        for (uint32_t i = 0; p && i < p->n; i++) {
                CHECK_EQ(p->chunks[i].state, CH_DONE);
                hash_of(i, 9, h);
                CHECK(!memcmp(p->chunks[i].hash, h, 16));
        }
        if (p) {
                p->chunks[2].state = CH_BAD;
                it->result = R_MISMATCH;
                struct ferry_outcome o = {.kind = FO_AGAIN,
                                          .id = it->id,
                                          .why = "verify: content differs",
                                          .plan = p};
                CHECK_EQ(ferry_manifest_record_outcomes(f.m, &o, 1, NULL), 0);
        }
        ferry_batch_free(b);
        CHECK_EQ(sql_int(&f,
                         "SELECT group_concat(idx) FROM chunks"
                         " WHERE file_id = ?1 AND bad = 1",
                         f.big),
                 2);
        CHECK_EQ(n_chunks(&f, f.big), NCH);

        b = hand_out(&f, PASS_COPY_FIRST);
        it = item_of(b, f.big);
        p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p && p->repair && !p->resume && p->n == NCH);
        for (uint32_t i = 0; p && i < p->n; i++)
                CHECK_EQ(p->chunks[i].state, i == 2 ? CH_BAD : CH_DONE);
        ferry_batch_free(b);
        copy_done(&f);
        CHECK_EQ(sql_int(&f, "SELECT sum(bad) FROM chunks WHERE file_id = ?1",
                         f.big),
                 0);
        CHECK_EQ(n_chunks(&f, f.big), NCH);

        /* a file copied before chunks were kept: verify gets no plan */
        struct ferry_item gone = {.id = f.big, .type = FT_REG};
        gone.st.size = BIG;
        CHECK_EQ(ferry_manifest_temp_removed(f.m, &gone), 0);
        b = hand_out(&f, PASS_VERIFY);
        it = item_of(b, f.big);
        CHECK(it && it->plan_off == 0);
        ferry_batch_free(b);
        fx_close(&f);
}

/* What drops a row's partial row and chunks, and what keeps them. */
static void test_invalidation(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 0, &src, 800);
#define PLANT() CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0)
        /* a failure or a vanished SRC keeps them (a next run resumes) */
        PLANT();
        struct ferry_outcome o = {.kind = FO_FAILED, .id = f.big, .why = "x"};
        CHECK_EQ(ferry_manifest_record_outcomes(f.m, &o, 1, NULL), 0);
        CHECK_EQ(n_partial(&f, f.big), 1);
        CHECK_EQ(n_chunks(&f, f.big), 1);
        o.kind = FO_VANISHED;
        CHECK_EQ(ferry_manifest_record_outcomes(f.m, &o, 1, NULL), 0);
        CHECK_EQ(n_chunks(&f, f.big), 1);
        /* a SRC that changed while copied drops them */
        o.kind = FO_FAILED;
        o.src_changed = true;
        CHECK_EQ(ferry_manifest_record_outcomes(f.m, &o, 1, NULL), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);

        /* the row pending again (a new scan), then the temp removed */
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        CHECK_EQ(list_root(&f, &src), 0);
        PLANT();
        CHECK_EQ(n_chunks(&f, f.big), 1);
        struct ferry_item it = {.id = f.big, .type = FT_REG};
        it.st.size = BIG;
        CHECK_EQ(ferry_manifest_temp_removed(f.m, &it), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);

        /* reset_done (DST replaced) */
        PLANT();
        CHECK_EQ(ferry_manifest_reset_done(f.m), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);

        /* the scan finds the file changed */
        PLANT();
        struct ferry_stat changed = file_stat(BIG + 1, 1001, 10);
        CHECK_EQ(list_root(&f, &changed), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);
        /* ... a listing that finds it unchanged keeps them */
        c.src = changed;
        PLANT();
        CHECK_EQ(list_root(&f, &changed), 0);
        CHECK_EQ(n_chunks(&f, f.big), 1);

        /* a done file's metadata applied alone keeps its chunks */
        copy_done(&f);
        CHECK_EQ(n_chunks(&f, f.big), NCH);
        struct ferry_item meta = {
                .id = f.big, .type = FT_REG, .need = MF_NEED_META};
        meta.st = changed;
        struct ferry_outcome om = {.kind = FO_DONE, .id = f.big, .item = &meta};
        CHECK_EQ(ferry_manifest_record_outcomes(f.m, &om, 1, NULL), 0);
        CHECK_EQ(n_chunks(&f, f.big), NCH);

        /* a row forgotten (--delete) drops them */
        meta.st.size = BIG + 1;
        CHECK_EQ(ferry_manifest_forget_file(f.m, &meta, true), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);
        /* and rows of a file row deleted some other way go at the next
         * complete scan */
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        CHECK_EQ(list_root(&f, &src), 0);
        c.file_id = f.big;
        c.src = src;
        PLANT();
        CHECK_EQ(n_chunks(&f, f.big), 1);
        sqlite3 *h = NULL;
        CHECK_EQ(ferry_manifest_commit(f.m), 0);
        CHECK_EQ(sqlite3_open(f.db, &h), SQLITE_OK);
        CHECK_EQ(sqlite3_exec(h, "DELETE FROM files WHERE name = x'626967'",
                              NULL, NULL, NULL),
                 SQLITE_OK);
        sqlite3_close(h);
        CHECK_EQ(ferry_manifest_begin(f.m), 0);
        CHECK_EQ(ferry_manifest_scan_complete(f.m, f.gen), 0);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);
#undef PLANT
        fx_close(&f);
}

/* A file too big for 65536 chunks of FERRY_CHUNK_SIZE (16 MiB) gets bigger
 * chunks (3 TiB: 64 MiB); one too big for 65536 of 1 GiB gets no plan
 * (copied whole). */
static void test_huge_files(void)
{
        struct fx f;
        fx_open(&f);
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        struct ferry_stat huge = file_stat(3ull << 40, 1000, 10); /* 3 TiB */
        CHECK_EQ(list_root(&f, &huge), 0);
        struct ferry_batch *b = hand_out(&f, PASS_COPY_FIRST);
        struct ferry_item *it = item_of(b, f.big);
        const struct ferry_chunk_plan *p = it ? ferry_item_plan(b, it) : NULL;
        CHECK(p != NULL);
        if (p) {
                CHECK_EQ(p->chunk_size, 64 * MIB);
                CHECK_EQ(p->n, 49152);
        }
        ferry_batch_free(b);
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        huge = file_stat(65ull << 40, 1000, 10); /* 65 TiB */
        CHECK_EQ(list_root(&f, &huge), 0);
        b = hand_out(&f, PASS_COPY_FIRST);
        it = item_of(b, f.big);
        CHECK(it && it->plan_off == 0);
        ferry_batch_free(b);
        fx_close(&f);
}

/* The root listed with "small" alone: "big" is gone from SRC. */
static int list_small(struct fx *f)
{
        struct ferry_listing *l = ferry_listing_new("", 0, 4);
        if (!l)
                return -1;
        l->dir_st = file_stat(0, 51, 1);
        l->dir_st.mode = S_IFDIR | 0755;
        l->first = l->last = true;
        l->seen = 1;
        struct ferry_stat small = file_stat(1024, 1000, 11);
        ferry_listing_add(l, "small", 5, &small);
        struct ferry_entry_rec out[1];
        struct ferry_listing_rec how = {.gen = f->gen};
        int rc = ferry_manifest_record_listing(f->m, l, &how, out);
        ferry_listing_free(l);
        return rc;
}

/* A row gone from SRC whose temp file holds chunks is in the end-of-run
 * temp pass, whenever it went (its temp file is removed, temp_removed
 * drops the rows); a pending row of this scan is not (a next run resumes
 * it). */
static void test_stale_temps(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 0, &src, 950);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        struct ferry_batch *b = hand_out(&f, PASS_STALE_TEMPS);
        CHECK(b && !item_of(b, f.big));
        ferry_batch_free(b);
        /* copied once (a hash), then gone in one scan, then another scan */
        copy_done(&f);
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        struct ferry_stat changed = file_stat(BIG, 1005, 10);
        CHECK_EQ(list_root(&f, &changed), 0);
        CHECK_EQ(ferry_manifest_scan_complete(f.m, f.gen), 0);
        c.src = changed;
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        CHECK_EQ(n_partial(&f, f.big), 1);
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        CHECK_EQ(list_small(&f), 0);
        CHECK_EQ(ferry_manifest_scan_complete(f.m, f.gen), 0);
        CHECK_EQ(ferry_manifest_scan_start(f.m, &f.gen, &files, &bytes), 0);
        CHECK_EQ(list_small(&f), 0);
        CHECK_EQ(ferry_manifest_scan_complete(f.m, f.gen), 0);
        CHECK_EQ(sql_int(&f, "SELECT state FROM files WHERE id = ?1", f.big),
                 ST_REMOVED);
        b = hand_out(&f, PASS_STALE_TEMPS);
        struct ferry_item *it = item_of(b, f.big);
        CHECK(it != NULL);
        if (it)
                CHECK_EQ(ferry_manifest_temp_removed(f.m, it), 0);
        ferry_batch_free(b);
        CHECK_EQ(n_partial(&f, f.big), 0);
        CHECK_EQ(n_chunks(&f, f.big), 0);
        fx_close(&f);
}

/* `ferry status`: the committed chunks of unfinished files (the last
 * chunk is shorter); none once the file is done. */
static void test_status_bytes(void)
{
        struct fx f;
        fx_open(&f);
        struct ferry_stat src = file_stat(BIG, 1000, 10);
        struct ferry_chunk_msg c = chunk_msg(f.big, 0, &src, 900);
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        c = chunk_msg(f.big, NCH - 1, &src, 900); /* the short last one */
        CHECK_EQ(ferry_manifest_record_chunk(f.m, &c), 0);
        struct ferry_status_info info;
        memset(&info, 0xff, sizeof(info));
        CHECK_EQ(ferry_manifest_commit(f.m), 0);
        CHECK_EQ(ferry_manifest_status(f.m, &info, NULL), 0);
        CHECK_EQ(info.partial.files, 1);
        CHECK_EQ(info.partial.bytes,
                 FERRY_CHUNK_SIZE + (BIG - (NCH - 1) * FERRY_CHUNK_SIZE));
        CHECK_EQ(info.pending.bytes, BIG + 1024);
        CHECK_EQ(ferry_manifest_begin(f.m), 0);
        copy_done(&f);
        CHECK_EQ(ferry_manifest_commit(f.m), 0);
        CHECK_EQ(ferry_manifest_status(f.m, &info, NULL), 0);
        CHECK_EQ(info.partial.files, 0);
        CHECK_EQ(info.partial.bytes, 0);
        CHECK_EQ(info.done.bytes, BIG);
        CHECK_EQ(ferry_manifest_begin(f.m), 0);
        fx_close(&f);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_record_chunk);
        RUN(test_plan_resume_and_fresh);
        RUN(test_remounted_src);
        RUN(test_done_verify_repair);
        RUN(test_invalidation);
        RUN(test_stale_temps);
        RUN(test_huge_files);
        RUN(test_status_bytes);
        return unit_done();
}
