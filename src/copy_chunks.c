/*
 * copy_chunks.c - a large file copied in chunks (chunks.h, copier.h).
 *
 * Owns the temp file of a planned file (made with O_EXCL, or reopened by
 * name without O_CREAT when the plan resumes one, and then trusted only
 * when its device, inode and size are the recorded ones; another host's,
 * found by inode and size, is copied into a new inode: adopt_temp), made
 * its full
 * size at once (ftruncate: a sparse source's holes stay holes), the check
 * that DST has room for it (fstatvfs: a full DST is R_NOSPACE before a
 * byte is copied), the streams that copy chunks at once, and the
 * whole-file hash. No preallocation (fallocate mode 0): on the bench
 * machine's ext4 writing 2 GiB into fallocated blocks took 2.3-2.6 x as
 * long as into a plain file (dd, 2 runs each: 12.5 / 5.3 s, 8.6 / 3.4 s:
 * the unwritten extents are converted at writeback), which would have
 * made a local copy slower than cp; the early ENOSPC it was for is the
 * room check's.
 *
 * Streams: the worker that owns the file (the owner) copies it alone
 * first; when its reads show SRC latency-bound (a share with round trips:
 * latency_bound), it enlists up to FERRY_CHUNK_STREAMS - 1 helper
 * threads, as many as the process-wide budget of streams has free
 * (FERRY_CHUNK_STREAMS in all, whatever the number of big files in
 * flight). The streams copy the rest block by block in file order
 * (copy_blocks.c: the whole-file hash folded from the blocks as they
 * arrive, two buffers of 512 KiB a stream, the owner's stream counted in
 * the budget too; with no helper to be had the owner goes on alone); a
 * sparse SRC, whose holes are found a chunk at a time, or a file that
 * finds the budget all but spent, is copied a chunk per stream instead
 * (below: each helper with a buffer of STREAM_BUF bytes, the owner with
 * its copier's own 128 KiB one). Each stream claims the lowest chunk
 * nobody copies, preads it from SRC,
 * pwrites it into the temp, hashes it (XXH3-128); what the streams wrote
 * is made durable (one fdatasync at most every tenth of a second, unless
 * --durability=none) and then reported (MSG_CHUNK). SRC's
 * fstat before and after each chunk must be the scan's (rule 5): any
 * change stops the file (R_CHANGED) and removes the temp.
 *
 * The whole-file XXH3-128 is computed in file order by the owner: a chunk
 * it copies when every chunk before it is folded in already is hashed
 * from SRC's bytes as they stream; any other chunk (copied by a sparse
 * file's helper, out of order, or by an earlier run) is read back from
 * the temp file once it is durable, and its chunk hash compared with the
 * one recorded: a chunk that differs is copied again from SRC. Cost: with
 * one stream or in blocks, nothing but an earlier run's chunks; a sparse
 * file with k streams reads about (k - 1) / k of its data back from DST
 * (mostly from the page cache, as it was just written). Never a byte
 * more from SRC.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copy_chunks_impl.h"

#include "fsio.h"
#include "queue.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The buffer of one chunk stream. */
#define STREAM_BUF (1u << 20)

static atomic_uint streams_used;

/* Takes up to want stream buffers from the budget; how many it got. */
static unsigned streams_take(unsigned want)
{
        unsigned got = 0;
        while (got < want) {
                unsigned n = atomic_load(&streams_used);
                if (n >= FERRY_CHUNK_STREAMS)
                        break;
                if (atomic_compare_exchange_weak(&streams_used, &n, n + 1))
                        got++;
        }
        return got;
}

static void streams_give(unsigned n)
{
        atomic_fetch_sub(&streams_used, n);
}

/* How many streams a file gets at most (the owner included):
 * FERRY_CHUNK_STREAMS, or in test builds FERRY_CHUNK_STREAMS in the
 * environment (1 to 8), for the bench's comparisons. */
static unsigned streams_per_file(void)
{
#ifdef FERRY_TESTING
        const char *e = getenv("FERRY_CHUNK_STREAMS");
        long v = e ? strtol(e, NULL, 10) : 0;
        if (v >= 1 && v <= FERRY_CHUNK_STREAMS)
                return (unsigned)v;
#endif
        return FERRY_CHUNK_STREAMS;
}

/* The owner's part: in file order, folds each chunk into whole: copies
 * it (from SRC's bytes) when it is free, reads it back when it is done
 * (and copies it again when that differs from its record), else copies
 * any free chunk, or waits for the helper that has it. */
static int owner_loop(struct job *j, struct stream *s, XXH3_state_t *whole,
                      XXH3_state_t *saved, bool probe, bool *changed,
                      const struct step **step)
{
        uint32_t n = j->plan->n;
        uint32_t fold = j->fold;
        /* probe: until the first chunk read from SRC */
        for (; fold < n && !(probe && s->read_bytes); j->fold = fold) {
                uint32_t mine = n;
                bool back = false;
                pthread_mutex_lock(&j->lock);
                while (!j->failed) {
                        if (j->state[fold] == CS_FREE) {
                                j->state[fold] = CS_BUSY;
                                mine = fold;
                                break;
                        }
                        if ((back = j->state[fold] == CS_DONE))
                                break;
                        if ((mine = chunk_claim(j, fold + 1)) < n)
                                break;
                        pthread_cond_wait(&j->cond, &j->lock);
                }
                bool failed = j->failed;
                pthread_mutex_unlock(&j->lock);
                if (failed)
                        return 0; /* the stream that failed says why */
                if (back) {
                        bool ok = false;
                        XXH3_copyState(saved, whole);
                        *step = &S_VERIFY_DST;
                        int rc = chunk_read_back(j, s, fold, whole, &ok);
                        if (rc)
                                return rc;
                        if (ok) {
                                fold++;
                                continue;
                        }
                        /* not what was recorded: copied again, from SRC */
                        XXH3_copyState(whole, saved);
                        pthread_mutex_lock(&j->lock);
                        j->state[fold] = CS_BUSY;
                        j->plan->chunks[fold].state = CH_TODO;
                        pthread_mutex_unlock(&j->lock);
                        mine = fold;
                }
                int rc = chunk_copy(j, s, mine, mine == fold ? whole : NULL,
                                    changed, step);
                if (rc || *changed)
                        return rc;
                fold += mine == fold;
        }
        return 0;
}

/* Makes the temp file anew (O_EXCL; one left by name is replaced), of
 * the file's size (a sparse source's holes kept), and its name durable;
 * the plan resumes it from then on. */
static int new_temp(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                    const struct ferry_item *it, const char *tmp, bool sparse,
                    uint64_t room, int *out, const struct step **step)
{
        struct ferry_stat t;
        *step = &S_CREATE;
        int rc = ferry_copier_create_temp_as(c, tmp, O_RDWR, out);
        if (!rc)
                rc = ferry_fsio_fstat(*out, &t);
        if (rc)
                return rc;
        /* a DST too full for it fails now, clearly (R_NOSPACE), not
         * after hours of copying; no fallocate (see the head comment) */
        *step = &S_WRITE;
        if (!sparse)
                rc = ferry_fsio_room(*out, room);
        if (!rc) /* the size exact, a sparse file's holes kept */
                rc = ferry_fsio_ftruncate(*out, (off_t)it->st.size);
        *step = &S_FSYNC;
        if (!rc && !c->cfg.no_sync)
                rc = ferry_fsio_fsync(c->dst_dir);
        if (rc)
                return rc;
        /* a retry in this run resumes it too */
        plan->resume = true;
        plan->tmp_any_dev = false;
        plan->tmp_dev = t.dev;
        plan->tmp_ino = t.ino;
        return 0;
}

/* The bytes of chunk i of a file of size bytes: its offset, its end. */
static void chunk_span(const struct ferry_chunk_plan *plan, uint64_t size,
                       uint32_t i, uint64_t *off, uint64_t *end)
{
        *off = (uint64_t)i * plan->chunk_size;
        *end = *off + plan->chunk_size > size ? size : *off + plan->chunk_size;
}

/* Another host's temp file (plan->tmp_any_dev), open as old: its done
 * chunks are copied into a new temp of this copy's own under the same
 * name, and the old inode let go. That host, cut off past its lease but
 * alive, may still write a last block into the temp it holds open: it
 * never reaches the file this copy installs. Each chunk copied is
 * punched out of the old inode, so DST needs room for the new file less
 * what the old one held, as a resume in place would. A chunk the old
 * temp cannot give is copied from SRC instead, and each one kept is read
 * back against its recorded hash later, as any chunk of an earlier run. */
static int adopt_temp(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                      const struct ferry_item *it, const char *tmp, bool sparse,
                      int old, int *out, const struct step **step)
{
        uint64_t held = 0, off, end;
        for (uint32_t i = 0; i < plan->n; i++)
                if (plan->chunks[i].state == CH_DONE) {
                        chunk_span(plan, it->st.size, i, &off, &end);
                        held += end - off;
                }
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        int rc = new_temp(c, plan, it, tmp, sparse, it->st.size - held, out,
                          step);
        for (uint32_t i = 0; !rc && i < plan->n; i++) {
                if (plan->chunks[i].state != CH_DONE)
                        continue;
                chunk_span(plan, it->st.size, i, &off, &end);
                uint64_t start = off;
                while (off < end && !rc) {
                        size_t want = end - off < c->buf_size
                                              ? (size_t)(end - off)
                                              : c->buf_size,
                               got = 0;
                        if (ferry_fsio_pread(old, c->buf, want, (off_t)off,
                                             &got) ||
                            got == 0) {
                                plan->chunks[i].state = CH_TODO; /* SRC's */
                                break;
                        }
                        *step = &S_WRITE;
                        rc = ferry_fsio_pwrite(*out, c->buf, got, (off_t)off);
                        off += got;
                        if (!rc && (atomic_load(c->cfg.stop) ||
                                    ferry_copier_fenced(&c->cfg))) {
                                *step = &S_COPY;
                                rc = ECANCELED;
                        }
                }
                /* (where holes cannot be punched, the old inode's room
                 * comes back when it is let go) */
                if (!rc)
                        (void)ferry_fsio_punch_hole(old, (off_t)start,
                                                    (off_t)(end - start));
        }
        return rc;
}

/* Opens the temp of an earlier attempt or run when it is the recorded
 * one; another host's is copied into one of this copy's own (adopt_temp:
 * *adopted); else makes it anew (all chunks to do), and its name made
 * durable. */
static int open_temp(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                     const struct ferry_item *it, const char *tmp, bool sparse,
                     int *out, bool *adopted, const struct step **step)
{
        struct ferry_stat t;
        *step = &S_CREATE;
        *adopted = false;
        if (plan->resume) {
                int rc = ferry_fsio_openat(c->dst_dir, tmp, O_RDWR | O_NOFOLLOW,
                                           0, out);
                if (!rc && !(rc = ferry_fsio_fstat(*out, &t)) &&
                    S_ISREG(t.mode) &&
                    (plan->tmp_any_dev || t.dev == plan->tmp_dev) &&
                    t.ino == plan->tmp_ino && t.size == it->st.size) {
                        if (!plan->tmp_any_dev)
                                return 0;
                        int old = *out;
                        *out = -1;
                        rc = adopt_temp(c, plan, it, tmp, sparse, old, out,
                                        step);
                        ferry_fsio_close(&old);
                        *adopted = !rc;
                        return rc;
                }
                ferry_fsio_close(out);
                if (ferry_fsio_out_of_fds(rc))
                        return rc; /* no answer yet: the temp is kept */
        }
        plan->resume = false;
        for (uint32_t i = 0; i < plan->n; i++)
                plan->chunks[i].state = CH_TODO;
        return new_temp(c, plan, it, tmp, sparse, it->st.size, out, step);
}

/* A descriptor of its own on SRC's file for a helper stream, so that the
 * kernel's readahead follows each stream (one open file shared by streams
 * at other offsets reads ahead for none): the open file reopened through
 * /proc (the same inode, whatever its name is now), or in itself. */
int chunk_own_src(int in)
{
        char path[48];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", in);
        int fd = -1, flags = O_RDONLY | O_NONBLOCK;
        struct ferry_stat a, b;
#ifdef HAVE_O_NOATIME
        if (ferry_fsio_openat(AT_FDCWD, path, flags | O_NOATIME, 0, &fd))
#endif
                if (ferry_fsio_openat(AT_FDCWD, path, flags, 0, &fd))
                        return in;
        if (ferry_fsio_fstat(fd, &a) || ferry_fsio_fstat(in, &b) ||
            a.ino != b.ino || a.dev != b.dev) {
                ferry_fsio_close(&fd);
                return in;
        }
#ifdef HAVE_POSIX_FADVISE
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        return fd;
}

static void stream_free(struct stream *s, bool own_buf)
{
        if (own_buf)
                free(s->buf);
        if (s->xxh)
                XXH3_freeState(s->xxh);
        if (s->in != s->job->in)
                ferry_fsio_close(&s->in);
}

/* Whether SRC's reads are what limits a stream: its preads so far took
 * more than FERRY_CHUNK_SLOW_NS per MiB (through a share with round
 * trips, not from a local disk or its cache), so that more streams at
 * once make the copy faster; in test builds FERRY_CHUNK_STREAMS in the
 * environment says yes. */
#define FERRY_CHUNK_SLOW_NS 2000000ull
static bool latency_bound(const struct stream *s)
{
#ifdef FERRY_TESTING
        if (getenv("FERRY_CHUNK_STREAMS"))
                return true;
#endif
        return s->read_bytes && s->read_ns / (s->read_bytes / (1u << 20) + 1) >
                                        FERRY_CHUNK_SLOW_NS;
}

/* Starts up to want helpers (as the budget allows) on j; how many. */
static unsigned start_helpers(struct job *j, struct stream *h, unsigned want)
{
        unsigned got = streams_take(want), n = 0;
        for (; n < got; n++) {
                h[n] = (struct stream){j,
                                       chunk_own_src(j->in),
                                       malloc(STREAM_BUF),
                                       STREAM_BUF,
                                       XXH3_createState(),
                                       0,
                                       0,
                                       0};
                if (!h[n].buf || !h[n].xxh ||
                    pthread_create(&h[n].thread, NULL, chunk_helper, &h[n])) {
                        stream_free(&h[n], true);
                        break;
                }
        }
        streams_give(got - n);
        return n;
}

/* Runs the streams of j: the owner (s) and its helpers; 0 or the first
 * failure (j's), *changed when SRC changed. */
static int run_streams(struct job *j, struct stream *s, bool *changed,
                       const struct step **step)
{
        uint32_t todo = 0;
        for (uint32_t i = 0; i < j->plan->n; i++)
                todo += j->state[i] == CS_FREE;
        struct stream h[FERRY_CHUNK_STREAMS];
        unsigned want = streams_per_file() - 1;
        want = todo > 1 && want > todo - 1 ? todo - 1 : todo > 1 ? want : 0;
        XXH3_state_t *saved = XXH3_createState();
        if (!saved)
                return ENOMEM;
        /* the owner alone first: helpers only for a latency-bound SRC;
         * block by block (copy_blocks.c) unless SRC is sparse (its holes
         * are found a chunk at a time) */
        unsigned nh = 0;
        int rc = owner_loop(j, s, j->c->xxh, saved, want > 0, changed, step);
        bool more =
                !rc && !*changed && j->fold < j->plan->n && latency_bound(s);
        /* in blocks the owner's stream takes a share of the budget too (two
         * buffers of a block each, as a helper's one of STREAM_BUF): the
         * streams' buffers stay about FERRY_CHUNK_STREAMS MiB in all,
         * whatever the number of big files in flight (bench c: 5 files,
         * peak RSS 16.6 MiB when each owner had a pool besides) */
        unsigned nb = more && !j->sparse ? streams_take(want + 1) : 0;
        bool blocks = nb >= 2;
        if (blocks) {
                rc = chunk_blocks(j, s, nb - 1, changed, step);
                streams_give(nb);
        } else if (more) {
                streams_give(nb);
                j->read_back = true;
                nh = start_helpers(j, h, want);
        }
        if (!rc && !*changed && !blocks)
                rc = owner_loop(j, s, j->c->xxh, saved, false, changed, step);
        if (rc || *changed)
                chunk_fail(j, rc, *changed, *step);
        for (unsigned k = 0; k < nh; k++) {
                pthread_join(h[k].thread, NULL);
                stream_free(&h[k], true);
        }
        streams_give(nh);
        XXH3_freeState(saved);
        /* what was written is made durable and reported: all of it for a
         * file done, and what a stop or a failure leaves, for a resume */
        if (!*changed && !j->changed) {
                int src = chunk_sync(j, true);
                if (!rc && !j->failed && src) {
                        rc = src;
                        *step = &S_FSYNC;
                }
        }
        if (!rc && !*changed && j->failed) {
                rc = j->err;
                *changed = j->changed;
                *step = j->step;
        }
        return rc;
}

/* The chunks adopt_temp took over from another host's temp, recorded at
 * once under this one, once durable in it (chunk_sync: fdatasync, then
 * the report), so that they are not lost should this host die too: the
 * record of before names a temp that is gone. Their pages stay cached for
 * the read-back against their hashes that comes next, as every host that
 * takes a recorded chunk over reads it back before it trusts it. */
static int record_adopted(struct job *j, const struct step **step)
{
        for (uint32_t i = 0; i < j->plan->n; i++)
                j->unsynced[i] = j->state[i] == CS_DONE;
        j->read_back = true;
        int rc = chunk_sync(j, true);
        j->read_back = false;
        if (rc)
                *step = &S_FSYNC;
        return rc;
}

static int copy_chunks(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                       int in, int out, struct ferry_item *it, bool sparse,
                       bool adopted, bool *changed, bool *sync_failed,
                       const struct step **step)
{
        struct job j = {.c = c, .it = it, .plan = plan, .in = in, .out = out};
        j.sparse = sparse;
        j.tmp_dev = plan->tmp_dev;
        j.tmp_ino = plan->tmp_ino;
        j.state = calloc(plan->n, 3);
        if (!j.state)
                return ENOMEM;
        j.unsynced = j.state + plan->n;
        j.snap = j.unsynced + plan->n;
        for (uint32_t i = 0; i < plan->n; i++)
                j.state[i] =
                        plan->chunks[i].state == CH_DONE ? CS_DONE : CS_FREE;
        pthread_mutex_init(&j.lock, NULL);
        pthread_cond_init(&j.cond, NULL);
        /* the owner's stream: its copier's 128 KiB buffer; a 1 MiB one
         * made a local copy 4 x as slow (bench c, 4 x 512 MiB + 2 GiB,
         * --durability=none: 10.9 and 12.2 s against 2.4 and 2.9 s, the
         * kernel's copy into the page cache) */
        struct stream s = {&j, in, c->buf, c->buf_size, XXH3_createState(),
                           0,  0,  0};
#ifdef HAVE_POSIX_FADVISE
        posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        XXH3_128bits_reset(c->xxh);
        int rc = s.xxh ? 0 : ENOMEM;
        if (!rc && adopted)
                rc = record_adopted(&j, step);
        if (!rc)
                rc = run_streams(&j, &s, changed, step);
        stream_free(&s, false);
        pthread_cond_destroy(&j.cond);
        pthread_mutex_destroy(&j.lock);
        free(j.state);
        it->bytes += atomic_load(&j.written); /* this attempt's too */
        *sync_failed = j.sync_failed;
        return rc;
}

void ferry_copier_plan_forget(struct ferry_chunk_plan *plan)
{
        plan->resume = false;
        for (uint32_t i = 0; i < plan->n; i++)
                plan->chunks[i].state = CH_TODO;
}

int ferry_copier_chunked(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                         int in, const struct ferry_stat *before,
                         struct ferry_item *it, const char *tmp, int *out,
                         bool *changed, bool *keep, const struct step **step)
{
        *keep = true; /* unless SRC changed or a new temp failed */
        *changed = !ferry_copier_same_source(before, &it->st);
        if (*changed) {
                *keep = false;
                return 0;
        }
        *step = &S_COPY;
        if (!plan->chunk_size ||
            plan->n != ferry_chunk_count(it->st.size, plan->chunk_size))
                return EINVAL; /* not this file's plan */
        bool sparse = it->st.size > BUF_SIZE &&
                      before->blocks * 512 < it->st.size,
             adopted;
        int rc = open_temp(c, plan, it, tmp, sparse, out, &adopted, step);
        if (rc) {
                /* not unlinked: the name may hold what another made
                 * meanwhile (O_EXCL refused it); a temp of ours left here
                 * is removed by the next create or the end-of-run pass */
                *keep = true;
                return rc;
        }
        bool sync_failed = false;
        rc = copy_chunks(c, plan, in, *out, it, sparse, adopted, changed,
                         &sync_failed, step);
        if (sync_failed || *changed) {
                /* of another content, or not known to be durable (rule 3:
                 * a failed fdatasync is never retried on the same data) */
                ferry_copier_plan_forget(plan);
                *keep = false;
                return rc;
        }
        if (rc)
                return rc;
        chunk_digest(c->xxh, it->hash);
        if ((rc = ferry_copier_read_xattrs(c, in, NULL, before, it, step)))
                return rc;
        *step = &S_STAT_SRC;
        struct ferry_stat after;
        if ((rc = ferry_fsio_fstat(in, &after)))
                return rc;
        if (!ferry_copier_same_source(&after, &it->st)) {
                *changed = true;
                *keep = false;
                return 0;
        }
        return ferry_copier_file_meta(c, *out, &it->st, it, step);
}
