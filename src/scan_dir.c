/*
 * scan_dir.c - reading one SRC directory for the scanner pool (scan_int.h).
 *
 * Owns a directory while it is read (struct scan_dir): its descriptor,
 * shared by every thread that stats a chunk of it and closed by whoever
 * drops the last reference (the reader holds one until it has read every
 * name, each chunk handed out holds one), and the order of its listings.
 * The thread that pops a directory opens it and reads all its names, in
 * chunks of cfg.chunk: the subdirectories' (by d_type) apart, stat'ed
 * first, so the walk goes deeper while the files are stat'ed. While a
 * stat is a slow round trip (the pool's moving average of a stat's time
 * above FERRY_SCAN_SLOW_NS) each chunk is cut into stat chunks of
 * FERRY_SCAN_STAT_CHUNK names offered to idle threads (a full queue: the
 * reader stats it itself), and the reader takes back and stats what no
 * other thread took; while stats are cheap the reader stats them all, as
 * few listings as can be. Each chunk is sent as its own listing.
 *
 * What the coordinator reads in the listings (coord/ingest.c) holds as for
 * one serial read, because a directory's listings are queued under its
 * lock: the listing queued first has first and dir_st, the one queued
 * last (the last reference dropped) has last (unless a stop cut the read
 * short), seen (every entry of every chunk) and open_err with open_step:
 * an error of the directory (opendir, readdir, memory) before an entry's,
 * and of the entries the one of the earliest chunk. A subdirectory is
 * pushed only after the listing that named it was queued, so it is never
 * listed before its parent's first listing. An empty chunk sends nothing
 * unless its listing is the first or the last.
 */
#define _GNU_SOURCE
#include "scan_int.h"

#include "batch.h"
#include "retry.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct scan_dir {
        pthread_mutex_t lock; /* orders its listings into the inbox */
        struct ferry_scan *sc;
        struct pending_dir *pd; /* owned: path and stat */
        DIR *d;                 /* open until refs drops to 0 */
        unsigned refs;          /* the reader, and each chunk handed out */
        size_t next_seq;        /* chunks cut so far */
        bool first_sent;
        bool err_dir; /* err is the directory's, not an entry's */
        int err;      /* first error, sent with the last listing */
        enum ferry_step step;
        size_t err_seq; /* chunk of an entry's err */
        size_t seen;    /* entries queued so far */
};

/* What one chunk found besides its entries. */
struct chunk_out {
        struct pending_dir *subdirs;
        int err;
        enum ferry_step step;
        bool err_dir;
};

static void set_err(struct chunk_out *o, int err, enum ferry_step step,
                    bool of_dir)
{
        if (o->err && (o->err_dir || !of_dir))
                return;
        o->err = err;
        o->step = step;
        o->err_dir = of_dir;
}

/* dir/name in r->rel, valid until the next call; NULL when out of memory. */
static const char *rel_path(struct scan_reader *r, const struct pending_dir *pd,
                            const char *name)
{
        ferry_buf_reset(&r->rel);
        ferry_buf_add(&r->rel, pd->path, pd->len);
        ferry_buf_add_path(&r->rel, name);
        if (!r->rel.oom)
                return r->rel.buf;
        ferry_buf_release(&r->rel); /* a later call may find memory */
        return NULL;
}

static int add_subdir(struct scan_reader *r, const struct pending_dir *pd,
                      const char *name, size_t len, const struct ferry_stat *st,
                      struct chunk_out *o)
{
        const char *rel = rel_path(r, pd, name);
        if (!rel)
                return ENOMEM;
        struct pending_dir *d =
                scan_pending_new(rel, pd->len ? pd->len + 1 + len : len, st);
        if (!d)
                return ENOMEM;
        d->other_fs = r->sc->cfg.one_file_system && st->dev != r->sc->root_dev;
        d->next = o->subdirs;
        o->subdirs = d;
        return 0;
}

/* The selection (select.h) leaves the entry out: before its stat, by
 * name (st NULL), or after it. */
static bool left_out(struct scan_reader *r, const struct pending_dir *pd,
                     const char *name, const struct ferry_stat *st)
{
        const struct ferry_select *s = r->sc->cfg.select;
        if (!s)
                return false;
        const char *rel =
                ferry_select_need_path(s) ? rel_path(r, pd, name) : NULL;
        if (!st)
                return !ferry_select_named(s, rel);
        return !ferry_select_entry(s, rel, name, S_ISDIR(st->mode),
                                   S_ISREG(st->mode), st->size);
}

static int64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Into the pool's moving average of a stat's time (weight 1/8, a sample
 * at most 4 x FERRY_SCAN_SLOW_NS; threads racing may lose a sample, which
 * a heuristic can afford). */
static void note_stat_time(struct ferry_scan *sc, int64_t ns)
{
        uint64_t avg = atomic_load_explicit(&sc->stat_ns, memory_order_relaxed);
        /* one stat descheduled on a busy machine must not tip it alone */
        uint64_t x = ns <= 0                       ? 0
                     : ns > 4 * FERRY_SCAN_SLOW_NS ? 4 * FERRY_SCAN_SLOW_NS
                                                   : (uint64_t)ns;
        avg = avg - avg / 8 + x / 8;
        atomic_store_explicit(&sc->stat_ns, avg, memory_order_relaxed);
}

static int read_entry(struct scan_reader *r, struct scan_dir *dir,
                      const char *name, struct ferry_listing *l,
                      struct chunk_out *o)
{
        const struct ferry_scan_cfg *cfg = &r->sc->cfg;
        size_t len = strlen(name);
        struct ferry_stat st;
        unsigned attempt = 0;
        int rc;
        if (left_out(r, dir->pd, name, NULL))
                return 0; /* --files-from lists nothing here: no stat */
        int64_t t0 = now_ns();
        do
                rc = ferry_fsio_statat(dirfd(dir->d), name, &st);
        while (rc && scan_retry(cfg, rc, &attempt));
        note_stat_time(r->sc, now_ns() - t0);
        if (rc == ENOENT)
                return 0; /* vanished while we read: not there */
        if (rc)
                return rc;
        bool is_dir = S_ISDIR(st.mode);
        if (left_out(r, dir->pd, name, &st) ||
            ferry_own_is_file(cfg->own, &dir->pd->st, name, &st))
                return 0;
        if (is_dir)
                return add_subdir(r, dir->pd, name, len, &st, o);
        return ferry_listing_add(l, name, len, &st);
}

static void dir_free(struct scan_dir *dir)
{
        struct ferry_scan *sc = dir->sc;
        if (dir->d)
                closedir(dir->d);
        pthread_mutex_destroy(&dir->lock);
        free(dir->pd);
        free(dir);
        scan_dir_closed(sc);
}

static void free_dirs(struct pending_dir *list)
{
        while (list) {
                struct pending_dir *n = list->next;
                free(list);
                list = n;
        }
}

/* The chunk's error into the directory's: the directory's first, then the
 * entry of the earliest chunk. Under dir->lock. */
static void merge_err(struct scan_dir *dir, const struct chunk_out *o,
                      size_t seq)
{
        if (!o->err || dir->err_dir)
                return;
        if (dir->err && !o->err_dir && seq > dir->err_seq)
                return;
        dir->err = o->err;
        dir->step = o->step;
        dir->err_dir = o->err_dir;
        dir->err_seq = seq;
}

/* Queues l (may be NULL: out of memory) as this directory's next listing
 * and drops one reference; then pushes the subdirectories it named. */
static void finish_chunk(struct scan_dir *dir, struct ferry_listing *l,
                         struct chunk_out *o, size_t seq)
{
        struct ferry_scan *sc = dir->sc;
        bool sent = false;
        pthread_mutex_lock(&dir->lock);
        merge_err(dir, o, seq);
        bool last = --dir->refs == 0;
        if (!l && (last || !dir->first_sent))
                l = ferry_listing_new(dir->pd->path, dir->pd->len, 1);
        if (l) {
                if (!dir->first_sent) {
                        l->first = true;
                        l->dir_st = dir->pd->st;
                }
                dir->seen += l->n;
                if (last) {
                        l->open_err = dir->err;
                        l->open_step = dir->step;
                        /* a read cut short by a stop is not the whole
                         * directory: its unread rows are not removed */
                        l->last = !atomic_load(sc->cfg.stop);
                        l->seen = dir->seen;
                }
                if (l->n || l->first || last) {
                        sent = ferry_queue_push(sc->cfg.inbox, l) ==
                               FERRY_QUEUE_OK;
                        if (!sent)
                                ferry_listing_free(l);
                        dir->first_sent = dir->first_sent || sent;
                } else {
                        ferry_listing_free(l);
                        sent = true; /* the first one went before */
                }
        }
        pthread_mutex_unlock(&dir->lock);
        if (sent)
                scan_push_dirs(sc, o->subdirs);
        else
                free_dirs(o->subdirs);
        if (last)
                dir_free(dir);
}

static struct stat_chunk *chunk_new(struct scan_dir *dir, size_t cap)
{
        struct stat_chunk *c = malloc(sizeof(*c));
        if (c)
                *c = (struct stat_chunk){.dir = dir, .cap = cap};
        return c;
}

static void chunk_free(struct stat_chunk *c)
{
        free(c->names);
        free(c);
}

/* Appends a name of len bytes, its NUL included. 0 or ENOMEM. */
static int chunk_put(struct stat_chunk *c, const char *name, size_t len)
{
        if (c->len + len > c->names_cap) {
                size_t cap = c->names_cap ? 2 * c->names_cap : 512;
                while (cap < c->len + len)
                        cap *= 2;
                char *p = realloc(c->names, cap);
                if (!p)
                        return ENOMEM;
                c->names = p;
                c->names_cap = cap;
        }
        memcpy(c->names + c->len, name, len);
        c->len += len;
        c->n++;
        return 0;
}

void scan_run_chunk(struct scan_reader *r, struct stat_chunk *c)
{
        struct scan_dir *dir = c->dir;
        struct chunk_out o = {0};
        struct ferry_listing *l =
                ferry_listing_new(dir->pd->path, dir->pd->len, c->n ? c->n : 1);
        if (!l)
                set_err(&o, ENOMEM, FERRY_STEP_READDIR, true);
        const char *name = c->names;
        for (size_t i = 0; l && i < c->n; i++, name += strlen(name) + 1) {
                if (atomic_load(r->sc->cfg.stop))
                        break;
                int rc = read_entry(r, dir, name, l, &o);
                if (rc == ENOMEM) {
                        set_err(&o, rc, FERRY_STEP_READDIR, true);
                        break;
                }
                if (rc) /* one entry failed; report and go on */
                        set_err(&o, rc, FERRY_STEP_STAT, false);
        }
        finish_chunk(dir, l, &o, c->seq);
        chunk_free(c);
}

void scan_drop_chunk(struct stat_chunk *c)
{
        struct scan_dir *dir = c->dir;
        pthread_mutex_lock(&dir->lock);
        bool last = --dir->refs == 0;
        pthread_mutex_unlock(&dir->lock);
        if (last)
                dir_free(dir);
        chunk_free(c);
}

/* Gives c a reference of its own and its place in the directory. */
static void take_ref(struct stat_chunk *c)
{
        struct scan_dir *dir = c->dir;
        pthread_mutex_lock(&dir->lock);
        dir->refs++;
        c->seq = dir->next_seq++;
        pthread_mutex_unlock(&dir->lock);
}

static void offer(struct scan_reader *r, struct stat_chunk *c);

/* While stats are slow, cuts c down to one stat chunk and offers the rest
 * in stat chunks (short of memory, c keeps them). */
static void spread(struct scan_reader *r, struct stat_chunk *c)
{
        size_t per = r->sc->stat_chunk;
        if (c->n <= per || !scan_stats_slow(r->sc))
                return;
        size_t pos = 0;
        for (size_t i = 0; i < per; i++)
                pos += strlen(c->names + pos) + 1;
        size_t keep_end = pos;
        while (pos < c->len) {
                struct stat_chunk *p = chunk_new(c->dir, per);
                while (p && p->n < per && pos < c->len) {
                        size_t len = strlen(c->names + pos) + 1;
                        if (chunk_put(p, c->names + pos, len))
                                break;
                        pos += len;
                }
                bool short_of_memory = !p || (p->n < per && pos < c->len);
                if (p && p->n) {
                        c->n -= p->n;
                        offer(r, p);
                } else if (p) {
                        chunk_free(p);
                }
                if (short_of_memory) { /* the rest stays with c */
                        memmove(c->names + keep_end, c->names + pos,
                                c->len - pos);
                        keep_end += c->len - pos;
                        break;
                }
        }
        c->len = keep_end;
}

/* A chunk of its own to the pool while stats are slow (spread first);
 * else, or when the queue is full, stat'ed here. */
static void offer(struct scan_reader *r, struct stat_chunk *c)
{
        spread(r, c);
        take_ref(c);
        if (!scan_stats_slow(r->sc) || !scan_offer_chunk(r->sc, c))
                scan_run_chunk(r, c);
}

/* No descriptor (EMFILE, ENFILE) is waited out, not counted as an attempt
 * and not reported as the directory's error unless the wait runs out. */
static bool wait_for_fds(const struct ferry_scan_cfg *cfg, int err,
                         int64_t *since)
{
        return !atomic_load(cfg->stop) && ferry_fsio_fd_wait(since, err);
}

static int open_dir(const struct ferry_scan_cfg *cfg,
                    const struct pending_dir *pd, DIR **out)
{
        unsigned attempt = 0;
        int64_t since = 0;
        int fd = -1, err;
        do
                err = ferry_fsio_open_dir(cfg->srcfd, pd->path, &fd);
        while (err && (scan_retry(cfg, err, &attempt) ||
                       wait_for_fds(cfg, err, &since)));
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
static struct dirent *next_entry(const struct ferry_scan_cfg *cfg, DIR *d,
                                 int *err)
{
        unsigned attempt = 0;
        for (;;) {
                int fault = ferry_fsio_fault(FSIO_READDIR);
                errno = 0;
                struct dirent *de = fault ? NULL : readdir(d);
                *err = fault ? fault : de ? 0 : errno;
                if (de || !*err || !scan_retry(cfg, *err, &attempt))
                        return de;
        }
}

/* Full chunks of file names a reader keeps until the names of its
 * subdirectories are stat'ed; more are handed out as they fill. */
#define HOLD_CHUNKS 8

/* The names of one directory being read, by what readdir says they are:
 * subdirectories (DT_DIR, and DT_UNKNOWN, which may be one) are stat'ed
 * first, so the walk goes deeper while the files are stat'ed. */
struct names {
        struct stat_chunk *dirs, *files; /* filling */
        struct stat_chunk *held;         /* full chunks of files */
        size_t n_held;
};

/* A chunk the reader stats itself (what spread cuts off aside), with a
 * reference of its own. */
static void run_own(struct scan_reader *r, struct stat_chunk *c)
{
        spread(r, c);
        take_ref(c);
        scan_run_chunk(r, c);
}

/* Adds name to its chunk; a full chunk is handed out or held. ENOMEM. */
static int add_name(struct scan_reader *r, struct scan_dir *dir,
                    struct names *nm, const struct dirent *de)
{
        bool maybe_dir = de->d_type == DT_DIR || de->d_type == DT_UNKNOWN;
        struct stat_chunk **slot = maybe_dir ? &nm->dirs : &nm->files;
        if (!*slot && !(*slot = chunk_new(dir, r->sc->cfg.chunk)))
                return ENOMEM;
        struct stat_chunk *c = *slot;
        if (chunk_put(c, de->d_name, strlen(de->d_name) + 1))
                return ENOMEM;
        if (c->n < c->cap)
                return 0;
        *slot = NULL;
        if (!maybe_dir && nm->n_held < HOLD_CHUNKS) {
                c->next = nm->held;
                nm->held = c;
                nm->n_held++;
        } else {
                offer(r, c);
        }
        return 0;
}

/* Reads every name of dir into nm; the directory's error into o. */
static void read_all(struct scan_reader *r, struct scan_dir *dir,
                     struct names *nm, struct chunk_out *o)
{
        const struct ferry_scan_cfg *cfg = &r->sc->cfg;
        while (!atomic_load(cfg->stop)) {
                int rerr;
                struct dirent *de = next_entry(cfg, dir->d, &rerr);
                if (!de) {
                        if (rerr)
                                set_err(o, rerr, FERRY_STEP_READDIR, true);
                        return;
                }
                const char *name = de->d_name;
                if (name[0] == '.' &&
                    (!name[1] || (name[1] == '.' && !name[2])))
                        continue;
                if (add_name(r, dir, nm, de)) {
                        set_err(o, ENOMEM, FERRY_STEP_READDIR, true);
                        return;
                }
        }
}

/* Reads dir's names and stats them: the subdirectories' first, then the
 * held chunks go to the pool, and what no other thread took, the reader
 * stats itself; its last chunk carries its reference and the error. */
static void read_names(struct scan_reader *r, struct scan_dir *dir)
{
        struct names nm = {0};
        struct chunk_out o = {0};
        read_all(r, dir, &nm, &o);
        if (nm.dirs)
                run_own(r, nm.dirs);
        while (nm.held) {
                struct stat_chunk *c = nm.held;
                nm.held = c->next;
                offer(r, c);
        }
        struct stat_chunk *c = nm.files ? nm.files : chunk_new(dir, 1);
        if (!c) {
                set_err(&o, ENOMEM, FERRY_STEP_READDIR, true);
                finish_chunk(dir, NULL, &o, SIZE_MAX);
                return;
        }
        pthread_mutex_lock(&dir->lock);
        c->seq = dir->next_seq++;
        merge_err(dir, &o, c->seq); /* the directory's: before any entry's */
        pthread_mutex_unlock(&dir->lock);
        spread(r, c);
        struct stat_chunk *mine;
        while ((mine = scan_reclaim_chunk(r->sc, dir)))
                scan_run_chunk(r, mine);
        scan_run_chunk(r, c);
}

/* The one listing of a directory that is not read: first, and last unless
 * err says why it could not be (DST's root is never last). */
static void send_unread(struct ferry_scan *sc, const struct pending_dir *pd,
                        int err, bool last)
{
        struct ferry_listing *l = ferry_listing_new(pd->path, pd->len, 1);
        if (!l)
                return;
        l->first = true;
        l->dir_st = pd->st;
        l->open_err = err;
        l->open_step = FERRY_STEP_OPENDIR;
        l->last = last && !atomic_load(sc->cfg.stop);
        if (ferry_queue_push(sc->cfg.inbox, l) != FERRY_QUEUE_OK)
                ferry_listing_free(l);
}

void scan_read_dir(struct scan_reader *r, struct pending_dir *pd)
{
        struct ferry_scan *sc = r->sc;
        DIR *d = NULL;
        int err = 0;
        if (ferry_own_is_dst(sc->cfg.own, &pd->st))
                send_unread(sc, pd, ELOOP, false); /* DST: not read */
        else if (pd->other_fs)
                send_unread(sc, pd, 0, true); /* read whole: empty */
        else if ((err = open_dir(&sc->cfg, pd, &d)))
                send_unread(sc, pd, err, true);
        struct scan_dir *dir = d ? calloc(1, sizeof(*dir)) : NULL;
        if (d && !dir) {
                closedir(d);
                send_unread(sc, pd, ENOMEM, true);
        }
        if (!dir) {
                free(pd);
                scan_dir_closed(sc);
                return;
        }
        pthread_mutex_init(&dir->lock, NULL);
        dir->sc = sc;
        dir->pd = pd;
        dir->d = d;
        dir->refs = 1; /* the reader's */
        read_names(r, dir);
}
