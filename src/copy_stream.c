/*
 * copy_stream.c - one chunk stream's work (copy_chunks_impl.h): a chunk
 * read from SRC (pread; a sparse SRC's holes punched, hashed as zeros),
 * written into the temp (pwrite), hashed (XXH3-128), SRC's cached pages
 * of it let go (chunk_uncache), made durable (fdatasync) and reported
 * (MSG_CHUNK), the temp's pages of it let go then, with SRC's fstat equal
 * to the scan's before and after (rule 5); the helper threads' loop; the
 * read-back of a done chunk for the whole-file hash. Why and how the
 * streams share a file: copy_chunks.c.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copy_chunks_impl.h"

#include "fsio.h"
#include "queue.h"
#include "ratelimit.h"
#include "thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void chunk_range(const struct job *j, uint32_t i, off_t *off, uint64_t *len)
{
        uint64_t cs = j->plan->chunk_size;
        *off = (off_t)(i * cs);
        *len = j->it->st.size - i * cs < cs ? j->it->st.size - i * cs : cs;
}

void chunk_digest(XXH3_state_t *x, uint8_t out[16])
{
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(x));
        memcpy(out, canon.digest, 16);
}

static int src_unchanged(struct job *j, int in, bool *changed)
{
        struct ferry_stat now;
        int rc = ferry_fsio_fstat(in, &now);
        if (!rc && !ferry_copier_same_source(&now, &j->it->st))
                *changed = true;
        return rc;
}

static void hash_zeros(XXH3_state_t *a, XXH3_state_t *b, char *buf, size_t cap,
                       uint64_t n)
{
        memset(buf, 0, n < cap ? (size_t)n : cap);
        while (n) {
                size_t k = n < cap ? (size_t)n : cap;
                XXH3_128bits_update(a, buf, k);
                if (b)
                        XXH3_128bits_update(b, buf, k);
                n -= k;
        }
}

/* Copies [off, off + len) of SRC into the temp at the same offset,
 * hashing into x (and whole, when not NULL). */
static int copy_range(struct job *j, struct stream *s, off_t off, uint64_t len,
                      XXH3_state_t *whole, bool *changed,
                      const struct step **step)
{
        while (len) {
                size_t want = len < s->len ? (size_t)len : s->len, got;
                *step = &S_READ_SRC;
                uint64_t t0 = chunk_now_ns();
                int rc = ferry_fsio_pread(s->in, s->buf, want, off, &got);
                s->read_ns += chunk_now_ns() - t0;
                s->read_bytes += got;
                if (rc)
                        return rc;
                if (got < want) { /* shrank: not the scan's file */
                        *changed = true;
                        return 0;
                }
                ferry_fsio_uncache(s->in, off, got);
                XXH3_128bits_update(s->xxh, s->buf, got);
                if (whole)
                        XXH3_128bits_update(whole, s->buf, got);
                *step = &S_COPY; /* --bwlimit, the pause: stopped meanwhile */
                if ((rc = ferry_rate_take(j->c->cfg.rate, got, j->c->cfg.stop)))
                        return rc;
                if (ferry_copier_fenced(&j->c->cfg)) /* waited past it */
                        return ECANCELED;
                *step = &S_WRITE;
                if ((rc = ferry_fsio_pwrite(j->out, s->buf, got, off)))
                        return rc;
                ferry_copier_count(j->c, got);
                atomic_fetch_add_explicit(&j->written, got,
                                          memory_order_relaxed);
                off += (off_t)got;
                len -= got;
                if (atomic_load(j->c->cfg.stop) ||
                    ferry_copier_fenced(&j->c->cfg)) {
                        *step = &S_COPY;
                        return ECANCELED;
                }
                if (__atomic_load_n(&j->failed, __ATOMIC_RELAXED))
                        return 0; /* another stream failed: it says why */
        }
        return 0;
}

/* The data of chunk [off, off + len) of a sparse SRC: holes hash as zeros
 * and are punched in the temp (which may hold an earlier run's bytes). */
static int copy_sparse(struct job *j, struct stream *s, off_t off, uint64_t len,
                       XXH3_state_t *whole, bool *changed,
                       const struct step **step)
{
        off_t end = off + (off_t)len;
        while (off < end && !*changed) {
                off_t data = end, hole = end;
                *step = &S_READ_SRC;
                int rc = ferry_fsio_seek_data(s->in, off, &data);
                if (rc && rc != ENXIO)
                        return rc;
                if (rc || data > end)
                        data = end;
                if (data > off) {
                        hash_zeros(s->xxh, whole, s->buf, s->len,
                                   (uint64_t)(data - off));
                        rc = ferry_fsio_punch_hole(j->out, off, data - off);
                        if (rc && rc != EOPNOTSUPP) {
                                *step = &S_WRITE;
                                return rc;
                        }
                }
                if ((off = data) >= end)
                        break;
                if ((rc = ferry_fsio_seek_hole(s->in, off, &hole)))
                        return rc;
                hole = hole > end ? end : hole;
                if ((rc = copy_range(j, s, off, (uint64_t)(hole - off), whole,
                                     changed, step)))
                        return rc;
                off = hole;
        }
        return 0;
}

static void report(struct job *j, uint32_t i)
{
        struct ferry_queue *q = j->c->cfg.chunk_inbox;
        if (!q)
                return;
        struct ferry_chunk_msg *m = calloc(1, sizeof(*m));
        if (!m)
                return; /* unrecorded: a resumed run copies it again */
        m->msg.kind = MSG_CHUNK;
        m->file_id = j->it->id;
        m->idx = i;
        m->chunk_size = j->plan->chunk_size;
        pthread_mutex_lock(&j->lock); /* the owner may re-copy it meanwhile */
        memcpy(m->hash, j->plan->chunks[i].hash, 16);
        pthread_mutex_unlock(&j->lock);
        m->src = j->it->st;
        m->tmp_dev = j->tmp_dev;
        m->tmp_ino = j->tmp_ino;
        if (ferry_queue_push(q, m) != FERRY_QUEUE_OK)
                free(m);
}

/* Copies chunk i (claimed by the caller): data, hash, durable, SRC as the
 * scan saw it before and after; then the plan's record and the report. */
int chunk_copy(struct job *j, struct stream *s, uint32_t i, XXH3_state_t *whole,
               bool *changed, const struct step **step)
{
        off_t off;
        uint64_t len;
        chunk_range(j, i, &off, &len);
        *step = &S_STAT_SRC;
        int rc = src_unchanged(j, s->in, changed);
        if (rc || *changed)
                return rc;
        XXH3_128bits_reset(s->xxh);
        rc = j->sparse ? copy_sparse(j, s, off, len, whole, changed, step)
                       : copy_range(j, s, off, len, whole, changed, step);
        if (rc || *changed || __atomic_load_n(&j->failed, __ATOMIC_RELAXED))
                return rc;
        *step = &S_STAT_SRC;
        if ((rc = src_unchanged(j, s->in, changed)) || *changed)
                return rc;
        /* the chunk's write-back started now, so that the fdatasync that
         * makes it durable (chunk_sync, about once a second) finds little
         * left to write: a dirty page cache of gigabytes made that sync
         * take seconds, and a kill lost every chunk it had not reported
         * (bench resume). Advice only: the fdatasync tells of errors. */
        if (!j->c->cfg.no_sync)
                sync_file_range(j->out, off, (off_t)len, SYNC_FILE_RANGE_WRITE);
        chunk_uncache(j, s->in, i);
        pthread_mutex_lock(&j->lock);
        chunk_digest(s->xxh, j->plan->chunks[i].hash);
        j->plan->chunks[i].state = CH_DONE;
        j->state[i] = CS_DONE;
        j->unsynced[i] = 1;
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->lock);
        *step = &S_FSYNC;
        return chunk_sync(j, false);
}

void chunk_uncache(const struct job *j, int fd, uint32_t i)
{
        off_t off;
        uint64_t len;
        chunk_range(j, i, &off, &len);
        /* the last chunk to SRC's end (0: to EOF), so that its last page,
         * partly past the end, goes too */
        ferry_fsio_uncache(fd, off, i + 1 == j->plan->n ? 0 : (size_t)len);
}

uint64_t chunk_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int chunk_sync(struct job *j, bool force)
{
        bool sync = !j->c->cfg.no_sync;
        pthread_mutex_lock(&j->lock);
        while (force && j->syncing)
                pthread_cond_wait(&j->cond, &j->lock);
        if (j->syncing ||
            (sync && !force &&
             chunk_now_ns() - j->last_sync_ns < FERRY_CHUNK_SYNC_NS)) {
                pthread_mutex_unlock(&j->lock);
                return 0;
        }
        if (j->sync_failed) {
                /* rule 3: after a failed fdatasync the next one may say 0
                 * for data that never got to the disk; nothing written
                 * since is reported (the temp goes: copy_chunks) */
                pthread_mutex_unlock(&j->lock);
                return EIO;
        }
        bool any = false;
        for (uint32_t i = 0; i < j->plan->n; i++) {
                j->snap[i] = j->unsynced[i];
                any |= j->unsynced[i];
                j->unsynced[i] = 0;
        }
        j->syncing = any;
        pthread_mutex_unlock(&j->lock);
        if (!any)
                return 0;
        /* data durable first, then its record: rule 1, per chunk */
        int rc = sync ? ferry_fsio_fdatasync(j->out) : 0;
        for (uint32_t i = 0; !rc && i < j->plan->n; i++) {
                if (!j->snap[i])
                        continue;
                report(j, i);
                /* durable: its pages are clean and can go, unless the
                 * owner may still read it back for the whole-file hash
                 * (a helper's chunk) */
                if (sync && !j->read_back)
                        chunk_uncache(j, j->out, i);
        }
        pthread_mutex_lock(&j->lock);
        if (rc)
                j->sync_failed = true;
        j->syncing = false;
        j->last_sync_ns = chunk_now_ns();
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->lock);
        return rc;
}

/* Records a stream's failure (the first one wins); wakes the others. */
void chunk_fail(struct job *j, int rc, bool changed, const struct step *step)
{
        pthread_mutex_lock(&j->lock);
        if (!j->failed) {
                j->err = rc;
                j->changed = changed;
                j->step = step;
        }
        __atomic_store_n(&j->failed, true, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->lock);
}

/* The lowest free chunk from..n, claimed; n when none. Under lock. */
uint32_t chunk_claim(struct job *j, uint32_t from)
{
        for (uint32_t i = from; i < j->plan->n; i++)
                if (j->state[i] == CS_FREE) {
                        j->state[i] = CS_BUSY;
                        return i;
                }
        return j->plan->n;
}

void *chunk_helper(void *arg)
{
        ferry_thread_quiet();
        struct stream *s = arg;
        struct job *j = s->job;
        for (;;) {
                pthread_mutex_lock(&j->lock);
                uint32_t i = j->failed ? j->plan->n : chunk_claim(j, 0);
                pthread_mutex_unlock(&j->lock);
                if (i == j->plan->n)
                        return NULL;
                bool changed = false;
                const struct step *step = &S_COPY;
                int rc = chunk_copy(j, s, i, NULL, &changed, &step);
                if (rc || changed) {
                        chunk_fail(j, rc, changed, step);
                        return NULL;
                }
        }
}

/* Reads chunk i back from the temp into whole; *ok when its hash is the
 * recorded one. */
int chunk_read_back(struct job *j, struct stream *s, uint32_t i,
                    XXH3_state_t *whole, bool *ok)
{
        off_t off;
        uint64_t len;
        chunk_range(j, i, &off, &len);
        XXH3_state_t *x = s->xxh;
        XXH3_128bits_reset(x);
        while (len) {
                size_t want = len < s->len ? (size_t)len : s->len, got;
                int rc = ferry_fsio_pread(j->out, s->buf, want, off, &got);
                if (rc)
                        return rc;
                if (got < want)
                        return EIO; /* the temp shrank under us */
                XXH3_128bits_update(x, s->buf, got);
                XXH3_128bits_update(whole, s->buf, got);
                off += (off_t)got;
                len -= got;
        }
        uint8_t h[16];
        chunk_digest(x, h);
        pthread_mutex_lock(&j->lock);
        *ok = !memcmp(h, j->plan->chunks[i].hash, 16);
        pthread_mutex_unlock(&j->lock);
        return 0;
}
