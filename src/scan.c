/*
 * scan.c - parallel directory walk (scan.h).
 *
 * Owns a stack of directories still to read and a pool of threads. Each
 * thread pops a directory, opens it relative to SRC's descriptor, reads it
 * with readdir + statx relative to the directory's descriptor, and sends
 * its entries as listings. Subdirectories are pushed onto the stack only
 * after the listing that named them was queued. When the stack is empty and
 * every thread is idle, the last one queues MSG_SCAN_DONE.
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
 * back-pressure: waited out with ferry_fsio_fd_wait, never an attempt; a
 * thread holds at most FERRY_SCAN_FDS descriptors.
 */
#define _GNU_SOURCE
#include "scan.h"

#include "batch.h"
#include "buf.h"
#include "fsio.h"
#include "retry.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pending_dir {
        struct pending_dir *next;
        struct ferry_stat st;
        bool other_fs; /* -x: a mount point, listed empty, not read */
        size_t len;
        char path[];
};

struct ferry_scan {
        struct ferry_scan_cfg cfg;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct pending_dir *stack;
        unsigned busy;  /* threads holding a directory */
        unsigned limit; /* ferry_scan_set_limit: busy at most this */
        bool finished;
        unsigned n_threads;
        pthread_t *threads;
        uint64_t root_dev; /* SRC's file system (-x) */
};

/* Whether to try again after err (a transient error, fewer than --retries
 * attempts so far, no stop asked); sleeps the copy's backoff first. */
static bool retry(const struct ferry_scan_cfg *cfg, int err, unsigned *attempt)
{
        if (!ferry_copy_transient(err) || *attempt >= cfg->retries ||
            atomic_load(cfg->stop))
                return false;
        ferry_copy_backoff((*attempt)++);
        return true;
}

static struct pending_dir *pending_new(const char *path, size_t len,
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

static void push_dirs(struct ferry_scan *sc, struct pending_dir *list)
{
        if (!list)
                return;
        pthread_mutex_lock(&sc->lock);
        while (list) {
                struct pending_dir *next = list->next;
                list->next = sc->stack;
                sc->stack = list;
                list = next;
        }
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
}

/* Blocks until there is a directory to read; NULL when the walk is over. */
static struct pending_dir *pop_dir(struct ferry_scan *sc)
{
        pthread_mutex_lock(&sc->lock);
        sc->busy--;
        for (;;) {
                if (atomic_load(sc->cfg.stop))
                        sc->finished = true;
                if (sc->finished)
                        break;
                if (sc->stack && sc->busy < sc->limit) {
                        struct pending_dir *d = sc->stack;
                        sc->stack = d->next;
                        sc->busy++;
                        pthread_mutex_unlock(&sc->lock);
                        return d;
                }
                if (sc->busy == 0) {
                        sc->finished = true;
                        pthread_cond_broadcast(&sc->wake);
                        pthread_mutex_unlock(&sc->lock);
                        static struct ferry_msg done = {MSG_SCAN_DONE, 0};
                        ferry_queue_push(sc->cfg.inbox, &done);
                        return NULL;
                }
                pthread_cond_wait(&sc->wake, &sc->lock);
        }
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
        return NULL;
}

/* Per-directory state of one read. */
struct reader {
        struct ferry_scan *sc;
        struct pending_dir *dir;
        struct ferry_listing *cur;
        struct pending_dir *subdirs; /* found in the current chunk */
        size_t seen;                 /* entries listed so far */
        struct ferry_buf rel;        /* dir path + '/' + name, for patterns */
};

/* Queues the current chunk, then releases the subdirectories it named. */
static int flush_chunk(struct reader *r, bool last)
{
        struct ferry_listing *l = r->cur;
        r->cur = NULL;
        if (ferry_queue_push(r->sc->cfg.inbox, l) != FERRY_QUEUE_OK) {
                ferry_listing_free(l);
                return ECANCELED;
        }
        push_dirs(r->sc, r->subdirs);
        r->subdirs = NULL;
        if (last)
                return 0;
        r->cur = ferry_listing_new(r->dir->path, r->dir->len, r->sc->cfg.chunk);
        return r->cur ? 0 : ENOMEM;
}

/* dir/name, valid until the next call; NULL when out of memory. */
static const char *rel_path(struct reader *r, const char *name)
{
        ferry_buf_reset(&r->rel);
        ferry_buf_add(&r->rel, r->dir->path, r->dir->len);
        ferry_buf_add_path(&r->rel, name);
        if (!r->rel.oom)
                return r->rel.buf;
        ferry_buf_release(&r->rel); /* a later call may find memory */
        return NULL;
}

static int add_subdir(struct reader *r, const char *name, size_t len,
                      const struct ferry_stat *st)
{
        const char *rel = rel_path(r, name);
        if (!rel)
                return ENOMEM;
        struct pending_dir *d =
                pending_new(rel, r->dir->len ? r->dir->len + 1 + len : len, st);
        if (!d)
                return ENOMEM;
        d->other_fs = r->sc->cfg.one_file_system && st->dev != r->sc->root_dev;
        d->next = r->subdirs;
        r->subdirs = d;
        return 0;
}

static bool excluded(struct reader *r, const char *name, size_t len,
                     bool is_dir)
{
        const struct ferry_patterns *p = r->sc->cfg.excludes;
        if (!p)
                return false;
        const char *rel =
                ferry_patterns_need_path(p) ? rel_path(r, name) : NULL;
        return ferry_patterns_match(p, rel, name, is_dir);
}

static int read_entry(struct reader *r, int dfd, const char *name)
{
        size_t len = strlen(name);
        struct ferry_stat st;
        unsigned attempt = 0;
        int rc;
        do
                rc = ferry_fsio_statat(dfd, name, &st);
        while (rc && retry(&r->sc->cfg, rc, &attempt));
        if (rc == ENOENT)
                return 0; /* vanished while we read: not there */
        if (rc)
                return rc;
        bool is_dir = S_ISDIR(st.mode);
        if (excluded(r, name, len, is_dir) ||
            ferry_own_is_file(r->sc->cfg.own, &r->dir->st, name, &st))
                return 0;
        if (is_dir)
                return add_subdir(r, name, len, &st);
        if (r->cur->n == r->cur->cap && (rc = flush_chunk(r, false)))
                return rc;
        rc = ferry_listing_add(r->cur, name, len, &st);
        if (!rc)
                r->seen++;
        return rc;
}

/* No descriptor (EMFILE, ENFILE) is waited out, not counted as an attempt
 * and not reported as the directory's error unless the wait runs out. */
static bool wait_for_fds(const struct ferry_scan_cfg *cfg, int err,
                         int64_t *since)
{
        return !atomic_load(cfg->stop) && ferry_fsio_fd_wait(since, err);
}

static int open_dir(struct reader *r, DIR **out)
{
        unsigned attempt = 0;
        int64_t since = 0;
        int fd = -1, err;
        do
                err = ferry_fsio_open_dir(r->sc->cfg.srcfd, r->dir->path, &fd);
        while (err && (retry(&r->sc->cfg, err, &attempt) ||
                       wait_for_fds(&r->sc->cfg, err, &since)));
        if (err)
                return err;
        *out = fdopendir(fd);
        if (*out)
                return 0;
        err = errno;
        close(fd);
        return err;
}

/* readdir, called again after a transient error: the stream keeps its
 * position when getdents fails, so no entry is lost or read twice. NULL
 * with *err = 0 at the end. */
static struct dirent *next_entry(struct reader *r, DIR *d, int *err)
{
        unsigned attempt = 0;
        for (;;) {
                int fault = ferry_fsio_fault(FSIO_READDIR);
                errno = 0;
                struct dirent *de = fault ? NULL : readdir(d);
                *err = fault ? fault : de ? 0 : errno;
                if (de || !*err || !retry(&r->sc->cfg, *err, &attempt))
                        return de;
        }
}

static void read_dir(struct reader *r)
{
        DIR *d = NULL;
        int err = open_dir(r, &d);
        enum ferry_step step = FERRY_STEP_OPENDIR;
        while (d && !atomic_load(r->sc->cfg.stop)) {
                int rerr;
                struct dirent *de = next_entry(r, d, &rerr);
                if (!de) {
                        if (rerr) {
                                err = rerr;
                                step = FERRY_STEP_READDIR;
                        }
                        break; /* the end: an entry's error stays */
                }
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int rc = read_entry(r, dirfd(d), de->d_name);
                if (rc == ECANCELED || rc == ENOMEM) {
                        err = rc;
                        step = FERRY_STEP_READDIR;
                        break;
                }
                if (rc && !err) { /* one entry failed; report and go on */
                        err = rc;
                        step = FERRY_STEP_STAT;
                }
        }
        if (d)
                closedir(d);
        if (r->cur) {
                r->cur->open_err = err;
                r->cur->open_step = step;
                /* a listing cut short by a stop is not the whole directory:
                 * the coordinator must not take its unread rows for removed */
                r->cur->last = !atomic_load(r->sc->cfg.stop);
                r->cur->seen = r->seen;
                flush_chunk(r, true);
        }
}

static void *scan_thread(void *arg)
{
        struct ferry_scan *sc = arg;
        struct reader r = {.sc = sc, .rel = FERRY_BUF_INIT};
        struct pending_dir *dir;
        while ((dir = pop_dir(sc))) {
                r.dir = dir;
                r.seen = 0;
                r.cur = ferry_listing_new(dir->path, dir->len, sc->cfg.chunk);
                if (r.cur) {
                        r.cur->first = true;
                        r.cur->dir_st = dir->st;
                        if (ferry_own_is_dst(sc->cfg.own, &dir->st)) {
                                r.cur->open_err = ELOOP; /* DST: not read */
                                r.cur->open_step = FERRY_STEP_OPENDIR;
                                flush_chunk(&r, true);
                        } else if (dir->other_fs) {
                                r.cur->last = true; /* read whole: empty */
                                flush_chunk(&r, true);
                        } else {
                                read_dir(&r);
                        }
                }
                while (r.subdirs) { /* only left when the inbox closed */
                        struct pending_dir *n = r.subdirs->next;
                        free(r.subdirs);
                        r.subdirs = n;
                }
                free(dir);
        }
        ferry_buf_release(&r.rel);
        return NULL;
}

int ferry_scan_start(const struct ferry_scan_cfg *cfg, struct ferry_scan **out,
                     int *src_err)
{
        *src_err = 0;
        struct ferry_scan *sc = calloc(1, sizeof(*sc));
        if (!sc)
                return ENOMEM;
        sc->cfg = *cfg;
        struct ferry_stat root;
        unsigned attempt = 0;
        int rc;
        do
                rc = ferry_fsio_fstat(cfg->srcfd, &root);
        while (rc && retry(cfg, rc, &attempt));
        if (rc) {
                free(sc);
                *src_err = rc;
                return rc;
        }
        sc->root_dev = root.dev;
        sc->stack = pending_new("", 0, &root);
        sc->threads = calloc(cfg->threads, sizeof(*sc->threads));
        if (!sc->stack || !sc->threads) {
                free(sc->stack);
                free(sc->threads);
                free(sc);
                return ENOMEM;
        }
        pthread_mutex_init(&sc->lock, NULL);
        pthread_cond_init(&sc->wake, NULL);
        sc->busy = cfg->threads; /* each thread starts by popping */
        sc->limit = cfg->threads;
        for (unsigned i = 0; i < cfg->threads; i++) {
                if (pthread_create(&sc->threads[i], NULL, scan_thread, sc))
                        break;
                sc->n_threads++;
        }
        if (sc->n_threads < cfg->threads) {
                pthread_mutex_lock(&sc->lock);
                sc->busy -= cfg->threads - sc->n_threads;
                pthread_cond_broadcast(&sc->wake);
                pthread_mutex_unlock(&sc->lock);
        }
        if (!sc->n_threads) {
                ferry_scan_join(sc);
                return EAGAIN;
        }
        *out = sc;
        return 0;
}

void ferry_scan_set_limit(struct ferry_scan *sc, unsigned n)
{
        pthread_mutex_lock(&sc->lock);
        sc->limit = n < 1 ? 1 : n > sc->n_threads ? sc->n_threads : n;
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
}

void ferry_scan_join(struct ferry_scan *sc)
{
        if (!sc)
                return;
        pthread_mutex_lock(&sc->lock);
        pthread_cond_broadcast(&sc->wake);
        pthread_mutex_unlock(&sc->lock);
        for (unsigned i = 0; i < sc->n_threads; i++)
                pthread_join(sc->threads[i], NULL);
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
