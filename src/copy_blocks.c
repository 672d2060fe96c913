/*
 * copy_blocks.c - the streams of a large file copied block by block, and
 * the whole-file hash folded from the bytes they read, never read back
 * (copy_chunks_impl.h; why streams at all: copy_chunks.c).
 *
 * The streams claim blocks of BLOCK bytes in file order (a chunk done in
 * an earlier run is skipped), so that the blocks in flight are always a
 * short run of the file: each stream preads its block from SRC and
 * pwrites it into the temp, then parks it. Whoever parks the block the
 * fold waits for folds it, and every parked block after it, into the
 * chunk's hash and the whole-file hash, in file order, and gives their
 * buffers back (one folder at a time; the others go on copying). A stream
 * that finds no free buffer waits: the blocks in flight are bounded by
 * the pool (two buffers a stream), and the block the fold waits for is
 * always in some stream's hands. When the fold passes a chunk's end,
 * SRC's fstat must still be the scan's (rule 5: every byte of the chunk
 * was read before it), SRC's cached pages of the chunk are let go, and
 * the chunk is recorded as chunk_copy records one: hash, CH_DONE, written
 * back and made durable (chunk_sync).
 *
 * A chunk of an earlier run is read back from the temp by the folder when
 * the fold reaches it, and its hash compared with its record; one that
 * differs is copied again by the folder, from SRC (chunk_copy).
 *
 * Cost against copy_chunks.c's helpers (bench big1m, one 4 GiB file
 * through slowfs at 1 ms, 8 streams): they hashed each helper chunk from
 * SRC's bytes and then read it back from the temp for the whole-file
 * hash, hashing it twice more, so that 7/8 of the file was copied out of
 * DST's page cache and hashed three times; here each byte is hashed twice
 * (chunk, whole) from the buffer it arrived in.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copy_chunks_impl.h"

#include "fsio.h"
#include "ratelimit.h"
#include "thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* A block: what a stream reads and writes at once (FUSE asks the server
 * for up to 256 KiB a request; two requests each). */
#define BLOCK (512u << 10)
/* Buffers a stream has in the pool. */
#define BUFS_PER_STREAM 2

struct parked {
        uint64_t off;
        size_t len;
        char *buf;
};

/* Block mode's shared state; under j->lock but where said. */
struct blocks {
        struct job *j;
        uint64_t size;
        uint64_t claim; /* the next byte to claim */
        /* the next byte to fold; the folder's alone while folding (as are
         * cx, whole and rs) */
        uint64_t fold;
        bool folding;
        XXH3_state_t *cx, *whole; /* the chunk's hash, the file's */
        struct stream rs;         /* the folder's reads of the temp */
        struct parked *park;
        size_t nparked;
        char **free;
        size_t nfree, nbufs;
        char *pool;
};

/* Under lock: the next block to copy ([*off, *off + *len)), its chunk
 * made CS_BUSY when it is the chunk's first; false when none is left. */
static bool claim(struct blocks *b, uint64_t *off, size_t *len)
{
        struct job *j = b->j;
        uint64_t cs = j->plan->chunk_size;
        while (b->claim < b->size) {
                uint32_t i = (uint32_t)(b->claim / cs);
                uint64_t end = (uint64_t)(i + 1) * cs;
                end = end < b->size ? end : b->size;
                if (j->state[i] == CS_DONE) { /* an earlier run's */
                        b->claim = end;
                        continue;
                }
                j->state[i] = CS_BUSY;
                *off = b->claim;
                *len = end - *off < BLOCK ? (size_t)(end - *off) : BLOCK;
                b->claim += *len;
                return true;
        }
        return false;
}

/* Copies [off, off + len) of SRC into the temp through buf. */
static int copy_block(struct job *j, struct stream *s, char *buf, uint64_t off,
                      size_t len, bool *changed, const struct step **step)
{
        size_t got = 0;
        *step = &S_READ_SRC;
        uint64_t t0 = chunk_now_ns();
        int rc = ferry_fsio_pread(s->in, buf, len, (off_t)off, &got);
        s->read_ns += chunk_now_ns() - t0;
        s->read_bytes += got;
        if (rc)
                return rc;
        if (got < len) { /* shrank: not the scan's file */
                *changed = true;
                return 0;
        }
        ferry_fsio_uncache(s->in, (off_t)off, got);
        *step = &S_COPY; /* --bwlimit, the pause: stopped meanwhile */
        if ((rc = ferry_rate_take(j->c->cfg.rate, got, j->c->cfg.stop)))
                return rc;
        if (ferry_copier_fenced(&j->c->cfg)) /* waited past it */
                return ECANCELED;
        *step = &S_WRITE;
        if ((rc = ferry_fsio_pwrite(j->out, buf, got, (off_t)off)))
                return rc;
        ferry_copier_count(j->c, got);
        atomic_fetch_add_explicit(&j->written, got, memory_order_relaxed);
        if (atomic_load(j->c->cfg.stop) || ferry_copier_fenced(&j->c->cfg)) {
                *step = &S_COPY;
                return ECANCELED;
        }
        return 0;
}

/* The fold reached the end of chunk i, copied in blocks: SRC unchanged
 * since (every block of it was read), then its record, as chunk_copy's. */
static int chunk_folded(struct blocks *b, uint32_t i, bool *changed,
                        const struct step **step)
{
        struct job *j = b->j;
        struct ferry_stat now;
        *step = &S_STAT_SRC;
        int rc = ferry_fsio_fstat(j->in, &now);
        if (rc || !ferry_copier_same_source(&now, &j->it->st)) {
                *changed = !rc;
                return rc;
        }
        off_t off;
        uint64_t len;
        chunk_range(j, i, &off, &len);
        if (!j->c->cfg.no_sync) /* advice: see chunk_copy */
                sync_file_range(j->out, off, (off_t)len, SYNC_FILE_RANGE_WRITE);
        chunk_uncache(j, j->in, i);
        pthread_mutex_lock(&j->lock);
        chunk_digest(b->cx, j->plan->chunks[i].hash);
        j->plan->chunks[i].state = CH_DONE;
        j->state[i] = CS_DONE;
        j->unsynced[i] = 1;
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->lock);
        return 0;
}

/* The fold is at the start of chunk i, done by an earlier run: read back
 * from the temp into the whole-file hash; copied again from SRC when it
 * is not what was recorded (its state stays CS_DONE meanwhile, so that no
 * stream claims it). */
static int fold_earlier(struct blocks *b, uint32_t i, bool *changed,
                        const struct step **step)
{
        struct job *j = b->j;
        XXH3_state_t *saved = b->cx; /* free here: the chunk is not begun */
        XXH3_copyState(saved, b->whole);
        bool ok = false;
        *step = &S_VERIFY_DST;
        int rc = chunk_read_back(j, &b->rs, i, b->whole, &ok);
        if (rc || ok)
                return rc;
        XXH3_copyState(b->whole, saved);
        pthread_mutex_lock(&j->lock);
        j->plan->chunks[i].state = CH_TODO;
        pthread_mutex_unlock(&j->lock);
        return chunk_copy(j, &b->rs, i, b->whole, changed, step);
}

/* Under lock, the parked block at off, taken out of the park; NULL. */
static struct parked take_parked(struct blocks *b, uint64_t off)
{
        for (size_t k = 0; k < b->nparked; k++)
                if (b->park[k].off == off) {
                        struct parked p = b->park[k];
                        b->park[k] = b->park[--b->nparked];
                        return p;
                }
        return (struct parked){0, 0, NULL};
}

/* Under lock: folds what can be folded now, unless another stream is
 * folding (it sees what was parked meanwhile); returns with the lock
 * held; *done: a chunk was completed (to be made durable: chunk_sync,
 * out of the fold, so that the others go on folding meanwhile). 0 or the
 * first failure (the caller records it). */
static int fold_some(struct blocks *b, bool *done, bool *changed,
                     const struct step **step)
{
        struct job *j = b->j;
        uint64_t cs = j->plan->chunk_size;
        if (b->folding)
                return 0;
        b->folding = true;
        int rc = 0;
        while (!rc && !*changed && !j->failed && b->fold < b->size) {
                uint32_t i = (uint32_t)(b->fold / cs);
                bool start = b->fold % cs == 0;
                struct parked p = {0, 0, NULL};
                if (!(start && j->state[i] == CS_DONE) &&
                    !(p = take_parked(b, b->fold)).buf)
                        break; /* its block is still being copied */
                pthread_mutex_unlock(&j->lock);
                uint64_t end = (uint64_t)(i + 1) * cs;
                end = end < b->size ? end : b->size;
                if (!p.buf) {
                        rc = fold_earlier(b, i, changed, step);
                        b->fold = end;
                } else {
                        if (start)
                                XXH3_128bits_reset(b->cx);
                        XXH3_128bits_update(b->cx, p.buf, p.len);
                        XXH3_128bits_update(b->whole, p.buf, p.len);
                        b->fold += p.len;
                        if (b->fold == end) {
                                rc = chunk_folded(b, i, changed, step);
                                *done = true;
                        }
                }
                pthread_mutex_lock(&j->lock);
                if (p.buf) { /* its buffer back: a stream may wait for it */
                        b->free[b->nfree++] = p.buf;
                        pthread_cond_broadcast(&j->cond);
                }
        }
        b->folding = false;
        return rc;
}

/* One stream's loop: claims, copies and parks blocks until none is left
 * or a stream failed (it says why). */
static int stream_blocks(struct blocks *b, struct stream *s, bool *changed,
                         const struct step **step)
{
        struct job *j = b->j;
        int rc = 0;
        pthread_mutex_lock(&j->lock);
        for (;;) {
                while (!j->failed && !b->nfree && b->claim < b->size)
                        pthread_cond_wait(&j->cond, &j->lock);
                uint64_t off;
                size_t len;
                if (j->failed || !claim(b, &off, &len))
                        break;
                char *buf = b->free[--b->nfree];
                pthread_mutex_unlock(&j->lock);
                rc = copy_block(j, s, buf, off, len, changed, step);
                pthread_mutex_lock(&j->lock);
                if (rc || *changed) {
                        b->free[b->nfree++] = buf;
                        break;
                }
                b->park[b->nparked++] = (struct parked){off, len, buf};
                bool done = false;
                if ((rc = fold_some(b, &done, changed, step)) || *changed)
                        break;
                if (done) {
                        pthread_mutex_unlock(&j->lock);
                        *step = &S_FSYNC;
                        rc = chunk_sync(j, false);
                        pthread_mutex_lock(&j->lock);
                        if (rc)
                                break;
                }
        }
        pthread_mutex_unlock(&j->lock);
        return rc;
}

struct helper {
        struct blocks *b;
        struct stream s;
        pthread_t thread;
};

static void *helper_main(void *arg)
{
        ferry_thread_quiet();
        struct helper *h = arg;
        bool changed = false;
        const struct step *step = &S_COPY;
        int rc = stream_blocks(h->b, &h->s, &changed, &step);
        if (rc || changed)
                chunk_fail(h->b->j, rc, changed, step);
        return NULL;
}

/* The pool: BUFS_PER_STREAM buffers for each of n streams, and the
 * folder's read buffer. */
static int blocks_init(struct blocks *b, struct job *j, unsigned n)
{
        *b = (struct blocks){.j = j, .size = j->it->st.size};
        b->claim = b->fold = (uint64_t)j->fold * j->plan->chunk_size;
        b->whole = j->c->xxh;
        b->nbufs = (size_t)n * BUFS_PER_STREAM;
        b->pool = malloc((b->nbufs + 1) * (size_t)BLOCK);
        b->park = calloc(b->nbufs, sizeof(*b->park));
        b->free = calloc(b->nbufs, sizeof(*b->free));
        b->cx = XXH3_createState();
        b->rs = (struct stream){j, j->in, NULL, BLOCK, XXH3_createState(),
                                0, 0,     0};
        if (!b->pool || !b->park || !b->free || !b->cx || !b->rs.xxh)
                return ENOMEM;
        for (size_t k = 0; k < b->nbufs; k++)
                b->free[b->nfree++] = b->pool + k * (size_t)BLOCK;
        b->rs.buf = b->pool + b->nbufs * (size_t)BLOCK;
        return 0;
}

static void blocks_free(struct blocks *b)
{
        free(b->pool);
        free(b->park);
        free(b->free);
        if (b->cx)
                XXH3_freeState(b->cx);
        if (b->rs.xxh)
                XXH3_freeState(b->rs.xxh);
}

int chunk_blocks(struct job *j, struct stream *s, unsigned helpers,
                 bool *changed, const struct step **step)
{
        struct blocks b;
        struct helper h[FERRY_CHUNK_STREAMS];
        unsigned nh = 0;
        helpers = helpers < FERRY_CHUNK_STREAMS ? helpers
                                                : FERRY_CHUNK_STREAMS - 1;
        int rc = blocks_init(&b, j, helpers + 1);
        for (; !rc && nh < helpers; nh++) {
                h[nh] = (struct helper){
                        &b,
                        {j, chunk_own_src(j->in), NULL, BLOCK, NULL, 0, 0, 0},
                        0};
                if (pthread_create(&h[nh].thread, NULL, helper_main, &h[nh])) {
                        if (h[nh].s.in != j->in)
                                ferry_fsio_close(&h[nh].s.in);
                        break;
                }
        }
        if (!rc)
                rc = stream_blocks(&b, s, changed, step);
        if (rc || *changed)
                chunk_fail(j, rc, *changed, *step);
        for (unsigned k = 0; k < nh; k++) {
                pthread_join(h[k].thread, NULL);
                if (h[k].s.in != j->in)
                        ferry_fsio_close(&h[k].s.in);
        }
        /* the chunks of earlier runs at the end, when no block came after
         * the last one folded */
        if (!rc && !*changed && !j->failed) {
                bool done = false;
                pthread_mutex_lock(&j->lock);
                rc = fold_some(&b, &done, changed, step);
                pthread_mutex_unlock(&j->lock);
                if (!rc && !*changed && b.fold < b.size)
                        rc = EIO; /* a block never folded: not expected */
                if (rc || *changed)
                        chunk_fail(j, rc, *changed, *step);
        }
        if (!j->failed)
                j->fold = j->plan->n;
        blocks_free(&b);
        return rc;
}
