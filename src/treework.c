/*
 * treework.c - the end-of-run tree work on DST (treework.h): the DST
 * operations of one row (the only copy of each: remove_temp, delete_file,
 * delete_dir, apply_dir), run by a worker or the coordinator's thread, and
 * the coordinator's window of jobs that hands them out as soon as nothing
 * below them is unfinished, and gives them back in the order they came.
 */
#define _GNU_SOURCE
#include "treework.h"

#include "config.h"
#include "copy.h"
#include "fsio.h"
#include "queue.h"
#include "workers.h"
#include "xattr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- a worker's part: one row's DST operations --------------------------- */

/* A pending row that the scan no longer sees may have left a temp file. */
static void remove_temp(const struct ferry_tree_cfg *cfg,
                        struct ferry_tree_job *t)
{
        char tmp[NAME_MAX + 1];
        int dfd = -1;
        ferry_copy_temp_name(t->name, t->it.id, tmp);
        if (!ferry_fsio_open_dir(cfg->dstfd, t->dir, &dfd))
                ferry_fsio_unlinkat(dfd, tmp, 0);
        ferry_fsio_close(&dfd);
}

/* Deletes the copy of the removed file row, dir/name in DST, when it is
 * what ferry put there (rule 9); t->found says what it found. */
static void delete_file(const struct ferry_tree_cfg *cfg,
                        struct ferry_tree_job *t)
{
        struct ferry_stat st;
        enum ferry_dst_delete out = DD_DELETED;
        if (ferry_fence_passed(cfg->fence)) {
                t->found = DD_ERROR;
                t->rc = ECANCELED;
                return;
        }
        int dfd = -1, rc = ferry_fsio_open_dir(cfg->dstfd, t->dir, &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, t->name, &st);
        /* ferry's own file (the manifest kept in DST) is not the copy the
         * row describes; a directory at the name is SRC's new one, or not
         * ferry's to remove */
        if (rc)
                out = DD_ERROR;
        else if (ferry_own_is_file(cfg->own, NULL, t->name, &st))
                out = DD_OWN;
        else if (S_ISDIR(st.mode))
                out = DD_GONE;
        else if (!ferry_copy_matches(&t->it.dst, &st))
                out = DD_CHANGED;
        else if (ferry_fence_passed(cfg->fence)) { /* again, after the stat */
                out = DD_ERROR;
                rc = ECANCELED;
        } else if ((rc = ferry_fsio_unlinkat(dfd, t->name, 0)))
                out = DD_ERROR;
        else if (cfg->fsync_deletes)
                t->sync_rc = ferry_fsio_fsync(dfd);
        ferry_fsio_close(&dfd);
        /* no entry, or no directory where its parent was (SRC's
         * directory became a file, copied over DST's tree): gone */
        if (out == DD_ERROR && (rc == ENOENT || rc == ENOTDIR))
                out = DD_GONE;
        t->found = out;
        t->rc = rc;
}

/* Removes the removed directory from DST, when it is empty (and, in a
 * shared job, before its fence). */
static void delete_dir(const struct ferry_tree_cfg *cfg,
                       struct ferry_tree_job *t)
{
        if (ferry_fence_passed(cfg->fence)) {
                t->rc = ECANCELED;
                return;
        }
        /* from its parent, opened as every DST directory is (no symbolic
         * link on the way: one put in place of a directory of the tree
         * must not lead the rmdir out of DST) */
        const char *slash = strrchr(t->dir, '/');
        char *parent = strndup(t->dir, slash ? (size_t)(slash - t->dir) : 0);
        int fd = -1;
        t->rc = !parent ? ENOMEM : ferry_fsio_open_dir(cfg->dstfd, parent, &fd);
        free(parent);
        if (!t->rc)
                t->rc = ferry_fsio_rmdirat(fd, slash ? slash + 1 : t->dir);
        /* a file or a symbolic link where it or its parent was (SRC's
         * directory became a file, copied over it): gone */
        if (t->rc == ENOTDIR)
                t->rc = ENOENT;
        if (!t->rc && cfg->fsync_deletes)
                t->sync_rc = ferry_fsio_fsync(fd);
        ferry_fsio_close(&fd);
}

/* Reads the xattrs of SRC's directory t->row.path (opened on its own,
 * never followed) into xa. *opened false when it cannot be opened (gone,
 * or unreadable: the scan reports SRC's directories, this is DST's work):
 * then DST's xattrs are left as they are and none is claimed applied. */
static int read_src_dir_xattrs(const struct ferry_tree_cfg *cfg,
                               const struct ferry_tree_job *t,
                               struct ferry_xattrs *xa, bool *opened)
{
        int sfd = -1;
        *opened = !ferry_fsio_open_dir(cfg->srcfd, t->row.path, &sfd);
        int rc =
                *opened ? ferry_xattrs_read_fd(
                                  xa, sfd, 0, ferry_meta_xattr_keep(&cfg->meta))
                        : 0;
        ferry_fsio_close(&sfd);
        return rc;
}

/* SRC's metadata onto the DST directory fd, in place: a directory made
 * under a default ACL inherits it, one made by an earlier run has its
 * own xattrs. */
static void apply_dir_meta(const struct ferry_tree_cfg *cfg,
                           struct ferry_tree_job *t, int fd,
                           const struct ferry_stat *st)
{
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        bool want = cfg->meta.xattrs || cfg->meta.acls, opened = false;
        int xrc = want ? read_src_dir_xattrs(cfg, t, &xa, &opened) : 0;
        t->has_xdigest = want && opened && !xrc;
        t->xdigest = t->has_xdigest ? ferry_xattrs_digest(&xa) : 0;
        struct ferry_meta_target mt = {fd, -1, NULL, true, NULL};
        t->rc = ferry_meta_apply(&cfg->meta, &mt, st,
                                 t->has_xdigest ? &xa : NULL, &t->applied,
                                 &t->step);
        if (xrc && !t->rc) {
                t->rc = xrc;
                t->step = FERRY_STEP_XATTR_READ;
        }
        ferry_xattrs_release(&xa);
}

/* Makes the directory row in DST (and its parents), and gives it SRC's
 * owner, mode, xattrs and ACLs and times as cfg says; t->step is the step
 * that failed. */
static void apply_dir_once(const struct ferry_tree_cfg *cfg,
                           struct ferry_tree_job *t)
{
        const struct ferry_dir_row *it = &t->row;
        struct ferry_copy_dirs d = {cfg->srcfd, cfg->dstfd, cfg->names};
        int fd = -1;
        t->step = FERRY_STEP_MKDIR;
        t->sync_rc = 0;
        t->rc = ferry_copy_make_dst_dir(&d, it->path, &fd, t->why,
                                        sizeof(t->why));
        if (!t->rc) {
                struct ferry_stat st = {.mode = S_IFDIR | it->mode,
                                        .uid = it->uid,
                                        .gid = it->gid,
                                        .mtime = it->mtime,
                                        .atime = it->mtime};
                apply_dir_meta(cfg, t, fd, &st);
        }
        /* --durability=file: the directory's entries (made, deleted) and
         * its metadata, made durable here instead of by a syncfs */
        if (fd >= 0 && cfg->fsync_dirs)
                t->sync_rc = ferry_fsio_fsync(fd);
        ferry_fsio_close(&fd);
}

/* apply_dir_once, again once a descriptor comes free when there was none
 * (EMFILE, ENFILE: the tree's other jobs, run by the pool, hold some, and
 * a lowered limit may leave fewer than they need at once): no directory's
 * fault, so not its failure (t34 E drops the limit to 24 mid-run). Doing
 * it again is harmless: the directory is there, the metadata set again. */
static void apply_dir(const struct ferry_tree_cfg *cfg,
                      struct ferry_tree_job *t)
{
        int64_t since = 0;
        for (;;) {
                apply_dir_once(cfg, t);
                int err = ferry_fsio_out_of_fds(t->rc) ? t->rc : t->sync_rc;
                /* a stop (Ctrl-C) does not wait out the descriptor wait */
                if (!ferry_fsio_out_of_fds(err) ||
                    (t->cancel && atomic_load(t->cancel)) ||
                    !ferry_fsio_fd_wait(&since, err))
                        return;
        }
}

void ferry_treework_run(struct ferry_tree_job *t)
{
        const struct ferry_tree_cfg *cfg = t->cfg;
        if (t->cancel && atomic_load(t->cancel))
                return; /* its result is not reported */
        switch (t->op) {
        case TREE_TEMP: remove_temp(cfg, t); break;
        case TREE_DEL_FILE: delete_file(cfg, t); break;
        case TREE_DEL_DIR: delete_dir(cfg, t); break;
        case TREE_APPLY_DIR: apply_dir(cfg, t); break;
        }
}

/* ---- the coordinator's window ------------------------------------------- */

enum { J_WAITING, J_RUNNING, J_DONE };

/* The jobs run on the calling thread while DST answers fast (a local
 * disk: handing a job to another thread costs more than doing it); once
 * the jobs of a probe (PROBE_JOBS of them) have taken SLOW_NS each on
 * average (a DST, or a SRC whose directory xattrs are read, with a round
 * trip per operation), the pool takes over. It does so as soon as their
 * time passes that budget, not after the last of them: at 5 ms a round
 * trip, 32 directories one after the other cost 0.16 s (b5). */
#define PROBE_JOBS 32
#define SLOW_NS    300000LL

struct ferry_treework {
        struct ferry_tree_cfg cfg;
        ferry_tree_done_fn done;
        void *ctx;
        struct ferry_queue work, inbox;
        struct ferry_workers *pool;   /* borrowed */
        bool started, inline_only;    /* the pool serves; no threads: here */
        long long probe_ns;           /* time of the probe's jobs */
        unsigned probed;              /* jobs in it */
        bool stopped;                 /* done said stop */
        atomic_bool cancel;           /* workers: skip what is left */
        struct ferry_tree_job **ring; /* cap jobs, oldest at head */
        size_t cap, head, n;
        size_t running;
};

/* Is job q's directory below job p's? */
static bool below(const struct ferry_tree_job *q,
                  const struct ferry_tree_job *p)
{
        if (!p->len)
                return q->len > 0; /* everything is below SRC's root */
        return q->len > p->len && q->dir[p->len] == '/' &&
               !memcmp(q->dir, p->dir, p->len);
}

static bool ordered(const struct ferry_tree_job *t)
{
        return t->op == TREE_DEL_DIR || t->op == TREE_APPLY_DIR;
}

static struct ferry_tree_job *at(const struct ferry_treework *tw, size_t i)
{
        return tw->ring[(tw->head + i) % tw->cap];
}

static void job_free(struct ferry_tree_job *t)
{
        if (!t)
                return;
        free(t->dir);
        free(t->name);
        free(t);
}

static long long mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

enum ferry_tree_probe ferry_treework_probe(long long probe_ns, unsigned probed)
{
        if (probe_ns >= PROBE_JOBS * SLOW_NS)
                return PROBE_SLOW;
        return probed < PROBE_JOBS ? PROBE_GOING : PROBE_FAST;
}

/* Runs t here and says whether DST looks slow enough for the pool. */
static bool run_here(struct ferry_treework *tw, struct ferry_tree_job *t)
{
        long long t0 = mono_ns();
        ferry_treework_run(t);
        tw->probe_ns += mono_ns() - t0;
        enum ferry_tree_probe p =
                ferry_treework_probe(tw->probe_ns, ++tw->probed);
        if (p == PROBE_GOING)
                return false;
        tw->probe_ns = 0;
        tw->probed = 0;
        return p == PROBE_SLOW;
}

static bool start_pool(struct ferry_treework *tw)
{
        tw->started = true;
        ferry_workers_want(tw->pool, UINT_MAX); /* threads start on demand */
        if (ferry_workers_count(tw->pool) > 1) {
                ferry_workers_serve_tree(tw->pool, &tw->work, &tw->inbox);
                return true;
        }
        tw->inline_only = true;
        return false;
}

static void finished(struct ferry_treework *tw, struct ferry_tree_job *t);

/* Hands t out (or runs it here without threads); skips it once stopped. */
static void dispatch(struct ferry_treework *tw, struct ferry_tree_job *t)
{
        if (tw->stopped || t->skip) {
                finished(tw, t);
                return;
        }
        if (tw->started && !tw->inline_only) {
                t->state = J_RUNNING;
                tw->running++;
                if (ferry_queue_push(&tw->work, t) == FERRY_QUEUE_OK)
                        return;
                tw->running--; /* cannot happen: the queue holds them all */
        }
        if (run_here(tw, t) && !tw->started)
                start_pool(tw);
        finished(tw, t);
}

/* t is done: what waited for it may go. */
static void finished(struct ferry_treework *tw, struct ferry_tree_job *t)
{
        t->state = J_DONE;
        if (!ordered(t))
                return;
        size_t i = 0;
        while (i < tw->n && at(tw, i) != t)
                i++;
        for (i++; i < tw->n; i++) {
                struct ferry_tree_job *y = at(tw, i);
                if (y->state != J_DONE && ordered(y) && below(t, y) &&
                    --y->blockers == 0 && y->state == J_WAITING)
                        dispatch(tw, y);
        }
}

/* Gives back the finished jobs at the head of the window, in order. */
static void give_back(struct ferry_treework *tw)
{
        while (tw->n && at(tw, 0)->state == J_DONE) {
                struct ferry_tree_job *t = at(tw, 0);
                tw->ring[tw->head] = NULL;
                tw->head = (tw->head + 1) % tw->cap;
                tw->n--;
                if (!tw->stopped && !tw->done(tw->ctx, t)) {
                        tw->stopped = true;
                        atomic_store(&tw->cancel, true);
                }
                job_free(t);
        }
}

/* Waits for one job back from the workers. */
static void wait_one(struct ferry_treework *tw)
{
        void *p;
        if (!tw->running ||
            ferry_queue_pop(&tw->inbox, &p, -1) != FERRY_QUEUE_OK)
                return;
        tw->running--;
        finished(tw, p);
}

int ferry_treework_new(const struct ferry_tree_cfg *cfg,
                       struct ferry_workers *pool, ferry_tree_done_fn done,
                       void *ctx, struct ferry_treework **out)
{
        struct ferry_treework *tw = calloc(1, sizeof(*tw));
        if (!tw)
                return ENOMEM;
        tw->cfg = *cfg;
        tw->pool = pool;
        tw->done = done;
        tw->ctx = ctx;
        /* room past the workers, for directories waiting below others */
        size_t n = ferry_workers_count(pool);
        tw->cap = n * 8 < 256 ? 256 : n * 8;
        tw->ring = calloc(tw->cap, sizeof(*tw->ring));
        if (!tw->ring || ferry_queue_init(&tw->work, tw->cap + 1)) {
                free(tw->ring);
                free(tw);
                return ENOMEM;
        }
        if (ferry_queue_init(&tw->inbox, tw->cap + 1)) {
                ferry_queue_release(&tw->work);
                free(tw->ring);
                free(tw);
                return ENOMEM;
        }
#ifdef FERRY_TESTING
        /* t41, test_treework: the pool from the first job, on any DST */
        const char *env = getenv("FERRY_TREE_POOL");
        if (env && *env == '1')
                start_pool(tw);
#endif
        *out = tw;
        return 0;
}

/* Puts job t in the window, and hands it out once nothing below it is
 * unfinished. */
static void add_job(struct ferry_treework *tw, struct ferry_tree_job *t)
{
        t->len = strlen(t->dir);
        t->state = J_WAITING;
        t->cfg = &tw->cfg;
        t->cancel = &tw->cancel;
        for (size_t i = 0; ordered(t) && i < tw->n; i++) {
                const struct ferry_tree_job *p = at(tw, i);
                if (p->state != J_DONE && ordered(p) && below(p, t))
                        t->blockers++;
        }
        tw->ring[(tw->head + tw->n) % tw->cap] = t;
        tw->n++;
        if (!t->blockers)
                dispatch(tw, t);
        give_back(tw);
}

/* A new job, once the window has room for it; NULL: out of memory. */
static struct ferry_tree_job *new_job(struct ferry_treework *tw,
                                      enum ferry_tree_op op, bool skip)
{
        while (tw->n == tw->cap) {
                wait_one(tw);
                give_back(tw);
        }
        struct ferry_tree_job *t = calloc(1, sizeof(*t));
        if (t) {
                t->op = op;
                t->skip = skip;
        }
        return t;
}

int ferry_treework_add_file(struct ferry_treework *tw, enum ferry_tree_op op,
                            bool skip, const struct ferry_batch *b,
                            const struct ferry_item *it)
{
        struct ferry_tree_job *t = new_job(tw, op, skip);
        if (!t || !(t->dir = strdup(ferry_batch_at(b, it->dir_off))) ||
            !(t->name = strdup(ferry_batch_at(b, it->name_off)))) {
                job_free(t);
                return ENOMEM;
        }
        t->it = *it;
        add_job(tw, t);
        return 0;
}

int ferry_treework_add_dir(struct ferry_treework *tw, enum ferry_tree_op op,
                           bool skip, const struct ferry_dir_row *d)
{
        struct ferry_tree_job *t = new_job(tw, op, skip);
        if (!t || !(t->dir = malloc(d->path_len + 1))) {
                job_free(t);
                return ENOMEM;
        }
        memcpy(t->dir, d->path, d->path_len);
        t->dir[d->path_len] = '\0';
        t->row = *d;
        t->row.path = t->dir; /* the walk's is valid until its next chunk */
        add_job(tw, t);
        return 0;
}

void ferry_treework_drain(struct ferry_treework *tw)
{
        if (!tw)
                return;
        give_back(tw);
        while (tw->n && tw->running) {
                wait_one(tw);
                give_back(tw);
        }
}

size_t ferry_treework_pending(const struct ferry_treework *tw)
{
        return tw ? tw->n : 0;
}

void ferry_treework_free(struct ferry_treework *tw)
{
        if (!tw)
                return;
        ferry_treework_drain(tw);
        if (tw->started && !tw->inline_only)
                ferry_workers_end_tree(tw->pool);
        for (size_t i = 0; i < tw->n; i++)
                job_free(at(tw, i));
        ferry_queue_close(&tw->inbox);
        ferry_queue_release(&tw->work);
        ferry_queue_release(&tw->inbox);
        free(tw->ring);
        free(tw);
}
