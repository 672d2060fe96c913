/*
 * test_handout.c - the coordinator's hand-out (src/coord/handout.c): pass 1
 * skips hardlink followers and hands out low rows first, a later pass
 * hands out followers whose leader is done, passes stop at MAX_PASSES, and
 * the phase arrows handout_next takes. Driven against an in-memory
 * manifest (MF_MEMORY), without threads; the manifest's own rows (by id)
 * are the oracle.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "coord/internal.h"
#include "manifest.h"
#include "manifest/internal.h" /* the rows a test starts from */

struct fixture {
        struct ferry_manifest *m;
        struct ferry_error err;
        int64_t gen, root;
        struct handout h;
        enum run_phase phase;
};

static void fx_open(struct fixture *fx, int work_kind)
{
        memset(fx, 0, sizeof(*fx));
        CHECK_EQ(ferry_manifest_open("unused", MF_MEMORY | MF_CREATE, &fx->m,
                                     &fx->err),
                 0);
        CHECK_EQ(ferry_manifest_bind_job(fx->m, "/the/src", "/the/dst"), 0);
        struct ferry_stat dir;
        memset(&dir, 0, sizeof(dir));
        dir.mode = S_IFDIR | 0755;
        bool is_new, marking;
        CHECK_EQ(ferry_manifest_begin(fx->m), 0);
        CHECK_EQ(mf_next_gen(fx->m, &fx->gen), 0);
        CHECK_EQ(mf_dir_upsert(fx->m, "", 0, &dir, fx->gen, &fx->root, &is_new,
                               &marking),
                 0);
        handout_init(&fx->h, work_kind, 4);
}

static void fx_close(struct fixture *fx)
{
        ferry_manifest_close(fx->m);
}

/* A regular file in SRC's root: ino and nlink make hardlink groups. */
static int64_t add_file(struct fixture *fx, const char *name, uint64_t ino,
                        uint32_t nlink)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = S_IFREG | 0644;
        st.size = 10;
        st.mtime = (struct ferry_time){5000, 0};
        st.dev = 7;
        st.ino = ino;
        st.nlink = nlink;
        struct ferry_entry_rec rec;
        CHECK_EQ(mf_file_upsert(fx->m, fx->root, false, true, name,
                                strlen(name), &st, fx->gen, true, &rec),
                 0);
        return rec.id;
}

static void mark_done(struct fixture *fx, int64_t id, uint64_t ino)
{
        struct ferry_item it;
        memset(&it, 0, sizeof(it));
        it.id = id;
        it.type = FT_REG;
        it.st.mode = S_IFREG | 0644;
        it.st.size = 10;
        it.st.dev = 7;
        it.st.ino = ino;
        it.st.mtime = (struct ferry_time){5000, 0};
        CHECK_EQ(mf_file_done(fx->m, &it), 0);
}

/* The next batch (NULL: none); the ids it holds in ids[], their count. */
static size_t next(struct fixture *fx, bool settled, int64_t *ids, size_t cap)
{
        struct ferry_batch *b = NULL;
        CHECK_EQ(handout_next(&fx->h, fx->m, fx->gen, settled, &fx->phase, &b),
                 0);
        size_t n = b ? b->n : 0;
        for (size_t i = 0; i < n && i < cap; i++)
                ids[i] = b->items[i].id;
        CHECK(!b || b->n > 0); /* never an empty batch */
        ferry_batch_free(b);
        return n;
}

static bool has(const int64_t *ids, size_t n, int64_t id)
{
        for (size_t i = 0; i < n; i++)
                if (ids[i] == id)
                        return true;
        return false;
}

static void test_first_pass_then_followers(void)
{
        struct fixture fx;
        fx_open(&fx, WORK_COPY);
        int64_t a = add_file(&fx, "a", 100, 2); /* leader */
        int64_t f = add_file(&fx, "f", 100, 2); /* its follower */
        int64_t c = add_file(&fx, "c", 200, 1);
        int64_t ids[64];

        /* pass 1 skips the follower */
        fx.phase = PH_FIRST_PASS;
        size_t n = next(&fx, false, ids, 64);
        CHECK_EQ(n, 2);
        CHECK(has(ids, n, a) && has(ids, n, c) && !has(ids, n, f));
        /* nothing more, and results are out: pass 1 waits for them */
        CHECK_EQ(next(&fx, false, ids, 64), 0);
        CHECK_EQ(fx.phase, PH_FIRST_PASS);
        /* all committed: pass 2 starts, from row 1 */
        mark_done(&fx, a, 100);
        mark_done(&fx, c, 200);
        CHECK_EQ(next(&fx, true, ids, 64), 0);
        CHECK_EQ(fx.phase, PH_LATER_PASS);
        CHECK_EQ(fx.h.pass, 2);
        CHECK_EQ(fx.h.at.pos, 0);
        /* the follower, its leader done; done rows are not handed out */
        n = next(&fx, false, ids, 64);
        CHECK_EQ(n, 1);
        CHECK(has(ids, n, f));
        mark_done(&fx, f, 100);
        /* pass 2 gave something: pass 3, which gives nothing, ends it */
        CHECK_EQ(next(&fx, true, ids, 64), 0);
        CHECK_EQ(fx.phase, PH_DRAINING);
        CHECK_EQ(fx.h.pass, 3);
        /* nothing is handed out once draining */
        CHECK_EQ(next(&fx, true, ids, 64), 0);
        fx_close(&fx);
}

static void test_passes_stop_at_max(void)
{
        struct fixture fx;
        fx_open(&fx, WORK_COPY);
        int64_t a = add_file(&fx, "a", 100, 1); /* never done */
        int64_t ids[8];
        fx.phase = PH_FIRST_PASS;
        CHECK_EQ(next(&fx, false, ids, 8), 1);
        CHECK_EQ(next(&fx, true, ids, 8), 0);
        CHECK_EQ(fx.phase, PH_LATER_PASS);
        for (int pass = 2; pass <= MAX_PASSES; pass++) {
                /* each pass hands it out again, the next starts at once */
                CHECK_EQ(next(&fx, true, ids, 8), 1);
                CHECK_EQ(ids[0], a);
                CHECK_EQ(fx.h.pass, pass);
        }
        CHECK_EQ(next(&fx, true, ids, 8), 0);
        CHECK_EQ(fx.phase, PH_DRAINING);
        CHECK_EQ(fx.h.pass, MAX_PASSES);
        fx_close(&fx);
}

static void test_low_rows(void)
{
        struct fixture fx;
        fx_open(&fx, WORK_COPY);
        int64_t ids[64];
        char name[16];
        int64_t first = 0, last = 0;
        for (int i = 0; i < 40; i++) {
                snprintf(name, sizeof(name), "f%02d", i);
                last = add_file(&fx, name, 1000 + (uint64_t)i, 1);
                if (!first)
                        first = last;
        }
        /* while the scan runs, pass 1 follows the ids */
        fx.phase = PH_SCANNING;
        CHECK_EQ(next(&fx, true, ids, 64), BATCH_ITEMS);
        CHECK_EQ(ids[0], first);
        CHECK_EQ(next(&fx, true, ids, 64), 40 - BATCH_ITEMS);
        CHECK_EQ(fx.h.at.pos, last);
        /* the scan is not over: no later pass, however settled */
        CHECK_EQ(next(&fx, true, ids, 64), 0);
        CHECK_EQ(fx.phase, PH_SCANNING);
        /* a row behind the cursor changed: noted, handed out by id */
        for (int64_t id = first; id <= first + 2; id++)
                mark_done(&fx, id, 1000 + (uint64_t)(id - first));
        CHECK_EQ(mf_file_set_state(fx.m, first + 1, ST_PENDING, NULL, NULL), 0);
        handout_note_low(&fx.h, first + 1);
        handout_note_low(&fx.h, last + 1); /* ahead of the cursor: not */
        handout_note_low(&fx.h, 0);        /* no row */
        CHECK_EQ(fx.h.n_low, 1);
        size_t n = next(&fx, false, ids, 64);
        CHECK_EQ(n, 1);
        CHECK_EQ(ids[0], first + 1);
        CHECK_EQ(fx.h.n_low, 0);
        /* a noted row no longer pending is skipped */
        handout_note_low(&fx.h, first);
        CHECK_EQ(next(&fx, false, ids, 64), 0);
        CHECK_EQ(fx.phase, PH_SCANNING);
        fx_close(&fx);
}

static void test_verify_hands_out_once(void)
{
        struct fixture fx;
        fx_open(&fx, WORK_VERIFY_DST);
        int64_t a = add_file(&fx, "a", 100, 1);
        int64_t b = add_file(&fx, "b", 200, 1); /* pending: not verified */
        mark_done(&fx, a, 100);
        int64_t ids[8];
        fx.phase = PH_VERIFYING;
        size_t n = next(&fx, false, ids, 8);
        CHECK_EQ(n, 1);
        CHECK(has(ids, n, a) && !has(ids, n, b));
        /* the end of the rows ends the hand-out, results out or not */
        CHECK_EQ(next(&fx, false, ids, 8), 0);
        CHECK_EQ(fx.phase, PH_DRAINING);
        fx_close(&fx);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_first_pass_then_followers);
        RUN(test_passes_stop_at_max);
        RUN(test_low_rows);
        RUN(test_verify_hands_out_once);
        return unit_done();
}
