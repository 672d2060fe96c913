/*
 * scan.c - parallel directory walk (scan.h): the pool.
 *
 * Owns a stack of directories still to read, a bounded queue of stat
 * chunks (names of an open directory still to stat, scan_int.h) and the
 * threads. A thread takes a chunk when there is one (it finishes what is
 * open, so descriptors and memory stay bounded), else pops a directory
 * and reads it (scan_dir.c): every FERRY_SCAN_STAT_CHUNK names become a
 * chunk any thread may stat, so the stats of one directory go out in
 * parallel, each chunk its own listing. Subdirectories are pushed onto
 * the stack only after the listing that named them was queued. When the
 * stack and the queue are empty and every thread is idle, the last one
 * queues MSG_SCAN_DONE.
 *
 * Threads start on demand: one at first, another whenever work is queued
 * that no waiting thread will take, up to cfg.threads and the limit
 * (ferry_scan_set_limit: at most that many threads busy at once, each
 * with one request in flight). At most cfg.threads directories are open
 * at once (a directory stays open while its chunks are stat'ed), so the
 * scan holds at most cfg.threads * FERRY_SCAN_FDS descriptors.
 *
 * With -x (cfg.one_file_system) a directory on another file system than
 * SRC's (a mount point: its st_dev differs) is not read: its one listing
 * is empty and whole, so DST gets the directory, empty, as rsync -x and
 * cp -x leave it.
 *
 * Transient errors (an EIO or ESTALE from a flaky share) while opening or
 * reading a directory, SRC's own included, are retried as the copy retries
 * them (retry.h): ferry_copy_transient() says which, --retries how often,
 * ferry_copy_backoff() how long to wait. What still fails is sent as the
 * listing's open_err, with the step that failed (open_step: opendir,
 * readdir, or the stat of an entry). No descriptor (EMFILE, ENFILE) is
 * back-pressure: waited out with ferry_fsio_fd_wait, never an attempt.
 */
#define _GNU_SOURCE
#include "scan_int.h"

#include "batch.h"
#include "retry.h"
#include "thread.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool scan_retry(const struct ferry_scan_cfg *cfg, int err, unsigned *attempt)
{
        if (!ferry_copy_transient(err) || *attempt >= cfg->retries ||
            atomic_load(cfg->stop))
                return false;
        ferry_copy_backoff((*attempt)++);
        return true;
}

struct pending_dir *scan_pending_new(const char *path, size_t len,
                                     const struct ferry_stat *st)
{
        struct pending_dir *d = malloc(sizeof(*d) + len + 1);
        if (!d)
                return NULL;
        memcpy(d->path, path, len);
        d->path[len] = '\0';
        d->len = len;
        d->st = *st;
        d->other_fs = false;
        d->next = NULL;
        return d;
}

static void *scan_thread(void *arg);

bool scan_stats_slow(struct ferry_scan *sc)
{
        return sc->cfg.spread_always ||
               atomic_load_explicit(&sc->stat_ns, memory_order_relaxed) >=
                       FERRY_SCAN_SLOW_NS;
}

/* Whether the coordinator keeps up: its inbox at most half full. A scan
 * that waits for it gains nothing from another thread. */
static bool inbox_has_room(const struct ferry_scan *sc)
{
        return ferry_queue_len(sc->cfg.inbox) <= sc->cfg.inbox->cap / 2;
}

/* Work was queued: wakes a waiting thread, or starts one when there is
 * more work than waiting threads, the limit allows, the coordinator keeps
 * up, and stats are slow round trips or threads fewer than cpu_threads
 * (cheap stats are work for the CPUs, no more threads than they run).
 * The first thread starts even when a stop was asked (a signal at start):
 * it sees the stop and ends, and the run stops as asked instead of
 * failing to start. Under sc->lock. */
static void wake_one(struct ferry_scan *sc)
{
        if (sc->n_chunks + sc->n_stack > sc->waiting && !sc->finished &&
            sc->n_threads < sc->limit && sc->n_threads < sc->cfg.threads &&
            (!sc->n_threads || !atomic_load(sc->cfg.stop)) &&
            inbox_has_room(sc) &&
            (sc->n_threads < sc->cpu_threads || scan_stats_slow(sc)) &&
            !(sc->n_threads
                      ? pthread_create(&sc->threads[sc->n_threads], NULL,
                                       scan_thread, sc)
                      : ferry_thread_start(&sc->threads[0], scan_thread, sc)))
                sc->n_threads++;
        else if (sc->waiting)
                pthread_cond_signal(&sc->wake);
}

void scan_push_dirs(struct ferry_scan *sc, struct pending_dir *list)
{
        if (!list)
                return;
        pthread_mutex_lock(&sc->lock);
        while (list) {
                struct pending_dir *next = list->next;
                list->next = sc->stack;
                sc->stack = list;
                sc->n_stack++;
                wake_one(sc);
                list = next;
        }
        pthread_mutex_unlock(&sc->lock);
}

bool scan_offer_chunk(struct ferry_scan *sc, struct stat_chunk *c)
{
        pthread_mutex_lock(&sc->lock);
        /* only when a thread is idle or may start: else the reader keeps
         * its names, one listing less for the coordinator */
        bool idle =
                sc->waiting > sc->n_chunks + sc->n_stack ||
                (sc->n_threads < sc->limit && sc->n_threads < sc->cfg.threads);
        bool taken = idle && sc->n_chunks < sc->chunk_cap && !sc->finished;
        if (taken) {
                c->next = NULL;
                if (sc->chunks_tail)
                        sc->chunks_tail->next = c;
                else
                        sc->chunks = c;
                sc->chunks_tail = c;
                sc->n_chunks++;
                wake_one(sc);
        }
        pthread_mutex_unlock(&sc->lock);
        return taken;
}

struct stat_chunk *scan_reclaim_chunk(struct ferry_scan *sc,
                                      const struct scan_dir *dir)
{
        pthread_mutex_lock(&sc->lock);
        struct stat_chunk **p = &sc->chunks, *prev = NULL;
        while (*p && (*p)->dir != dir) {
                prev = *p;
                p = &(*p)->next;
        }
        struct stat_chunk *c = *p;
        if (c) {
                *p = c->next;
                if (sc->chunks_tail == c)
                        sc->chunks_tail = prev;
                sc->n_chunks--;
        }
        pthread_mutex_unlock(&sc->lock);
        return c;
}

void scan_dir_closed(struct ferry_scan *sc)
{
        pthread_mutex_lock(&sc->lock);
        sc->open_dirs--;
        if (sc->stack && sc->waiting)
                pthread_cond_signal(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
}

/* What a thread does next: a chunk, or a directory (never both). */
struct job {
        struct stat_chunk *chunk;
        struct pending_dir *dir;
};

/* Takes a job under sc->lock, directories first (a file system that
 * serializes the lookups in one directory, as FUSE does, gains nothing
 * from two threads in it while another waits unread); false when there is
 * none. */
static bool take_job(struct ferry_scan *sc, struct job *j)
{
        if (sc->busy >= sc->limit)
                return false;
        if (sc->stack && sc->open_dirs < sc->cfg.threads) {
                j->dir = sc->stack;
                sc->stack = j->dir->next;
                sc->n_stack--;
                sc->open_dirs++;
        } else if (sc->chunks) {
                j->chunk = sc->chunks;
                sc->chunks = j->chunk->next;
                if (!sc->chunks)
                        sc->chunks_tail = NULL;
                sc->n_chunks--;
        } else {
                return false;
        }
        sc->busy++;
        return true;
}

/* Blocks until there is work (true); false when the walk is over. had: the
 * caller just finished a job. */
static bool next_job(struct ferry_scan *sc, bool had, struct job *j)
{
        *j = (struct job){0};
        pthread_mutex_lock(&sc->lock);
        if (had)
                sc->busy--;
        for (;;) {
                if (atomic_load(sc->cfg.stop))
                        sc->finished = true;
                if (sc->finished)
                        break;
                if (take_job(sc, j)) {
                        /* more queued than threads waking for it */
                        if (sc->chunks || sc->stack)
                                wake_one(sc);
                        pthread_mutex_unlock(&sc->lock);
                        return true;
                }
                if (sc->busy == 0 && !sc->chunks && !sc->stack) {
                        sc->finished = true;
                        pthread_cond_broadcast(&sc->wake);
                        pthread_mutex_unlock(&sc->lock);
                        static struct ferry_msg done = {MSG_SCAN_DONE, 0};
                        ferry_queue_push(sc->cfg.inbox, &done);
                        return false;
                }
                sc->waiting++;
                pthread_cond_wait(&sc->wake, &sc->lock);
                sc->waiting--;
        }
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
        return false;
}

static void *scan_thread(void *arg)
{
        ferry_thread_quiet();
        struct ferry_scan *sc = arg;
        struct scan_reader r = {.sc = sc, .rel = FERRY_BUF_INIT};
        struct job j;
        bool had = false;
        while (next_job(sc, had, &j)) {
                had = true;
                if (j.chunk)
                        scan_run_chunk(&r, j.chunk);
                else
                        scan_read_dir(&r, j.dir);
        }
        ferry_buf_release(&r.rel);
        return NULL;
}

static unsigned clamp(unsigned n, unsigned hi)
{
        return n < 1 ? 1 : n > hi ? hi : n;
}

int ferry_scan_start(const struct ferry_scan_cfg *cfg, struct ferry_scan **out,
                     int *src_err)
{
        *src_err = 0;
        struct ferry_scan *sc = calloc(1, sizeof(*sc));
        if (!sc)
                return ENOMEM;
        sc->cfg = *cfg;
        sc->cfg.threads = clamp(cfg->threads, UINT32_MAX);
        sc->cfg.chunk = cfg->chunk ? cfg->chunk : 1;
        sc->stat_chunk = sc->cfg.chunk < FERRY_SCAN_STAT_CHUNK
                                 ? sc->cfg.chunk
                                 : FERRY_SCAN_STAT_CHUNK;
        /* enough queued to keep every thread busy, not more */
        sc->chunk_cap = 2 * (size_t)sc->cfg.threads;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        sc->cpu_threads = cpus > 0 && cpus < 1024 ? 2 * (unsigned)cpus : 2;
        atomic_init(&sc->stat_ns, 0); /* the first stats tell */
        struct ferry_stat root;
        unsigned attempt = 0;
        int rc;
        do
                rc = ferry_fsio_fstat(cfg->srcfd, &root);
        while (rc && scan_retry(cfg, rc, &attempt));
        if (rc) {
                free(sc);
                *src_err = rc;
                return rc;
        }
        sc->root_dev = root.dev;
        sc->stack = scan_pending_new("", 0, &root);
        sc->n_stack = 1;
        sc->threads = calloc(sc->cfg.threads, sizeof(*sc->threads));
        if (!sc->stack || !sc->threads) {
                free(sc->stack);
                free(sc->threads);
                free(sc);
                return ENOMEM;
        }
        pthread_mutex_init(&sc->lock, NULL);
        pthread_cond_init(&sc->wake, NULL);
        sc->limit = sc->cfg.threads;
        pthread_mutex_lock(&sc->lock);
        wake_one(sc); /* the first thread; the rest on demand */
        bool started = sc->n_threads == 1;
        pthread_mutex_unlock(&sc->lock);
        if (!started) {
                ferry_scan_join(sc);
                return EAGAIN;
        }
        *out = sc;
        return 0;
}

void ferry_scan_set_limit(struct ferry_scan *sc, unsigned n)
{
        pthread_mutex_lock(&sc->lock);
        sc->limit = clamp(n, sc->cfg.threads);
        pthread_cond_broadcast(&sc->wake);
        while (sc->n_chunks + sc->n_stack > sc->waiting &&
               sc->n_threads < sc->limit && !sc->finished) {
                unsigned before = sc->n_threads;
                wake_one(sc);
                if (sc->n_threads == before)
                        break;
        }
        pthread_mutex_unlock(&sc->lock);
}

unsigned ferry_scan_threads_started(struct ferry_scan *sc)
{
        pthread_mutex_lock(&sc->lock);
        unsigned n = sc->n_threads;
        pthread_mutex_unlock(&sc->lock);
        return n;
}

void ferry_scan_join(struct ferry_scan *sc)
{
        if (!sc)
                return;
        pthread_mutex_lock(&sc->lock);
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
        /* a thread may start another until the walk is over: join them all */
        for (unsigned i = 0;; i++) {
                pthread_mutex_lock(&sc->lock);
                unsigned n = sc->n_threads;
                pthread_mutex_unlock(&sc->lock);
                if (i >= n)
                        break;
                pthread_join(sc->threads[i], NULL);
        }
        while (sc->chunks) { /* left by a stop */
                struct stat_chunk *n = sc->chunks->next;
                scan_drop_chunk(sc->chunks);
                sc->chunks = n;
        }
        while (sc->stack) {
                struct pending_dir *n = sc->stack->next;
                free(sc->stack);
                sc->stack = n;
        }
        pthread_mutex_destroy(&sc->lock);
        pthread_cond_destroy(&sc->wake);
        free(sc->threads);
        free(sc);
}
