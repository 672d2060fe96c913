/*
 * test_copy_chunks.c - a file copied in chunks (src/copy_chunks.c,
 * copy_stream.c, copy_repair.c): a planned copy into a temp with the
 * chunk messages caught on a queue (their hashes are XXH3 of the ranges,
 * the whole hash is XXH3 of the file, as xxh128sum's), one stream and
 * several; a resume from a planted temp keeps its done chunks without
 * reading them from SRC (SRC's preads counted through fsio's hook), and
 * re-copies a chunk whose bytes differ from its record; a temp of another
 * identity is started again; a sparse SRC stays sparse; a SRC changing
 * mid-copy is R_CHANGED and leaves nothing; verify with a plan names the
 * bad chunk; the repair rewrites only it, in place, or falls back to a
 * full copy when DST is not what ferry put there. Oracles: the file
 * system (cmp, st_blocks, inode numbers) and xxHash itself.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "chunks.h"
#include "copy.h"
#include "fsio.h"
#include "queue.h"

#include <xxhash.h>

#define CS   (1u << 20)          /* the tests' chunk size */
#define SIZE (10u * CS + 12345u) /* 11 chunks, the last short */
#define NCH  ((SIZE + CS - 1) / CS)

struct fixture {
        char dir[PATH_MAX];
        int root, src, dst;
        atomic_bool stop;
        _Atomic uint64_t live;
        struct ferry_queue q;
        struct ferry_copy_cfg cfg;
        char *data; /* SRC's content */
};

static void fx_open(struct fixture *fx)
{
        unit_tmpdir(fx->dir, "chunks");
        fx->root = open(fx->dir, O_RDONLY | O_DIRECTORY);
        mkdirat(fx->root, "src", 0755);
        mkdirat(fx->root, "dst", 0755);
        fx->src = openat(fx->root, "src", O_RDONLY | O_DIRECTORY);
        fx->dst = openat(fx->root, "dst", O_RDONLY | O_DIRECTORY);
        atomic_init(&fx->stop, false);
        atomic_init(&fx->live, 0);
        CHECK_EQ(ferry_queue_init(&fx->q, 256), 0);
        fx->cfg = (struct ferry_copy_cfg){
                .srcfd = fx->src,
                .dstfd = fx->dst,
                .meta = {.perms = true, .times = true, .umask = 022},
                .retries = 1,
                .stop = &fx->stop,
                .bytes_live = &fx->live,
                .chunk_inbox = &fx->q,
        };
        ferry_dst_caps_all(&fx->cfg.meta.caps);
        fx->data = malloc(SIZE);
        unit_fill(fx->data, SIZE, 11);
        CHECK_EQ(unit_write_file(fx->src, "big", fx->data, SIZE), 0);
}

static int drain(struct fixture *fx, bool seen[NCH])
{
        void *m;
        int n = 0;
        while (ferry_queue_try_pop(&fx->q, &m) == FERRY_QUEUE_OK) {
                struct ferry_chunk_msg *cm = m;
                CHECK_EQ(cm->msg.kind, MSG_CHUNK);
                if (seen && cm->idx < NCH)
                        seen[cm->idx] = true;
                free(m);
                n++;
        }
        return n;
}

static void fx_close(struct fixture *fx)
{
        drain(fx, NULL);
        ferry_queue_release(&fx->q);
        free(fx->data);
        close(fx->src);
        close(fx->dst);
        close(fx->root);
        unit_rmtree(fx->dir);
}

static void xxh128(const void *data, size_t len, uint8_t out[16])
{
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits(data, len));
        memcpy(out, canon.digest, 16);
}

static struct ferry_chunk_plan *plan_of(struct ferry_batch *b,
                                        struct ferry_item *it)
{
        struct ferry_chunk_plan *p = ferry_item_plan(b, it);
        if (!p)
                abort();
        return p;
}

static size_t chunk_len(uint32_t i)
{
        return SIZE - (size_t)i * CS < CS ? SIZE - (size_t)i * CS : CS;
}

/* A batch of one row "big" (id 7) with a plan of NCH chunks, all to do. */
static struct ferry_batch *planned(struct fixture *fx, int work,
                                   struct ferry_item **itp)
{
        struct ferry_batch *b = ferry_batch_new(work, 1);
        struct ferry_item *it = &b->items[b->n++];
        memset(it, 0, sizeof(*it));
        it->id = 7;
        it->dir_id = 1;
        it->type = FT_REG;
        ferry_batch_str(b, "", 0, &it->dir_off);
        ferry_batch_str(b, "big", 3, &it->name_off);
        ferry_fsio_statat(fx->src, "big", &it->st);
        uint32_t off;
        size_t len = sizeof(struct ferry_chunk_plan) +
                     NCH * sizeof(struct ferry_chunk_rec);
        CHECK_EQ(ferry_batch_reserve(b, len, &off), 0);
        it = &b->items[0];
        it->plan_off = off;
        struct ferry_chunk_plan *p = plan_of(b, it);
        p->chunk_size = CS;
        p->n = NCH;
        *itp = it;
        return b;
}

static void run(struct fixture *fx, struct ferry_batch *b,
                struct ferry_item *it)
{
        struct ferry_copier *c = NULL;
        CHECK_EQ(ferry_copier_new(&fx->cfg, &c), 0);
        if (b->work & WORK_COPY)
                ferry_copier_copy(c, b, it);
        else
                ferry_copier_verify(c, b, it);
        ferry_copier_free(c);
}

static bool dst_is_src(struct fixture *fx)
{
        size_t len = 0;
        char *d = unit_read_file(fx->dst, "big", &len);
        bool same = d && len == SIZE && !memcmp(d, fx->data, SIZE);
        free(d);
        return same;
}

/* Every chunk CH_DONE with XXH3 of its range; the whole hash XXH3's. */
static void check_hashes(struct fixture *fx, struct ferry_batch *b,
                         struct ferry_item *it)
{
        struct ferry_chunk_plan *p = plan_of(b, it);
        uint8_t h[16];
        for (uint32_t i = 0; i < NCH; i++) {
                xxh128(fx->data + (size_t)i * CS, chunk_len(i), h);
                CHECK_EQ(p->chunks[i].state, CH_DONE);
                CHECK(!memcmp(p->chunks[i].hash, h, 16));
        }
        xxh128(fx->data, SIZE, h);
        CHECK(!memcmp(it->hash, h, 16));
}

static void copy_fresh(const char *streams)
{
        struct fixture fx;
        fx_open(&fx);
        setenv("FERRY_CHUNK_STREAMS", streams, 1);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_COPY, &it);
        run(&fx, b, it);
        CHECK_EQ(it->result, R_DONE);
        CHECK(dst_is_src(&fx));
        check_hashes(&fx, b, it);
        bool seen[NCH] = {false};
        CHECK_EQ(drain(&fx, seen), (int)NCH);
        for (uint32_t i = 0; i < NCH; i++)
                CHECK(seen[i]);
        CHECK_EQ(atomic_load(&fx.live), (uint64_t)SIZE);
        CHECK_EQ(it->bytes, (uint64_t)SIZE);
        struct stat d;
        CHECK_EQ(fstatat(fx.dst, "big", &d, 0), 0);
        CHECK_EQ((uint64_t)d.st_size, (uint64_t)SIZE);
        CHECK_EQ(d.st_mtim.tv_sec, (time_t)it->st.mtime.sec);
        ferry_batch_free(b);
        unsetenv("FERRY_CHUNK_STREAMS");
        fx_close(&fx);
}

static void test_copy_one_stream(void)
{
        copy_fresh("1");
}

static void test_copy_streams(void)
{
        copy_fresh("4");
}

/* SRC's bytes read by pread (the hook), told by SRC's inode. */
static _Atomic uint64_t src_read;
static ino_t src_ino;
static void count_src(int fd, size_t len, off_t off)
{
        (void)off;
        struct stat s;
        if (!fstat(fd, &s) && s.st_ino == src_ino)
                atomic_fetch_add(&src_read, len);
}

/* Plants the temp of row 7 with the chunks of mask (bit i: chunk i) of
 * SRC's content (bad: one of them with a byte changed) and zeros
 * elsewhere; the plan says those are done, with their true hashes. */
static void plant(struct fixture *fx, struct ferry_batch *b,
                  struct ferry_item *it, uint32_t mask, int bad)
{
        char *t = calloc(1, SIZE);
        for (uint32_t i = 0; i < NCH; i++)
                if (mask >> i & 1)
                        memcpy(t + (size_t)i * CS, fx->data + (size_t)i * CS,
                               chunk_len(i));
        if (bad >= 0)
                t[(size_t)bad * CS + 100] ^= 0x5a;
        CHECK_EQ(unit_write_file(fx->dst, ".big.7.ferry-part", t, SIZE), 0);
        free(t);
        struct stat s;
        CHECK_EQ(fstatat(fx->dst, ".big.7.ferry-part", &s, 0), 0);
        struct ferry_chunk_plan *p = plan_of(b, it);
        p->resume = true;
        p->tmp_dev = (uint64_t)s.st_dev;
        p->tmp_ino = (uint64_t)s.st_ino;
        for (uint32_t i = 0; i < NCH; i++) {
                if (!(mask >> i & 1))
                        continue;
                p->chunks[i].state = CH_DONE;
                xxh128(fx->data + (size_t)i * CS, chunk_len(i),
                       p->chunks[i].hash);
        }
}

#ifndef FERRY_TESTING
/* a build without fsio's test hooks (the fuzz build only compiles this
 * file): the tests that count or change SRC's reads skip */
static void (*ferry_fsio_pread_hook)(int fd, size_t len, off_t off);
#endif

/* SRC's bytes read when the temp holds the chunks of mask (bad: one of
 * them damaged; wrong_ino: the temp is not the recorded one), with
 * streams (NULL: one, the owner's) streams. */
static uint64_t resume_reads(uint32_t mask, int bad, bool wrong_ino,
                             const char *streams)
{
        struct fixture fx;
        fx_open(&fx);
        if (streams)
                setenv("FERRY_CHUNK_STREAMS", streams, 1);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_COPY, &it);
        plant(&fx, b, it, mask, bad);
        if (wrong_ino)
                plan_of(b, it)->tmp_ino++;
        struct stat s;
        fstatat(fx.src, "big", &s, 0);
        src_ino = s.st_ino;
        atomic_store(&src_read, 0);
        ferry_fsio_pread_hook = count_src;
        run(&fx, b, it);
        ferry_fsio_pread_hook = NULL;
        CHECK_EQ(it->result, R_DONE);
        CHECK(dst_is_src(&fx));
        check_hashes(&fx, b, it);
        uint64_t got = atomic_load(&src_read);
        ferry_batch_free(b);
        unsetenv("FERRY_CHUNK_STREAMS");
        fx_close(&fx);
        return got;
}

/* Chunks i..k-1 of the file (mask bits). */
#define CHUNKS(i, k) ((((uint32_t)1 << (k)) - 1) & ~(((uint32_t)1 << (i)) - 1))

static void test_resume_keeps_done_chunks(void)
{
        /* 6 chunks done: only the other 5 are read from SRC */
        CHECK_EQ(resume_reads(CHUNKS(0, 6), -1, false, NULL),
                 (uint64_t)SIZE - 6u * CS);
        /* chunk 2 of the temp is not what was recorded: read again */
        CHECK_EQ(resume_reads(CHUNKS(0, 6), 2, false, NULL),
                 (uint64_t)SIZE - 5u * CS);
        /* another temp than the recorded one: all of it again */
        CHECK_EQ(resume_reads(CHUNKS(0, 6), -1, true, NULL), (uint64_t)SIZE);
}

/* The same with 4 streams (copy_blocks.c): the chunks done are scattered
 * after the first one copied (the owner's, alone), and they end the file;
 * the fold reads them back as it reaches them. */
static void test_resume_blocks(void)
{
        uint32_t scattered = 1u << 3 | 1u << 4 | 1u << 7, tail = CHUNKS(8, 11);
        CHECK_EQ(resume_reads(scattered, -1, false, "4"),
                 (uint64_t)SIZE - 3u * CS);
        /* chunk 4 not what was recorded: copied again, by the fold */
        CHECK_EQ(resume_reads(scattered, 4, false, "4"),
                 (uint64_t)SIZE - 2u * CS);
        CHECK_EQ(resume_reads(tail, -1, false, "4"),
                 (uint64_t)SIZE - 2u * CS - chunk_len(10));
        CHECK_EQ(resume_reads(tail | scattered, 9, false, "4"),
                 (uint64_t)SIZE - 4u * CS - chunk_len(10));
}

static void test_sparse_stays_sparse(void)
{
        struct fixture fx;
        fx_open(&fx);
        unlinkat(fx.src, "big", 0);
        memset(fx.data, 0, SIZE);
        unit_fill(fx.data + CS / 2, CS, 3);
        unit_fill(fx.data + 8u * CS, 4096, 4);
        int fd = openat(fx.src, "big", O_WRONLY | O_CREAT, 0644);
        CHECK(pwrite(fd, fx.data + CS / 2, CS, CS / 2) == (ssize_t)CS);
        CHECK(pwrite(fd, fx.data + 8u * CS, 4096, 8u * CS) == 4096);
        CHECK_EQ(ftruncate(fd, SIZE), 0);
        close(fd);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_COPY, &it);
        run(&fx, b, it);
        CHECK_EQ(it->result, R_DONE);
        CHECK(dst_is_src(&fx));
        check_hashes(&fx, b, it);
        struct stat d;
        CHECK_EQ(fstatat(fx.dst, "big", &d, 0), 0);
        CHECK_EQ((uint64_t)d.st_size, (uint64_t)SIZE);
        CHECK((uint64_t)d.st_blocks * 512 < 4u * CS); /* not dense */
        ferry_batch_free(b);
        fx_close(&fx);
}

/* The hook rewrites SRC at its third pread of SRC. */
static int change_dir = -1;
static _Atomic int src_preads;
static void change_src(int fd, size_t len, off_t off)
{
        (void)len;
        (void)off;
        struct stat s;
        if (fstat(fd, &s) || s.st_ino != src_ino ||
            atomic_fetch_add(&src_preads, 1) != 2)
                return;
        int w = openat(change_dir, "big", O_WRONLY);
        CHECK(w >= 0);
        CHECK(pwrite(w, "changed", 7, 5u * CS) == 7);
        close(w);
}

static void test_changed_mid_copy(void)
{
        struct fixture fx;
        fx_open(&fx);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_COPY, &it);
        struct stat s;
        fstatat(fx.src, "big", &s, 0);
        src_ino = s.st_ino;
        change_dir = fx.src;
        atomic_store(&src_preads, 0);
        fx.cfg.retries = 0;
        ferry_fsio_pread_hook = change_src;
        run(&fx, b, it);
        ferry_fsio_pread_hook = NULL;
        CHECK_EQ(it->result, R_CHANGED);
        CHECK(faccessat(fx.dst, "big", F_OK, AT_SYMLINK_NOFOLLOW) != 0);
        CHECK(faccessat(fx.dst, ".big.7.ferry-part", F_OK,
                        AT_SYMLINK_NOFOLLOW) != 0);
        struct ferry_chunk_plan *p = plan_of(b, it);
        for (uint32_t i = 0; i < NCH; i++)
                CHECK_EQ(p->chunks[i].state, CH_TODO);
        ferry_batch_free(b);
        fx_close(&fx);
}

/* Copies "big" (a done file), then changes one byte of DST's chunk 3
 * under the same mtime (as bit rot would); returns DST's inode. */
static ino_t done_then_rot(struct fixture *fx)
{
        struct ferry_item *it;
        struct ferry_batch *b = planned(fx, WORK_COPY, &it);
        run(fx, b, it);
        CHECK_EQ(it->result, R_DONE);
        ferry_batch_free(b);
        drain(fx, NULL);
        struct stat d;
        CHECK_EQ(fstatat(fx->dst, "big", &d, 0), 0);
        int fd = openat(fx->dst, "big", O_WRONLY);
        char x = (char)(fx->data[3u * CS + 77] ^ 1);
        CHECK(pwrite(fd, &x, 1, 3u * CS + 77) == 1);
        struct timespec ts[2] = {d.st_atim, d.st_mtim};
        futimens(fd, ts);
        close(fd);
        return d.st_ino;
}

/* A plan as the manifest gives it for a done file: every chunk CH_DONE
 * with SRC's hashes (the ones the copy recorded). */
static void plan_done(struct fixture *fx, struct ferry_batch *b,
                      struct ferry_item *it)
{
        struct ferry_chunk_plan *p = plan_of(b, it);
        for (uint32_t i = 0; i < NCH; i++) {
                p->chunks[i].state = CH_DONE;
                xxh128(fx->data + (size_t)i * CS, chunk_len(i),
                       p->chunks[i].hash);
        }
}

static void test_verify_names_the_chunk(void)
{
        struct fixture fx;
        fx_open(&fx);
        done_then_rot(&fx);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_VERIFY_DST, &it);
        plan_done(&fx, b, it);
        xxh128(fx.data, SIZE, it->hash);
        run(&fx, b, it);
        CHECK_EQ(it->result, R_MISMATCH);
        struct ferry_chunk_plan *p = plan_of(b, it);
        for (uint32_t i = 0; i < NCH; i++)
                CHECK_EQ(p->chunks[i].state, i == 3 ? CH_BAD : CH_DONE);
        ferry_batch_free(b);
        fx_close(&fx);
}

/* The repair of chunk 3; rec_mtime_off shifts the record's mtime (DST
 * then is not what ferry put there). */
static void repair(bool ours)
{
        struct fixture fx;
        fx_open(&fx);
        ino_t ino = done_then_rot(&fx);
        struct ferry_item *it;
        struct ferry_batch *b = planned(&fx, WORK_COPY, &it);
        plan_done(&fx, b, it);
        struct ferry_chunk_plan *p = plan_of(b, it);
        p->repair = true;
        p->chunks[3].state = CH_BAD;
        struct stat d;
        CHECK_EQ(fstatat(fx.dst, "big", &d, 0), 0);
        it->dst = (struct ferry_dst_rec){
                FT_REG,
                (uint64_t)d.st_size,
                {d.st_mtim.tv_sec, (uint32_t)d.st_mtim.tv_nsec}};
        if (!ours)
                it->dst.size++; /* not the size ferry left */
        atomic_store(&fx.live, 0);
        run(&fx, b, it);
        CHECK_EQ(it->result, R_DONE);
        CHECK(dst_is_src(&fx));
        check_hashes(&fx, b, it);
        CHECK_EQ(fstatat(fx.dst, "big", &d, 0), 0);
        CHECK_EQ(d.st_mtim.tv_sec, (time_t)it->st.mtime.sec);
        CHECK_EQ(d.st_mtim.tv_nsec, (long)it->st.mtime.nsec);
        if (ours) { /* in place, one chunk written, no message */
                CHECK_EQ(d.st_ino, ino);
                CHECK_EQ(atomic_load(&fx.live), (uint64_t)CS);
                CHECK_EQ(it->bytes, (uint64_t)CS);
                CHECK_EQ(drain(&fx, NULL), 0);
        } else { /* a full copy, renamed into place */
                CHECK(d.st_ino != ino);
                CHECK_EQ(atomic_load(&fx.live), (uint64_t)SIZE);
                CHECK_EQ(it->bytes, (uint64_t)SIZE);
                CHECK_EQ(drain(&fx, NULL), (int)NCH);
        }
        ferry_batch_free(b);
        fx_close(&fx);
}

static void test_repair_in_place(void)
{
        repair(true);
}

static void test_repair_falls_back(void)
{
        repair(false);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
#ifndef FERRY_TESTING
        fprintf(stderr, "SKIP (built without FERRY_TESTING: no fsio hooks, "
                        "no FERRY_CHUNK_STREAMS)\n");
        atomic_fetch_add(&unit_skipped, 1);
        return unit_done();
#endif
        RUN(test_copy_one_stream);
        RUN(test_copy_streams);
        RUN(test_resume_keeps_done_chunks);
        RUN(test_resume_blocks);
        RUN(test_sparse_stays_sparse);
        RUN(test_changed_mid_copy);
        RUN(test_verify_names_the_chunk);
        RUN(test_repair_in_place);
        RUN(test_repair_falls_back);
        return unit_done();
}
