/*
 * journal.c - the journal thread (journal.h).
 *
 * Owns the manifest's write transaction, the inbox (listings from the
 * scanners, finished batches from the workers, finished barriers), the work
 * queue, and the barrier thread. Crash-safety rule 1 lives here: a row is
 * marked done only in on_barrier(), after the barrier thread's syncfs and
 * directory fsyncs succeeded, and the mark becomes true with the COMMIT that
 * follows. In-flight state is memory only: a crash leaves those rows pending.
 *
 * Hand-out order: pass 1 follows the scan by row id (copying overlaps the
 * scan) and skips hardlink followers; later passes, started only when every
 * result so far is committed, pick up what pass 1 could not: rows that
 * became pending behind its cursor, and followers whose first name is done.
 */
#define _GNU_SOURCE
#include "config.h"
#include "journal.h"

#include "copy.h"
#include "fsio.h"
#include "owner.h"
#include "queue.h"
#include "scan.h"
#include "treework.h"
#include "workers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define BATCH_ITEMS     32
#define BATCH_BYTES     (32ull << 20)
#define INBOX_CAP       128
#define MAX_OUTSTANDING 4096 /* items handed out but not yet committed */
#define LOW_ROWS        4096 /* changed rows waiting below the cursor */
#define BARRIER_ITEMS   2048
#define BARRIER_SECONDS 0.25
#define COMMIT_SECONDS  1.0
/* While the scan runs, scan results are committed for a hand-out at most
 * this often (each commit is an fsync of the WAL). */
#define HANDOUT_COMMIT_GAP 0.05
#define MAX_PASSES         4
#define LISTING_CHUNK      128
#define DIR_CACHE          8

struct barrier_job {
        struct ferry_msg msg;
        struct ferry_batch *list;
};

struct dir_slot {
        char *path;
        size_t len;
        int64_t id;
        bool is_new;
        bool marking;
};

struct journal {
        const struct ferry_journal_cfg *cfg;
        const struct ferry_options *opt;
        struct ferry_manifest *m;
        struct ferry_summary *sum;
        struct ferry_error *err;
        int64_t gen, run_id;
        struct ferry_queue inbox, work, barrier_q;
        bool barrier_thread_started;
        pthread_t barrier_thread;
        struct ferry_scan *scan;
        struct ferry_workers *workers;
        int work_kind;
        /* hand-out */
        enum ferry_query query;
        int pass;
        int64_t cursor;
        bool pass_gave, exhausted;
        /* rows that became pending below the first pass's cursor (changed
         * or resumed rows keep their ids): handed out by id, so that a
         * re-run copies them while it scans, not after */
        int64_t low[LOW_ROWS];
        size_t n_low;
        unsigned in_flight, max_in_flight;
        size_t outstanding;
        /* results waiting for the barrier */
        struct ferry_batch *done_head, *done_tail;
        size_t done_items;
        double done_since;
        struct barrier_job *barrier;
        bool barrier_failed;
        int tree_sync_err; /* --durability=file: a directory's fsync failed */
        bool scan_done;
        int stop_code;
        mode_t umask;          /* the process umask, for --no-perms */
        int64_t written_since; /* see written_since() */
        int64_t run_started;   /* time(NULL) when this run began */
        bool dirty;            /* scan rows not committed yet */
        bool fresh;            /* among them, rows that may be handed out */
        struct dir_slot dcache[DIR_CACHE];
        unsigned dcache_next;
        struct ferry_progress prog;
        double t0, last_prog, last_commit;
        char *pathbuf;
        struct fold_dir *fold; /* FOLD_DIRS, for --delete on a
                                  case-insensitive DST */
        unsigned fold_next;
        size_t pathcap;
        /* --delete's guard (check_delete) and --max-delete */
        char src_id[64];      /* SRC's root now, "dev:ino" */
        char src_was[64];     /* the one recorded, when it differs */
        uint64_t dirs_seen;   /* directories the scan listed, SRC not counted */
        uint64_t to_delete;   /* removed rows that --delete would delete */
        bool delete_refused;  /* check_delete said no */
        uint64_t delete_held; /* entries kept by --max-delete */
        int delete_code;      /* FERRY_EDELETE, or 0 */
        struct ferry_treework *tree; /* finish_tree's DST work */
};

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_error(struct journal *j, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* Records the first fatal error and asks every thread to stop. */
static void set_error(struct journal *j, int code, const char *fmt, ...)
{
        if (!j->stop_code || j->stop_code == FERRY_EINTR) {
                j->stop_code = code;
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(j->err->msg, sizeof(j->err->msg), fmt, ap);
                va_end(ap);
        }
        atomic_store(j->cfg->stop, true);
}

static void manifest_error(struct journal *j)
{
        set_error(j, FERRY_EMANIFEST, "%s", ferry_manifest_errmsg(j->m));
}

static const char *join_path(struct journal *j, const char *dir,
                             const char *name, size_t *len)
{
        size_t dl = strlen(dir), nl = strlen(name);
        if (dl + nl + 2 > j->pathcap) {
                size_t cap = (dl + nl + 2) * 2;
                char *p = realloc(j->pathbuf, cap);
                if (!p)
                        return NULL;
                j->pathbuf = p;
                j->pathcap = cap;
        }
        size_t n = 0;
        if (dl) {
                memcpy(j->pathbuf, dir, dl);
                j->pathbuf[dl] = '/';
                n = dl + 1;
        }
        memcpy(j->pathbuf + n, name, nl + 1);
        *len = n + nl;
        return j->pathbuf;
}

static void emit(struct journal *j, enum ferry_event ev, const char *dir,
                 const char *name, const char *detail)
{
        if (!j->opt->event)
                return;
        size_t len = 0;
        const char *path = join_path(j, dir, name, &len);
        if (path)
                j->opt->event(ev, path, len, detail, j->opt->cb_arg);
}

static void emit_item(struct journal *j, enum ferry_event ev,
                      const struct ferry_batch *b, const struct ferry_item *it,
                      const char *detail)
{
        emit(j, ev, ferry_batch_at(b, it->dir_off),
             ferry_batch_at(b, it->name_off), detail);
}

static void commit(struct journal *j)
{
        /* a dry run's one transaction is rolled back at the end */
        if (j->stop_code == FERRY_EMANIFEST || j->opt->dry_run)
                return;
        ferry_fsio_crashpoint("before_commit");
        if (ferry_manifest_commit(j->m) || ferry_manifest_begin(j->m)) {
                manifest_error(j);
                return;
        }
        ferry_fsio_crashpoint("after_commit");
        j->last_commit = now();
        j->dirty = j->fresh = false;
}

static void progress(struct journal *j, bool final)
{
        if (!j->opt->progress)
                return;
        j->prog.elapsed = now() - j->t0;
        j->prog.scanning = !j->scan_done;
        j->prog.final = final;
        j->opt->progress(&j->prog, j->opt->cb_arg);
        j->last_prog = now();
}

/* ---- the barrier thread ------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* fsyncs each destination directory that received a file. */
static int sync_dirs(const struct ferry_journal_cfg *cfg,
                     struct ferry_batch *list)
{
        size_t n = 0, cap = 0;
        for (struct ferry_batch *b = list; b; b = b->next)
                cap += b->n;
        /* pairs: dir id, then batch index + item index packed */
        struct ent {
                int64_t dir;
                struct ferry_batch *b;
                uint32_t off;
        } *e = malloc(cap * sizeof(*e) + 1);
        if (!e)
                return ENOMEM;
        for (struct ferry_batch *b = list; b; b = b->next)
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result == R_DONE &&
                            (!n || e[n - 1].dir != b->items[i].dir_id))
                                e[n++] = (struct ent){b->items[i].dir_id, b,
                                                      b->items[i].dir_off};
        qsort(e, n, sizeof(*e), cmp_i64);
        int rc = 0;
        for (size_t i = 0; i < n && !rc; i++) {
                if (i && e[i].dir == e[i - 1].dir)
                        continue;
                int fd = -1;
                int64_t since = 0; /* no descriptor: wait, holding none */
                do
                        rc = ferry_fsio_open_dir(
                                cfg->dstfd, ferry_batch_at(e[i].b, e[i].off),
                                &fd);
                while (rc && ferry_fsio_fd_wait(&since, rc));
                if (!rc)
                        rc = ferry_fsio_fsync(fd);
                ferry_fsio_close(&fd);
        }
        free(e);
        return rc;
}

static bool any_done(const struct ferry_batch *list)
{
        for (const struct ferry_batch *b = list; b; b = b->next)
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result == R_DONE)
                                return true;
        return false;
}

static int run_barrier(const struct ferry_journal_cfg *cfg,
                       struct ferry_batch *list)
{
        if (!any_done(list) || cfg->opt->durability == FERRY_DURABLE_NONE)
                return 0;
        ferry_fsio_crashpoint("before_barrier");
        int rc = 0;
        if (cfg->opt->durability == FERRY_DURABLE_BATCH)
                rc = ferry_fsio_syncfs(cfg->dstfd);
        if (!rc)
                rc = sync_dirs(cfg, list);
        if (!rc)
                ferry_fsio_crashpoint("after_barrier");
        return rc;
}

static void *barrier_main(void *arg)
{
        struct journal *j = arg;
        void *p;
        while (ferry_queue_pop(&j->barrier_q, &p, -1) == FERRY_QUEUE_OK) {
                struct barrier_job *job = p;
                job->msg.err = run_barrier(j->cfg, job->list);
                ferry_queue_push(&j->inbox, job);
        }
        return NULL;
}

/* ---- results ----------------------------------------------------------- */

static void reason(const struct ferry_batch *b, const struct ferry_item *it,
                   char *buf, size_t size)
{
        if (it->why_off)
                snprintf(buf, size, "%s", ferry_batch_at(b, it->why_off));
        else if (it->err)
                snprintf(buf, size, "%s: %s", it->what ? it->what : "copy",
                         strerror(it->err));
        else
                snprintf(buf, size, "%s", it->what ? it->what : "failed");
}

/* ENOSPC or EDQUOT on the destination: the whole run stops (exit 11). */
static bool dst_full(int err)
{
        return err == ENOSPC || err == EDQUOT;
}

static void stop_full(struct journal *j)
{
        set_error(j, FERRY_ENOSPC,
                  "destination is full: free some space and run the same "
                  "command to resume");
}

static void note_low(struct journal *j, int64_t id);
static bool stop_for_dst(struct journal *j, int err);

/*
 * An entry of another type in the way of it (R_IN_WAY): removed when it is
 * ferry's, and the row stays pending for a later pass to copy; left alone
 * otherwise, and the row fails with why.
 */
static bool clear_way(struct journal *j, const struct ferry_batch *b,
                      const struct ferry_item *it, char *why, size_t size)
{
        char *what = NULL;
        struct ferry_dst_rec claim;
        int rc = ferry_owner_clear_way(j->m, j->cfg->dstfd, j->cfg->names,
                                       ferry_batch_at(b, it->dir_off),
                                       ferry_batch_at(b, it->name_off), it->err,
                                       true, &what, &claim, why, size);
        if (!rc && claim.type &&
            ferry_manifest_file_set_dst(j->m, it->id, &claim)) {
                manifest_error(j);
                rc = EIO;
        }
        if (!rc && what) {
                j->sum->files_deleted++;
                emit(j, FERRY_EV_DELETED, "", what, NULL);
        }
        free(what);
        if (rc && rc != EEXIST && stop_for_dst(j, rc))
                return true; /* DST failed: the row stays pending */
        if (rc)
                return false;
        note_low(j, it->id);
        return true;
}

/* fsio waited a minute for a descriptor and none came free: a leak, or the
 * system's file table is full. Failing the remaining files one by one
 * would help nobody; the rows stay pending. */
static void stop_no_fds(struct journal *j, int err)
{
        if (atomic_load(j->cfg->stop))
                return; /* stopping anyway: the wait was cut short */
        struct rlimit rl;
        char limit[64] = "";
        if (err == EMFILE && !getrlimit(RLIMIT_NOFILE, &rl))
                snprintf(limit, sizeof(limit), "; the limit is %llu",
                         (unsigned long long)rl.rlim_cur);
        set_error(j, FERRY_EINTERNAL,
                  "no file descriptor came free (%s%s): stopped; close files "
                  "elsewhere or raise the limit (ulimit -n), then run the "
                  "same command to resume",
                  strerror(err), limit);
}

/* DST itself failed (rule 10; why from ferry_copy_dst_failed): the whole
 * run stops (exit 12) and the rows it did not finish stay pending. */
static void stop_dst_failed(struct journal *j, int why)
{
        set_error(j, FERRY_EDSTFAIL,
                  "the destination '%s' failed: %s; stopped, nothing lost: "
                  "run the same command when it is back",
                  j->opt->dst, strerror(why));
}

/* An operation on DST failed with err: true when that stops the run, as a
 * full DST or as DST itself failing (its root no longer answers). */
static bool stop_for_dst(struct journal *j, int err)
{
        if (dst_full(err)) {
                stop_full(j);
                return true;
        }
        int why = ferry_copy_dst_suspect(err)
                          ? ferry_copy_dst_failed(j->cfg->dstfd)
                          : 0;
        if (why)
                stop_dst_failed(j, why);
        return why != 0;
}

/* A worker's result that stops the run: true for those, which are never
 * recorded (the row stays pending). */
static bool stops_run(struct journal *j, const struct ferry_item *it)
{
        switch (it->result) {
        case R_NOSPACE: stop_full(j); return true;
        case R_DSTFAIL: stop_dst_failed(j, it->err); return true;
        default: return false;
        }
}

static int record_copy(struct journal *j, const struct ferry_batch *b,
                       const struct ferry_item *it, bool durable,
                       int64_t *last_dir)
{
        char why[512];
        int rc = 0;
        if (it->result == R_IN_WAY && clear_way(j, b, it, why, sizeof(why)))
                return 0; /* stays pending: copied again in a later pass */
        switch (it->result) {
        case R_DONE:
                if (!durable)
                        return 0; /* stays pending: copied again later */
                rc = ferry_manifest_file_done(j->m, it);
                if (!rc && *last_dir != it->dir_id)
                        rc = ferry_manifest_dir_touch(j->m, it->dir_id);
                *last_dir = it->dir_id;
                j->sum->files_copied++;
                j->sum->bytes_copied += it->bytes;
                j->prog.bytes_done += it->bytes;
                emit_item(j, FERRY_EV_COPIED, b, it, NULL);
                break;
        case R_IN_WAY: /* why says why it stays */
        case R_FAILED:
        case R_CHANGED:
        case R_MISMATCH:
        case R_MISSING:
                if (it->result != R_IN_WAY)
                        reason(b, it, why, sizeof(why));
                rc = ferry_manifest_file_set_state(j->m, it->id, ST_FAILED,
                                                   why);
                if (!rc && !(rc = ferry_manifest_elect_leader(j->m, it->id)))
                        j->fresh = true;
                j->sum->files_failed++;
                j->prog.errors++;
                emit_item(j, FERRY_EV_FAILED, b, it, why);
                break;
        case R_VANISHED:
                rc = ferry_manifest_file_set_state(j->m, it->id, ST_VANISHED,
                                                   "vanished from the source");
                if (!rc && !(rc = ferry_manifest_elect_leader(j->m, it->id)))
                        j->fresh = true;
                j->sum->files_vanished++;
                emit_item(j, FERRY_EV_VANISHED, b, it, "vanished");
                break;
        case R_NOSPACE:
        case R_DSTFAIL: stops_run(j, it); return 0;
        case R_NOFDS: stop_no_fds(j, it->err); return 0;
        case R_NONE: return 0;
        }
        j->prog.files_done++;
        return rc;
}

static void free_list(struct ferry_batch *list)
{
        while (list) {
                struct ferry_batch *next = list->next;
                ferry_batch_free(list);
                list = next;
        }
}

#define UNCERTAIN_KEY "dst_uncertain_since"

/* A barrier failed: files of this run are in place in DST without their
 * done marks (and a power cut may have emptied them). Until a run ends
 * with exit 0, what appeared in DST since this run began is taken for
 * ferry's own leftovers (ferry_copy_is_ours). */
static void note_uncertain(struct journal *j)
{
        char buf[32];
        if (ferry_manifest_note(j->m, UNCERTAIN_KEY, buf, sizeof(buf)))
                return;
        if (buf[0])
                return; /* an earlier run's start is earlier still */
        snprintf(buf, sizeof(buf), "%lld", (long long)j->run_started);
        if (ferry_manifest_set_note(j->m, UNCERTAIN_KEY, buf))
                manifest_error(j);
}

/* The earliest start of a run that may have left copies without done
 * marks: one that did not end well (manifest.h), or whose barrier
 * failed. */
static int written_since(struct journal *j)
{
        char buf[32];
        if (ferry_manifest_interrupted_since(j->m, j->run_id,
                                             &j->written_since) ||
            ferry_manifest_note(j->m, UNCERTAIN_KEY, buf, sizeof(buf)))
                return -1;
        long long t = buf[0] ? atoll(buf) : 0;
        if (t > 0 && (!j->written_since || t < j->written_since))
                j->written_since = t;
        return 0;
}

static void on_barrier(struct journal *j, struct barrier_job *job)
{
        j->barrier = NULL;
        bool durable = job->msg.err == 0;
        /* a full or failed DST says so in the run's one message */
        if (ferry_fsio_out_of_fds(job->msg.err))
                stop_no_fds(j, job->msg.err); /* not the barrier's fault */
        else if (!durable && !stop_for_dst(j, job->msg.err) &&
                 !j->barrier_failed) {
                j->barrier_failed = true;
                note_uncertain(j);
                if (j->opt->event)
                        j->opt->event(
                                FERRY_EV_WARNING, "", 0,
                                "durability barrier on the destination "
                                "failed; those files will be copied again",
                                j->opt->cb_arg);
        }
        for (struct ferry_batch *b = job->list; b; b = b->next) {
                int64_t last_dir = -1;
                for (size_t i = 0; i < b->n && j->stop_code != FERRY_EMANIFEST;
                     i++)
                        if (record_copy(j, b, &b->items[i], durable, &last_dir))
                                manifest_error(j);
                j->outstanding -= b->n;
        }
        free_list(job->list);
        free(job);
        commit(j);
}

static void start_barrier(struct journal *j)
{
        struct barrier_job *job = calloc(1, sizeof(*job));
        if (!job) {
                set_error(j, FERRY_EINTERNAL, "out of memory");
                return;
        }
        job->msg.kind = MSG_BARRIER;
        job->list = j->done_head;
        j->done_head = j->done_tail = NULL;
        j->done_items = 0;
        j->barrier = job;
        ferry_queue_push(&j->barrier_q, job);
}

static void maybe_barrier(struct journal *j)
{
        if (j->barrier || !j->done_head)
                return;
        if (j->done_items >= BARRIER_ITEMS || j->in_flight == 0 ||
            now() - j->done_since >= BARRIER_SECONDS || j->stop_code)
                start_barrier(j);
}

/* --verify found this DST file differing from its copy: what DST holds now
 * is recorded as ferry's, so the next run repairs it (rule 9 would keep a
 * file that changed since ferry copied it). */
static int claim_mismatch(struct journal *j, const struct ferry_batch *b,
                          const struct ferry_item *it)
{
        struct ferry_stat st;
        int dfd = -1,
            rc = ferry_fsio_open_dir(j->cfg->dstfd,
                                     ferry_batch_at(b, it->dir_off), &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, ferry_batch_at(b, it->name_off),
                                       &st);
        ferry_fsio_close(&dfd);
        if (rc)
                return 0; /* nothing to claim: the copy replaces nothing */
        struct ferry_dst_rec rec = {it->type, st.size, st.mtime};
        return ferry_manifest_file_set_dst(j->m, it->id, &rec);
}

static void record_verify(struct journal *j, const struct ferry_batch *b,
                          const struct ferry_item *it)
{
        char why[512];
        int rc = 0;
        j->prog.files_done++;
        j->prog.bytes_done += it->st.size;
        switch (it->result) {
        case R_DONE: j->sum->verified++; return;
        case R_NOFDS: stop_no_fds(j, it->err); return;
        case R_MISMATCH:
        case R_MISSING:
                snprintf(why, sizeof(why), "verify: %s %s", it->what,
                         it->result == R_MISSING ? "is missing" : "differs");
                rc = ferry_manifest_file_set_state(j->m, it->id, ST_PENDING,
                                                   why);
                if (!rc && it->result == R_MISMATCH &&
                    !strcmp(it->what, "destination"))
                        rc = claim_mismatch(j, b, it);
                /* a missing file's directories may be made anew */
                if (!rc && it->result == R_MISSING)
                        rc = ferry_manifest_dir_chain_touch(j->m, it->id);
                j->sum->verified++;
                j->sum->mismatched++;
                emit_item(j,
                          it->result == R_MISSING ? FERRY_EV_MISSING
                                                  : FERRY_EV_MISMATCH,
                          b, it, it->what);
                break;
        default:
                reason(b, it, why, sizeof(why));
                j->sum->files_failed++;
                j->prog.errors++;
                emit_item(j, FERRY_EV_FAILED, b, it, why);
                break;
        }
        if (rc)
                manifest_error(j);
}

static void on_batch(struct journal *j, struct ferry_batch *b)
{
        j->in_flight--;
        /* a full or failed DST stops the hand-out now, not after the
         * barrier; the results wait for it (record_copy) */
        for (size_t i = 0; i < b->n; i++)
                if (stops_run(j, &b->items[i]))
                        break;
        if (b->work != WORK_COPY) {
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result != R_NONE &&
                            b->items[i].result != R_DSTFAIL &&
                            b->items[i].result != R_NOSPACE)
                                record_verify(j, b, &b->items[i]);
                j->outstanding -= b->n;
                ferry_batch_free(b);
                return;
        }
        b->next = NULL;
        if (j->done_tail)
                j->done_tail->next = b;
        else
                j->done_head = b;
        if (!j->done_items)
                j->done_since = now();
        j->done_tail = b;
        j->done_items += b->n;
}

/* ---- scan results ------------------------------------------------------ */

static struct dir_slot *dcache_find(struct journal *j, const char *path,
                                    size_t len)
{
        for (unsigned i = 0; i < DIR_CACHE; i++) {
                struct dir_slot *s = &j->dcache[i];
                if (s->path && s->len == len && !memcmp(s->path, path, len))
                        return s;
        }
        return NULL;
}

static void dcache_put(struct journal *j, const char *path, size_t len,
                       int64_t id, bool is_new, bool marking)
{
        struct dir_slot *s = &j->dcache[j->dcache_next++ % DIR_CACHE];
        free(s->path);
        s->path = malloc(len + 1);
        if (!s->path)
                return;
        memcpy(s->path, path, len + 1);
        s->len = len;
        s->id = id;
        s->is_new = is_new;
        s->marking = marking;
}

static int listing_dir(struct journal *j, const struct ferry_listing *l,
                       int64_t *id, bool *is_new, bool *marking)
{
        if (l->first) {
                int rc = ferry_manifest_dir_upsert(j->m, l->path, l->path_len,
                                                   &l->dir_st, j->gen, id,
                                                   is_new, marking);
                if (!rc)
                        dcache_put(j, l->path, l->path_len, *id, *is_new,
                                   *marking);
                return rc;
        }
        struct dir_slot *s = dcache_find(j, l->path, l->path_len);
        if (s) {
                *id = s->id;
                *is_new = s->is_new;
                *marking = s->marking;
                return 0;
        }
        *is_new = false;
        return ferry_manifest_dir_find(j->m, l->path, l->path_len, id, marking);
}

/* A new file in a known directory may have replaced a directory: the rows
 * below that one are gone from SRC (before DST's directory is replaced). */
static int replaced_dir(struct journal *j, const struct ferry_listing *l,
                        const struct ferry_entry *e)
{
        size_t len;
        const char *path = join_path(j, l->path, l->arena + e->name_off, &len);
        if (!path)
                return -1;
        return ferry_manifest_subtree_removed(j->m, path, len, j->gen);
}

static void count_entry(struct journal *j, const struct ferry_listing *l,
                        const struct ferry_entry *e, enum ferry_upsert res)
{
        j->sum->files_seen++;
        bool special = !S_ISREG(e->st.mode) && !S_ISLNK(e->st.mode);
        if (special) {
                j->sum->files_skipped++;
                if (res != UP_UNCHANGED)
                        emit(j, FERRY_EV_SKIPPED, l->path,
                             l->arena + e->name_off,
                             "special file (fifo, socket or device) skipped");
                return;
        }
        if (res == UP_UNCHANGED)
                j->sum->files_unchanged++;
        if (res == UP_UNCHANGED || res == UP_RESUMED)
                return; /* resumed rows were counted at the start */
        j->prog.files_total++;
        if (S_ISREG(e->st.mode))
                j->prog.bytes_total += e->st.size;
}

/* A directory the scan could not read: say so, record why, and keep what
 * the manifest knew below it as seen, so nothing there looks deleted. */
static int scan_error(struct journal *j, const struct ferry_listing *l,
                      int64_t dir)
{
        char why[256];
        snprintf(why, sizeof(why), "cannot read directory: %s",
                 strerror(l->open_err));
        j->sum->scan_errors++;
        j->prog.errors++;
        emit(j, FERRY_EV_WARNING, "", l->path_len ? l->path : ".", why);
        int rc = ferry_manifest_dir_set_error(j->m, dir, why);
        return rc ? rc
                  : ferry_manifest_keep_subtree(j->m, l->path, l->path_len,
                                                j->gen);
}

/* A directory of SRC is DST's root (a bind mount, which the checks before
 * the run did not see): stop before anything below it is listed, or each
 * run copies the last copy again, one level deeper. */
static void nested_dst(struct journal *j, const struct ferry_listing *l)
{
        emit(j, FERRY_EV_WARNING, "", l->path_len ? l->path : ".",
             "this directory of the source is the destination: not read");
        set_error(j, FERRY_EPATH,
                  "destination '%s' is inside the source '%s' (a directory "
                  "of the source is the destination under another name)",
                  j->opt->dst, j->opt->src);
}

/* Rows below the cursor are never handed out by the first pass, so each
 * is handed out once here; the later passes start when nothing is in
 * flight. Beyond LOW_ROWS they wait for the second pass. */
static void note_low(struct journal *j, int64_t id)
{
        if (id > 0 && id <= j->cursor && j->n_low < LOW_ROWS)
                j->low[j->n_low++] = id;
}

/*
 * SRC's identity, the dev:ino of its root (as the scan found it), as DST's
 * (check_destination). A mount that failed leaves the empty mount point;
 * another file system, or a directory made anew, has another identity:
 * check_delete refuses to delete on their word. The identity alone proves
 * nothing (a device number changes when the same file system is only
 * mounted again), so it is weighed with what the scan finds gone, and the
 * one recorded stays until a run finds it the same tree (record_source).
 */
static int check_source(struct journal *j, const struct ferry_stat *st)
{
        snprintf(j->src_id, sizeof(j->src_id), "%llu:%llu",
                 (unsigned long long)st->dev, (unsigned long long)st->ino);
        char was[sizeof(j->src_was)];
        int rc = ferry_manifest_note(j->m, "src_identity", was, sizeof(was));
        if (rc || !was[0])
                return rc ? rc
                          : ferry_manifest_set_note(j->m, "src_identity",
                                                    j->src_id);
        if (strcmp(was, j->src_id))
                memcpy(j->src_was, was, sizeof(was));
        return 0;
}

static void on_listing(struct journal *j, struct ferry_listing *l)
{
        int64_t dir = 0;
        bool is_new = false, marking = true;
        if (l->first && ferry_own_is_dst(j->cfg->own, &l->dir_st)) {
                nested_dst(j, l);
                ferry_listing_free(l);
                return;
        }
        j->dirty = true;
        int rc = listing_dir(j, l, &dir, &is_new, &marking);
        if (l->first && l->path_len)
                j->dirs_seen++;
        else if (!rc && l->first)
                rc = check_source(j, &l->dir_st);
        if (!rc && !dir)
                rc = -1; /* a chunk whose directory is unknown: cannot be */
        for (size_t i = 0; i < l->n && !rc; i++) {
                const struct ferry_entry *e = &l->entries[i];
                enum ferry_upsert res = 0;
                rc = ferry_manifest_file_upsert(
                        j->m, dir, is_new, marking, l->arena + e->name_off,
                        e->name_len, &e->st, j->gen, j->opt->hard_links, &res);
                if (res == UP_NEW || res == UP_CHANGED)
                        j->fresh = true;
                if ((res == UP_CHANGED || res == UP_RESUMED) && j->pass == 1)
                        note_low(j, ferry_manifest_upserted(j->m));
                if (!rc && (res == UP_NEW || res == UP_CHANGED) && !is_new)
                        rc = replaced_dir(j, l, e);
                if (!rc)
                        count_entry(j, l, e, res);
        }
        if (!rc && ferry_fsio_out_of_fds(l->open_err)) {
                stop_no_fds(j, l->open_err); /* not the directory's fault */
                rc = ferry_manifest_keep_subtree(j->m, l->path, l->path_len,
                                                 j->gen);
        } else if (!rc && l->open_err)
                rc = scan_error(j, l, dir);
        else if (!rc && l->first)
                rc = ferry_manifest_dir_set_error(j->m, dir, NULL);
        if (!rc && l->last && !l->open_err && !j->stop_code &&
            !atomic_load(j->cfg->stop))
                rc = ferry_manifest_dir_listed(j->m, dir, j->gen, marking,
                                               l->seen);
        if (rc)
                manifest_error(j);
        ferry_listing_free(l);
}

static void human(uint64_t n, char *buf, size_t size)
{
        const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)n;
        int u = 0;
        while (v >= 1024 && u < 5) {
                v /= 1024;
                u++;
        }
        snprintf(buf, size, "%.1f %s", v, unit[u]);
}

/* Stops at once when what is left to copy cannot fit. */
static void check_space(struct journal *j)
{
        uint64_t files, bytes;
        struct statvfs vfs;
        if (ferry_manifest_pending(j->m, j->gen, &files, &bytes)) {
                manifest_error(j);
                return;
        }
        if (fstatvfs(j->cfg->dstfd, &vfs) || !vfs.f_blocks)
                return;
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        if (bytes <= avail)
                return;
        /* sizes are logical: sparse files and compression may still fit,
         * so warn; a real ENOSPC stops the run cleanly (exit 11) */
        char need[32], have[32], why[160];
        human(bytes, need, sizeof(need));
        human(avail, have, sizeof(have));
        snprintf(why, sizeof(why),
                 "the destination has %s free but %s are still to copy: it "
                 "may fill up",
                 have, need);
        emit(j, FERRY_EV_WARNING, "", "", why);
}

static void on_scan_done(struct journal *j)
{
        j->scan_done = true;
        if (j->work_kind != WORK_COPY || j->stop_code)
                return;
        /* The scan is complete: rows of directories it did not see are gone
         * from SRC, and hardlink groups whose first name is gone get another
         * before their other names are handed out (the next pass). */
        if (ferry_manifest_mark_unseen(j->m, j->gen) ||
            ferry_manifest_elect_leaders(j->m)) {
                manifest_error(j);
                return;
        }
        j->dirty = j->fresh = true;
        if (!j->opt->dry_run)
                check_space(j);
}

/* Every message starts with a struct ferry_msg; p is the whole message. */
static void handle(struct journal *j, void *p)
{
        const struct ferry_msg *msg = p;
        switch (msg->kind) {
        case MSG_LISTING: on_listing(j, p); break;
        case MSG_SCAN_DONE: on_scan_done(j); break;
        case MSG_BATCH: on_batch(j, p); break;
        case MSG_BARRIER: on_barrier(j, p); break;
        }
}

/* ---- hand-out ---------------------------------------------------------- */

static bool all_committed(const struct journal *j)
{
        return !j->in_flight && !j->barrier && !j->done_head;
}

static struct ferry_batch *fill(struct journal *j, enum ferry_query q)
{
        struct ferry_batch *b = ferry_batch_new(j->work_kind, BATCH_ITEMS);
        if (!b) {
                set_error(j, FERRY_EINTERNAL, "out of memory");
                return NULL;
        }
        if (ferry_manifest_fill(j->m, q, j->gen, &j->cursor, b, BATCH_ITEMS,
                                BATCH_BYTES)) {
                manifest_error(j);
                ferry_batch_free(b);
                return NULL;
        }
        if (!b->n) {
                ferry_batch_free(b);
                return NULL;
        }
        return b;
}

/*
 * Rule 1 wants a row's pending state committed before its data is touched:
 * a changed row that is still done in the committed manifest would be a lie
 * after a crash, and a new row's id (which names its temp file) could be
 * lost. So nothing is handed out while new or changed rows are uncommitted;
 * they are committed early for a hand-out, at most every 50 ms while the
 * scan runs (each commit is an fsync: a re-run that finds one changed file
 * in most directories would otherwise commit once per listing) and at once
 * when it is done. Other scan results (unchanged rows, directory marks)
 * wait for the group commit: a no-op re-run commits about once a second.
 */
static bool ready_to_hand_out(struct journal *j)
{
        if (!j->fresh)
                return true; /* nothing uncommitted could be handed out */
        if (j->stop_code ||
            (!j->scan_done && now() - j->last_commit < HANDOUT_COMMIT_GAP))
                return false;
        commit(j);
        return !j->stop_code && !j->dirty;
}

/* The rows noted by note_low, a batch of them at a time. */
static struct ferry_batch *fill_low(struct journal *j)
{
        if (!j->n_low)
                return NULL;
        struct ferry_batch *b = ferry_batch_new(j->work_kind, BATCH_ITEMS);
        if (!b) {
                set_error(j, FERRY_EINTERNAL, "out of memory");
                return NULL;
        }
        uint64_t bytes = 0; /* as fill's limit: big files spread out */
        while (j->n_low && b->n < BATCH_ITEMS && bytes < BATCH_BYTES) {
                int64_t id = j->low[--j->n_low];
                size_t before = b->n;
                if (ferry_manifest_fill(j->m, Q_ONE_PENDING, j->gen, &id, b, 1,
                                        UINT64_MAX)) {
                        manifest_error(j);
                        break;
                }
                if (b->n > before)
                        bytes += b->items[before].st.size;
        }
        if (!b->n || j->stop_code) {
                ferry_batch_free(b);
                return NULL;
        }
        return b;
}

static struct ferry_batch *next_copy_batch(struct journal *j)
{
        struct ferry_batch *b;
        if (!ready_to_hand_out(j))
                return NULL;
        if (j->pass == 1) {
                b = fill_low(j);
                if (!b)
                        b = fill(j, Q_FIRST_PASS);
                if (b || !j->scan_done || !all_committed(j))
                        return b;
                j->pass = 2;
                j->cursor = 0;
                j->pass_gave = false;
        }
        /* the next pass starts at once: returning NULL here would leave
         * the loop waiting for a message that is not coming (up to 100 ms
         * at the end of every run) */
        for (;;) {
                if ((b = fill(j, Q_NEXT_PASS))) {
                        j->pass_gave = true;
                        return b;
                }
                if (!all_committed(j) || j->stop_code)
                        return NULL;
                if (!j->pass_gave || j->pass >= MAX_PASSES) {
                        j->exhausted = true;
                        return NULL;
                }
                j->pass++;
                j->cursor = 0;
                j->pass_gave = false;
        }
}

static struct ferry_batch *next_batch(struct journal *j)
{
        if (j->work_kind == WORK_COPY)
                return next_copy_batch(j);
        struct ferry_batch *b = fill(j, Q_VERIFY);
        if (!b)
                j->exhausted = true;
        return b;
}

static void refill(struct journal *j)
{
        while (!j->stop_code && !j->exhausted &&
               j->in_flight < j->max_in_flight &&
               j->outstanding < MAX_OUTSTANDING) {
                struct ferry_batch *b = next_batch(j);
                if (!b)
                        return;
                j->outstanding += b->n;
                j->in_flight++;
                ferry_queue_push(&j->work, b);
        }
}

/* ---- the loop ---------------------------------------------------------- */

static bool finished(const struct journal *j)
{
        bool done = j->stop_code || (j->scan_done && j->exhausted);
        return done && all_committed(j);
}

static void check_stop(struct journal *j)
{
        if (atomic_load(j->cfg->stop) && !j->stop_code) {
                j->stop_code = FERRY_EINTR;
                snprintf(j->err->msg, sizeof(j->err->msg),
                         "interrupted: resume with the same command");
        }
}

static void tick(struct journal *j)
{
        double t = now();
        if (t - j->last_prog >= 1.0)
                progress(j, false);
        if (!j->barrier && t - j->last_commit >= COMMIT_SECONDS)
                commit(j);
}

static void run_loop(struct journal *j)
{
        for (;;) {
                check_stop(j);
                refill(j);
                if (finished(j))
                        return;
                maybe_barrier(j);
                void *msg;
                int rc = ferry_queue_pop(&j->inbox, &msg, 100);
                for (int k = 0; rc == FERRY_QUEUE_OK && k < 64; k++) {
                        handle(j, msg);
                        rc = ferry_queue_try_pop(&j->inbox, &msg);
                }
                if (rc == FERRY_QUEUE_OK)
                        handle(j, msg);
                tick(j);
        }
}

/* ---- set-up and tear-down ---------------------------------------------- */

static int start_threads(struct journal *j, bool scan, bool work)
{
        int rc = 0;
        if (work) {
                struct ferry_copy_cfg cc = {
                        .srcfd = j->cfg->srcfd,
                        .dstfd = j->cfg->dstfd,
                        .perms = j->opt->perms,
                        .owner = j->opt->owner,
                        .times = j->opt->times,
                        .fsync_each = j->opt->durability == FERRY_DURABLE_FILE,
                        .retries = j->opt->retries,
                        .stop = j->cfg->stop,
                        .names = j->cfg->names,
                };
                cc.umask = j->umask;
                cc.written_since = j->written_since;
                rc = ferry_workers_start(&cc, j->opt->jobs, &j->work, &j->inbox,
                                         &j->workers);
                if (!rc && j->work_kind == WORK_COPY) {
                        rc = pthread_create(&j->barrier_thread, NULL,
                                            barrier_main, j);
                        j->barrier_thread_started = rc == 0;
                }
        }
        if (!rc && scan) {
                struct ferry_scan_cfg sc = {
                        .srcfd = j->cfg->srcfd,
                        .excludes = j->cfg->excludes,
                        .own = j->cfg->own,
                        .inbox = &j->inbox,
                        .stop = j->cfg->stop,
                        .threads = j->opt->scanners ? j->opt->scanners : 1,
                        .retries = j->opt->retries,
                        .chunk = LISTING_CHUNK,
                };
                int src_err;
                rc = ferry_scan_start(&sc, &j->scan, &src_err);
                if (src_err) {
                        set_error(j, FERRY_EPATH,
                                  "cannot read the source directory: %s",
                                  strerror(src_err));
                        return rc;
                }
        }
        if (rc)
                set_error(j, FERRY_EINTERNAL, "cannot start threads: %s",
                          strerror(rc));
        return rc;
}

static void drain_inbox(struct journal *j)
{
        void *p;
        while (ferry_queue_try_pop(&j->inbox, &p) == FERRY_QUEUE_OK) {
                const struct ferry_msg *msg = p;
                if (msg->kind == MSG_LISTING) {
                        ferry_listing_free(p);
                } else if (msg->kind == MSG_BATCH) {
                        ferry_batch_free(p);
                } else if (msg->kind == MSG_BARRIER) {
                        struct barrier_job *job = p;
                        free_list(job->list);
                        free(job);
                }
        }
}

static void stop_threads(struct journal *j)
{
        ferry_queue_close(&j->work);
        ferry_workers_idle(j->workers); /* joined in journal_release */
        ferry_queue_close(&j->barrier_q);
        if (j->barrier_thread_started)
                pthread_join(j->barrier_thread, NULL);
        j->barrier_thread_started = false;
        atomic_store(j->cfg->stop, true); /* a scan cut short must end */
        ferry_queue_close(&j->inbox);
        ferry_scan_join(j->scan);
        j->scan = NULL;
        drain_inbox(j);
        free_list(j->done_head);
        j->done_head = j->done_tail = NULL;
}

static int journal_init(struct journal *j, const struct ferry_journal_cfg *cfg,
                        struct ferry_summary *sum, struct ferry_error *err,
                        int work_kind)
{
        memset(j, 0, sizeof(*j));
        memset(sum, 0, sizeof(*sum));
        j->cfg = cfg;
        j->opt = cfg->opt;
        j->m = cfg->m;
        j->sum = sum;
        j->err = err;
        j->work_kind = work_kind;
        j->pass = 1;
        j->max_in_flight = cfg->opt->jobs * 2;
        j->t0 = j->last_prog = j->last_commit = now();
        j->umask = umask(022); /* read it: no thread runs yet */
        umask(j->umask);
        if (ferry_queue_init(&j->inbox, INBOX_CAP) ||
            ferry_queue_init(&j->work, j->max_in_flight + 1) ||
            ferry_queue_init(&j->barrier_q, 2)) {
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        return 0;
}

/* ---- other spellings in SRC (case-insensitive DST) ---------------------- */

/* A directory of SRC read once: its names sorted without case, for
 * the check below; a few are kept, as removed rows come in id order and so
 * mostly directory by directory. Bigger directories are not kept. */
#define FOLD_DIRS 4
#define FOLD_MAX  65536

struct fold_dir {
        char *path;   /* relative to SRC, "" for SRC */
        char **names; /* n, sorted by ferry_names_casecmp */
        size_t n;
        bool unknown; /* could not be read */
        bool big;     /* more than FOLD_MAX names: read again per row */
};

static int cmp_fold(const void *a, const void *b)
{
        return ferry_names_casecmp(*(char *const *)a, *(char *const *)b);
}

static void fold_free(struct fold_dir *f)
{
        for (size_t i = 0; i < f->n; i++)
                free(f->names[i]);
        free(f->names);
        free(f->path);
        memset(f, 0, sizeof(*f));
}

static void fold_read(struct journal *j, struct fold_dir *f)
{
        int fd = -1;
        DIR *d = NULL;
        if (ferry_fsio_open_dir(j->cfg->srcfd, f->path, &fd) ||
            !(d = fdopendir(fd))) {
                ferry_fsio_close(&fd);
                f->unknown = true;
                return;
        }
        size_t cap = 0, max = FOLD_MAX;
#ifdef FERRY_TESTING
        const char *env = getenv("FERRY_FOLD_MAX"); /* t28: the other path */
        if (env)
                max = (size_t)strtoul(env, NULL, 10);
#endif
        struct dirent *de;
        while ((de = readdir(d))) {
                if (f->n == max) {
                        f->big = true;
                        break;
                }
                if (f->n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        char **p = realloc(f->names, ncap * sizeof(*p));
                        if (!p)
                                break;
                        f->names = p;
                        cap = ncap;
                }
                if (!(f->names[f->n] = strdup(de->d_name)))
                        break;
                f->n++;
        }
        f->unknown = de != NULL && !f->big; /* no memory */
        closedir(d);
        qsort(f->names, f->n, sizeof(*f->names), cmp_fold);
}

/* fold_lookup for a directory too big to keep: read it through. */
static int fold_scan(struct journal *j, const char *dir, const char *name,
                     bool *exact)
{
        int fd = -1;
        DIR *d = NULL;
        if (ferry_fsio_open_dir(j->cfg->srcfd, dir, &fd) ||
            !(d = fdopendir(fd))) {
                ferry_fsio_close(&fd);
                return 1;
        }
        int other = 0;
        struct dirent *de;
        while (!other && (de = readdir(d)))
                if (!ferry_names_casecmp(de->d_name, name)) {
                        other = strcmp(de->d_name, name) != 0;
                        *exact |= !other;
                }
        closedir(d);
        return other;
}

/* In SRC's directory dir: 1 when it holds another spelling of name (or
 * cannot tell), else 0 with *exact saying whether it holds name itself. */
static int fold_lookup(struct journal *j, const char *dir, const char *name,
                       bool *exact)
{
        if (!j->fold && !(j->fold = calloc(FOLD_DIRS, sizeof(*j->fold))))
                return 1;
        struct fold_dir *f = NULL;
        for (unsigned i = 0; i < FOLD_DIRS && !f; i++)
                if (j->fold[i].path && !strcmp(j->fold[i].path, dir))
                        f = &j->fold[i];
        if (!f) {
                f = &j->fold[j->fold_next++ % FOLD_DIRS];
                fold_free(f);
                if (!(f->path = strdup(dir)))
                        return 1;
                fold_read(j, f);
        }
        if (f->unknown)
                return 1;
        *exact = false;
        if (f->big)
                return fold_scan(j, dir, name, exact);
        char **hit =
                bsearch(&name, f->names, f->n, sizeof(*f->names), cmp_fold);
        if (!hit)
                return 0;
        char **lo = hit, **hi = hit;
        while (lo > f->names && !ferry_names_casecmp(lo[-1], name))
                lo--;
        while (hi + 1 < f->names + f->n && !ferry_names_casecmp(hi[1], name))
                hi++;
        for (char **p = lo; p <= hi; p++) {
                if (strcmp(*p, name))
                        return 1;
                *exact = true;
        }
        return 0;
}

/* On a case-insensitive DST, the DST path of a removed row may now hold the
 * copy of another SRC file whose path differs only by case (a file or a
 * directory renamed by case): deleting it would delete that copy. True when
 * SRC holds another spelling of any component of the row's path under the
 * spelling of the ones before it, or when that cannot be told: keeping a
 * stale copy is better than deleting a live one. Folding as in names.c
 * (ferry_names_casecmp). */
static bool src_holds_other_spelling(struct journal *j, const char *dir,
                                     const char *name)
{
        if (!ferry_names_case_insensitive(j->cfg->names))
                return false;
        size_t len;
        const char *joined = join_path(j, dir, name, &len);
        char *path = joined ? strdup(joined) : NULL;
        if (!path)
                return true;
        bool other = false;
        for (char *c = path;;) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                if (c > path)
                        c[-1] = '\0'; /* path is now the parent of c */
                bool exact = false;
                other = fold_lookup(j, c > path ? path : "", c, &exact) != 0;
                if (c > path)
                        c[-1] = '/';
                if (other || !exact || !slash)
                        break;
                *slash = '/';
                c = slash + 1;
        }
        free(path);
        return other;
}

static void journal_release(struct journal *j)
{
        ferry_workers_join(j->workers);
        j->workers = NULL;
        ferry_queue_release(&j->inbox);
        ferry_queue_release(&j->work);
        ferry_queue_release(&j->barrier_q);
        for (unsigned i = 0; i < DIR_CACHE; i++)
                free(j->dcache[i].path);
        for (unsigned i = 0; j->fold && i < FOLD_DIRS; i++)
                fold_free(&j->fold[i]);
        free(j->fold);
        free(j->pathbuf);
        j->sum->seconds = now() - j->t0;
}

/* Done files looked at in DST at the start of every run. */
#define DST_SAMPLE 32
/* Coarsest mtime a destination keeps: FAT's 2 s (exFAT: 10 ms, exfat-fuse
 * whole seconds). */
#define MTIME_SLACK_NS 2000000000LL

struct dst_sample {
        struct journal *j;
        unsigned checked; /* files whose state in DST could be told */
        unsigned missing; /* not there, or not the copy (type, size) */
        unsigned differs; /* there, with another mtime */
        int64_t missing_ids[DST_SAMPLE];
};

/* Looks for this done file in DST as ferry left it: its type, size, and
 * mtime when times are kept. An error other than "not there" tells
 * nothing (a network DST may fail a stat now and then). */
static bool sample_one(const struct ferry_done_file *f, void *arg)
{
        struct dst_sample *ds = arg;
        struct ferry_stat st;
        int dfd = -1, rc = ferry_fsio_open_dir(ds->j->cfg->dstfd, f->dir, &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, f->name, &st);
        ferry_fsio_close(&dfd);
        if (rc && rc != ENOENT && rc != ENOTDIR)
                return true;
        ds->checked++;
        bool reg = f->type == FT_REG;
        /* another type or size: not the copy (a clamped time, or a run
         * with --no-times, changes neither) */
        if (rc || (reg ? !S_ISREG(st.mode) : !S_ISLNK(st.mode)) ||
            st.size != f->size) {
                if (ds->missing < DST_SAMPLE)
                        ds->missing_ids[ds->missing] = f->id;
                ds->missing++;
        } else if (reg && ds->j->opt->times &&
                   !ferry_time_near(st.mtime, f->mtime, MTIME_SLACK_NS)) {
                ds->differs++;
        }
        return true;
}

/*
 * Does DST still hold what the manifest calls done? A DST deleted or
 * swapped behind ferry's back holds none of it: copy it all again. Its
 * root's dev:ino (recorded) does not tell: it changes when the same DST is
 * only mounted again (a USB disk gets another device number; exfat-fuse
 * numbers inodes anew when the kernel forgets one), where copying days of
 * data again would be wrong, and it stays when DST is emptied in place or
 * deleted and made again with its old inode number (ext4 hands a freed
 * inode out again at once), where trusting it would leave DST empty. So
 * every run looks at a sample of the done files in DST (a few dozen
 * stats). Under a new identity, any file missing or different means
 * another DST. Under the same identity, an mtime that differs is no proof
 * (a file system may clamp times it cannot store, a run with --no-times
 * left copy times), so DST counts as replaced when most of the sample is
 * missing or of another type or size; when only some is, those files (and
 * the metadata of their directories) are copied again and a warning points
 * to --verify for the rest. Silent when all is there: a re-plugged disk
 * would warn on every run.
 */
static int check_destination(struct journal *j)
{
        struct ferry_stat st;
        if (j->cfg->dstfd < 0 || ferry_fsio_fstat(j->cfg->dstfd, &st))
                return 0;
        char id[64];
        bool changed;
        snprintf(id, sizeof(id), "%llu:%llu", (unsigned long long)st.dev,
                 (unsigned long long)st.ino);
        if (ferry_manifest_check_dst(j->m, id, &changed))
                return -1;
        struct dst_sample ds = {.j = j};
        unsigned seen;
        if (ferry_manifest_sample_done(j->m, DST_SAMPLE, sample_one, &ds,
                                       &seen))
                return -1;
        /* most of those looked at, and a quarter of the sample at least
         * (a few stats that failed with EIO leave a small denominator) */
        bool replaced =
                changed ? ds.missing + ds.differs > 0
                        : 2 * ds.missing > ds.checked && 4 * ds.missing >= seen;
        if (replaced) {
                if (ferry_manifest_reset_done(j->m))
                        return -1;
                emit(j, FERRY_EV_WARNING, "", "",
                     "the destination was replaced since the last run: "
                     "copying everything again");
                return 0;
        }
        if (!ds.missing)
                return 0;
        for (unsigned i = 0; i < ds.missing && i < DST_SAMPLE; i++)
                if (ferry_manifest_file_set_state(j->m, ds.missing_ids[i],
                                                  ST_PENDING,
                                                  "missing from the "
                                                  "destination") ||
                    ferry_manifest_dir_chain_touch(j->m, ds.missing_ids[i]))
                        return -1;
        char why[160];
        snprintf(why, sizeof(why),
                 "%u of %u copied files looked at are missing from the "
                 "destination: copying them again; ferry --verify finds "
                 "any others",
                 ds.missing, ds.checked);
        emit(j, FERRY_EV_WARNING, "", "", why);
        return 0;
}

/* Prepares the manifest for a run: new generation, failed rows retried. */
static int begin_run(struct journal *j)
{
        j->run_started = (int64_t)time(NULL);
        if (ferry_manifest_begin(j->m) ||
            ferry_manifest_run_start(j->m, j->cfg->command, &j->run_id) ||
            written_since(j) || check_destination(j) ||
            ferry_manifest_next_gen(j->m, &j->gen) ||
            ferry_manifest_retry_failed(j->m) ||
            ferry_manifest_pending(j->m, 0, &j->prog.files_total,
                                   &j->prog.bytes_total)) {
                manifest_error(j);
                return j->stop_code;
        }
        /* commit these before anything is handed out */
        j->dirty = j->fresh = true;
        return 0;
}

/* ---- after the copy: deletions and directory metadata ------------------ */

static bool protected_path(struct journal *j, const char *dir, const char *name,
                           bool is_dir)
{
        if (!j->cfg->excludes)
                return false;
        size_t len;
        const char *path = join_path(j, dir, name, &len);
        if (!path)
                return true;
        /* an excluded ancestor protects everything below it */
        char *copy = strdup(path);
        if (!copy)
                return true;
        bool hit = false;
        for (char *slash = copy; !hit;) {
                char *next = strchr(slash, '/');
                if (next)
                        *next = '\0';
                const char *base = strrchr(copy, '/');
                base = base ? base + 1 : copy;
                hit = ferry_patterns_match(j->cfg->excludes, copy, base,
                                           next ? true : is_dir);
                if (!next)
                        break;
                *next = '/';
                slash = next + 1;
        }
        free(copy);
        return hit;
}

/* --durability=file, at the end of a run: a directory changed there is
 * made durable by its own fsync (that mode never calls syncfs); the first
 * error is kept for finish_tree. */
static void sync_tree_dir(struct journal *j, int fd)
{
        int rc = ferry_fsio_fsync(fd);
        if (rc && !j->tree_sync_err)
                j->tree_sync_err = rc;
}

typedef void (*row_fn)(struct journal *j, const struct ferry_batch *b,
                       const struct ferry_item *it);
static void each_row(struct journal *j, enum ferry_query q, int64_t start,
                     row_fn fn);

/* ---- --delete's guard and --max-delete ---------------------------------- */

/* More entries than this gone at once, and more than stay, look like a
 * SRC replaced or emptied, not like a user's clean-up. */
#define DELETE_HANDFUL 100

static void count_deletable(struct journal *j, const struct ferry_batch *b,
                            const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        if (!protected_path(j, dir, name, false) &&
            !src_holds_other_spelling(j, dir, name))
                j->to_delete++;
}

/* Says in why how SRC looks replaced or emptied; false when it does not. */
static bool source_suspect(struct journal *j, char *why, size_t size)
{
        unsigned long long n = j->to_delete;
        const char *src = j->opt->src;
        if (!j->sum->files_seen) {
                snprintf(why, size,
                         "the source '%s' %s but the manifest records %llu "
                         "files copied from it (a mount that failed?)",
                         src, j->dirs_seen ? "holds no files" : "is empty", n);
                return true;
        }
        if (j->src_was[0]) {
                snprintf(why, size,
                         "the source '%s' is another directory than the one "
                         "copied (device:inode %s, was %s: another file "
                         "system mounted there, or a directory made anew?) "
                         "and %llu files copied before are not in it",
                         src, j->src_id, j->src_was, n);
                return true;
        }
        uint64_t done = 0;
        if (n <= DELETE_HANDFUL)
                return false;
        if (ferry_manifest_count_done(j->m, &done)) {
                manifest_error(j);
                return false;
        }
        if (n <= done)
                return false;
        snprintf(why, size,
                 "%llu of the %llu files copied from the source '%s' are "
                 "gone from it (a source replaced, or a mount below it that "
                 "failed?)",
                 n, n + (unsigned long long)done, src);
        return true;
}

/*
 * Before the first deletion of a --delete run: may it delete? Not when SRC
 * looks replaced or emptied while rows would be deleted: it holds nothing,
 * or its root is another directory than the one recorded, or most of what
 * ferry copied, and more than a handful, is gone at once. Then nothing is
 * deleted and the run says why and how to insist (--delete-anyway).
 */
static bool check_delete(struct journal *j)
{
        char why[768];
        j->to_delete = 0;
        each_row(j, Q_REMOVED_FILES, 0, count_deletable);
        if (j->stop_code || !j->to_delete || j->opt->delete_anyway ||
            !source_suspect(j, why, sizeof(why)))
                return !j->stop_code;
        j->delete_refused = true;
        j->delete_code = FERRY_EDELETE;
        if (!j->err->msg[0])
                snprintf(j->err->msg, sizeof(j->err->msg),
                         "--delete refused: %s; %s; use --delete-anyway to "
                         "delete them",
                         why,
                         j->opt->dry_run ? "nothing would be deleted (listed "
                                           "as not deleting)"
                                         : "nothing deleted");
        return false;
}

/* --delete refused: the rows the scan found gone get their state back, so
 * that SRC, back as it was, is neither deleted nor copied again; and SRC's
 * root, perhaps a mount point, does not give its metadata to DST's. */
static void keep_source_rows(struct journal *j)
{
        int64_t root = 0;
        if (ferry_manifest_keep_removed(j->m, j->gen) ||
            ferry_manifest_dir_find(j->m, "", 0, &root, NULL) ||
            (root && ferry_manifest_dir_defer(j->m, root)))
                manifest_error(j);
        commit(j); /* whatever becomes of DST's barrier below */
}

/* SRC's identity becomes the recorded one once a run finds the same tree
 * there: the scan (complete) found nothing gone, or --delete went ahead. */
static void record_source(struct journal *j, bool deleted)
{
        uint64_t gone = 0;
        if (!j->src_was[0] || j->stop_code || j->sum->scan_errors ||
            j->delete_refused)
                return;
        if (!deleted && ferry_manifest_count_removed(j->m, j->gen, &gone)) {
                manifest_error(j);
                return;
        }
        if (!gone && ferry_manifest_set_note(j->m, "src_identity", j->src_id))
                manifest_error(j);
}

/* Is the entry dir/name still in DST? (An error other than ENOENT: yes.) */
static bool dst_has(struct journal *j, const char *dir, const char *name)
{
        int dfd = -1, rc = ferry_fsio_open_dir(j->cfg->dstfd, dir, &dfd);
        struct ferry_stat st;
        if (!rc)
                rc = ferry_fsio_statat(dfd, name, &st);
        ferry_fsio_close(&dfd);
        return rc != ENOENT && rc != ENOTDIR;
}

/* --max-delete N, as rsync's: once N entries are deleted, every other one
 * that --delete would delete stays, listed under -v, and its row stays for
 * a later run. True when dir/name is kept so. */
static bool delete_held(struct journal *j, const char *dir, const char *name,
                        bool is_dir)
{
        if (j->opt->max_delete < 0 ||
            j->sum->files_deleted < (uint64_t)j->opt->max_delete ||
            protected_path(j, dir, name, is_dir) ||
            src_holds_other_spelling(j, dir, name) ||
            (j->cfg->dstfd >= 0 && !dst_has(j, dir, name)))
                return false;
        char why[64];
        snprintf(why, sizeof(why), "--max-delete %lld reached",
                 (long long)j->opt->max_delete);
        j->delete_held++;
        emit(j, FERRY_EV_WOULD_DELETE, dir, name, why);
        return true;
}

/* The one message of --max-delete, once the deletions are done. */
static void report_held(struct journal *j)
{
        if (!j->delete_held)
                return;
        j->delete_code = FERRY_EDELETE;
        if (!j->err->msg[0])
                snprintf(j->err->msg, sizeof(j->err->msg),
                         "--max-delete %lld reached: %llu entries %s, %llu "
                         "kept (%s); the next run with --delete goes on",
                         (long long)j->opt->max_delete,
                         (unsigned long long)j->sum->files_deleted,
                         j->opt->dry_run ? "would be deleted" : "deleted",
                         (unsigned long long)j->delete_held,
                         j->opt->dry_run ? "listed as not deleting"
                                         : "-v lists them");
}

/* --max-delete: delete_held counts what is deleted, so the deletions
 * under way are recorded first once they could reach the limit. */
static void settle_deletions(struct journal *j)
{
        if (j->opt->max_delete >= 0 &&
            j->sum->files_deleted + ferry_treework_pending(j->tree) >=
                    (uint64_t)j->opt->max_delete)
                ferry_treework_drain(j->tree);
}

/* Hands row it to the tree work (skip: no DST work, only recorded). */
static void tree_add(struct journal *j, enum ferry_tree_op op, bool skip,
                     const struct ferry_batch *b, const struct ferry_item *it)
{
        if (ferry_treework_add(j->tree, op, skip, b, it))
                set_error(j, FERRY_EINTERNAL, "out of memory");
}

static void delete_file(struct journal *j, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        settle_deletions(j);
        if (delete_held(j, dir, name, false))
                return; /* --max-delete: keep the row */
        tree_add(j, TREE_DEL_FILE,
                 protected_path(j, dir, name, false) ||
                         src_holds_other_spelling(j, dir, name),
                 b, it);
}

/* delete_file's row back from DST (treework.c's delete_file). */
static void deleted_file(struct journal *j, const struct ferry_tree_job *t)
{
        const char *dir = t->dir, *name = t->name;
        int rc = t->rc;
        if (!t->skip) {
                if (t->own)
                        emit(j, FERRY_EV_WARNING, dir, name,
                             "is ferry's manifest or lock: not deleted");
                if (t->keep)
                        emit(j, FERRY_EV_WARNING, dir, name,
                             t->it.dst.type ? "not deleted: it was changed "
                                              "since ferry copied it"
                                            : "not deleted: ferry did not "
                                              "write it");
                if (!rc && !t->own && !t->keep) {
                        j->sum->files_deleted++;
                        emit(j, FERRY_EV_DELETED, dir, name, NULL);
                        if (ferry_manifest_dir_touch(j->m, t->it.dir_id))
                                manifest_error(j);
                } else if (rc && rc != ENOENT && stop_for_dst(j, rc)) {
                        return; /* DST failed: keep the row */
                } else if (rc && rc != ENOENT) {
                        char why[256];
                        snprintf(why, sizeof(why), "cannot delete: %s",
                                 strerror(rc));
                        emit(j, FERRY_EV_WARNING, dir, name, why);
                        return; /* keep the row: try again next time */
                }
        }
        if (ferry_manifest_file_delete(j->m, t->it.id))
                manifest_error(j);
}

static void delete_dir(struct journal *j, const struct ferry_batch *b,
                       const struct ferry_item *it)
{
        const char *path = ferry_batch_at(b, it->dir_off);
        settle_deletions(j);
        if (delete_held(j, "", path, true))
                return; /* --max-delete: keep the row */
        tree_add(j, TREE_DEL_DIR,
                 protected_path(j, "", path, true) ||
                         src_holds_other_spelling(j, "", path),
                 b, it);
}

/* delete_dir's row back from DST (treework.c's delete_dir). */
static void deleted_dir(struct journal *j, const struct ferry_tree_job *t)
{
        const char *path = t->dir;
        int rc = t->rc;
        if (!t->skip) {
                if (!rc) {
                        j->sum->files_deleted++;
                        emit(j, FERRY_EV_DELETED, "", path, NULL);
                        if (t->it.dir_id &&
                            ferry_manifest_dir_touch(j->m, t->it.dir_id))
                                manifest_error(j);
                } else if (rc != ENOENT && stop_for_dst(j, rc)) {
                        return; /* DST failed: keep the row */
                } else if (rc != ENOENT) {
                        char why[256];
                        snprintf(why, sizeof(why), "directory not deleted: %s",
                                 strerror(rc));
                        emit(j, FERRY_EV_WARNING, "", path, why);
                        /* --durability=file: files deleted in it are made
                         * durable here, as no apply_dir will visit it */
                        int dfd = -1;
                        if (j->opt->durability == FERRY_DURABLE_FILE &&
                            !ferry_fsio_open_dir(j->cfg->dstfd, path, &dfd))
                                sync_tree_dir(j, dfd);
                        ferry_fsio_close(&dfd);
                }
        }
        if (ferry_manifest_dir_delete(j->m, t->it.id))
                manifest_error(j);
}

/* Runs fn over every row of query q, a chunk at a time. */
static void each_row(struct journal *j, enum ferry_query q, int64_t start,
                     row_fn fn)
{
        j->cursor = start;
        while (!j->stop_code) {
                struct ferry_batch *b = ferry_batch_new(0, 256);
                if (!b) {
                        set_error(j, FERRY_EINTERNAL, "out of memory");
                        return;
                }
                if (ferry_manifest_fill(j->m, q, j->gen, &j->cursor, b, 256,
                                        UINT64_MAX))
                        manifest_error(j);
                size_t n = b->n;
                for (size_t i = 0; i < n && !j->stop_code; i++)
                        fn(j, b, &b->items[i]);
                ferry_batch_free(b);
                if (!n)
                        return;
        }
}

static void apply_dir(struct journal *j, const struct ferry_batch *b,
                      const struct ferry_item *it)
{
        tree_add(j, TREE_APPLY_DIR, false, b, it);
}

/* apply_dir's row back from DST (treework.c's apply_dir). */
static void applied_dir(struct journal *j, const struct ferry_tree_job *t)
{
        const char *path = t->dir;
        int rc = t->rc;
        char why[384];
        snprintf(why, sizeof(why), "%s", t->why);
        if (t->sync_rc && !j->tree_sync_err)
                j->tree_sync_err = t->sync_rc;
        if (rc && !why[0] && stop_for_dst(j, rc))
                return; /* nobody's failure: the row stays pending */
        if (rc) {
                if (!why[0]) /* else a refused or colliding name */
                        snprintf(why, sizeof(why), "%s: %s", t->what,
                                 strerror(rc));
                j->sum->files_failed++;
                emit(j, FERRY_EV_FAILED, "", path, why);
                if (ferry_manifest_dir_set_error(j->m, t->it.id, why))
                        manifest_error(j);
                return;
        }
        if (ferry_manifest_dir_applied(j->m, t->it.id))
                manifest_error(j);
}

/* A pending row that the scan no longer sees may have left a temp file. */
static void remove_temp(struct journal *j, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        tree_add(j, TREE_TEMP, false, b, it);
}

/* Every tree job back, in order: its result recorded. False stops. */
static bool tree_done(void *ctx, const struct ferry_tree_job *t)
{
        struct journal *j = ctx;
        if (t->op == TREE_DEL_FILE)
                deleted_file(j, t);
        else if (t->op == TREE_DEL_DIR)
                deleted_dir(j, t);
        else if (t->op == TREE_APPLY_DIR)
                applied_dir(j, t);
        return !j->stop_code;
}

/* Runs fn over every row of q, then waits for the DST work it handed out. */
static void each_tree_row(struct journal *j, enum ferry_query q, int64_t start,
                          row_fn fn)
{
        each_row(j, q, start, fn);
        ferry_treework_drain(j->tree);
}

/* The DST work of finish_tree goes to the copy's workers, idle now
 * (stop_threads), whose threads end in journal_release (treework.h). */
static bool start_tree(struct journal *j)
{
        struct ferry_tree_cfg tc = {
                .srcfd = j->cfg->srcfd,
                .dstfd = j->cfg->dstfd,
                .names = j->cfg->names,
                .own = j->cfg->own,
                .perms = j->opt->perms,
                .owner = j->opt->owner,
                .times = j->opt->times,
                .fsync_dirs = j->opt->durability == FERRY_DURABLE_FILE,
                .umask = j->umask,
        };
        if (!ferry_treework_new(&tc, j->workers, tree_done, j, &j->tree))
                return true;
        set_error(j, FERRY_EINTERNAL, "out of memory");
        return false;
}

static void finish_tree(struct journal *j)
{
        if (!start_tree(j))
                return;
        each_tree_row(j, Q_STALE_TEMPS, 0, remove_temp);
        bool deleted = false;
        if (j->opt->delete_removed) {
                if (j->sum->scan_errors)
                        emit(j, FERRY_EV_WARNING, "", "",
                             "the scan had errors: nothing deleted");
                else if (check_delete(j)) {
                        each_tree_row(j, Q_REMOVED_FILES, 0, delete_file);
                        each_tree_row(j, Q_REMOVED_DIRS, INT64_MAX, delete_dir);
                        report_held(j);
                        deleted = true;
                } else if (j->delete_refused) {
                        keep_source_rows(j);
                }
        }
        record_source(j, deleted);
        each_tree_row(j, Q_PENDING_DIRS, INT64_MAX, apply_dir);
        ferry_treework_free(j->tree);
        j->tree = NULL;
        /* Deletions touch their directory, so apply_dir met every
         * directory changed above: with --durability=file it fsynced each
         * (no syncfs, which that mode is for file systems that lack). */
        enum ferry_durability dur = j->opt->durability;
        int rc = j->stop_code                ? 0
                 : dur == FERRY_DURABLE_NONE ? 0
                 : dur == FERRY_DURABLE_FILE ? j->tree_sync_err
                                             : ferry_fsio_syncfs(j->cfg->dstfd);
        if (!rc && !j->stop_code)
                return;
        /* Nothing above is durable: forget it (the deletions and the
         * directory marks), so that the next run does it again. Found by
         * t23: a power cut lost empty directories marked created. A full
         * or failed DST stops as in a barrier (t21 long); one that
         * failed above (apply_dir) leaves nothing to trust either. */
        if (rc && !stop_for_dst(j, rc))
                set_error(j, FERRY_EPARTIAL,
                          dur == FERRY_DURABLE_FILE
                                  ? "fsync of a destination directory failed"
                                  : "syncfs of the destination failed");
        if (ferry_manifest_rollback(j->m) || ferry_manifest_begin(j->m))
                manifest_error(j);
}

/* After a failed barrier the files were handed out again; only those that
 * never became durable make the run partial. */
static bool barrier_left_files(struct journal *j)
{
        uint64_t files = 0, bytes = 0;
        if (!j->barrier_failed || j->opt->dry_run ||
            ferry_manifest_pending(j->m, j->gen, &files, &bytes))
                return j->barrier_failed;
        if (files && !j->err->msg[0])
                snprintf(j->err->msg, sizeof(j->err->msg),
                         "the durability barrier on the destination failed: "
                         "%llu files are not durably copied; run the same "
                         "command again",
                         (unsigned long long)files);
        return files > 0;
}

static int result_code(struct journal *j)
{
        if (j->stop_code)
                return j->stop_code;
        /* before 23: the same command would not delete either */
        if (j->delete_code)
                return j->delete_code;
        if (j->sum->files_failed || j->sum->scan_errors ||
            barrier_left_files(j))
                return FERRY_EPARTIAL;
        if (j->sum->files_vanished)
                return FERRY_EVANISHED;
        return FERRY_OK;
}

static void end_run(struct journal *j, int code)
{
        if (j->stop_code == FERRY_EMANIFEST) {
                ferry_manifest_rollback(j->m);
                return;
        }
        if (ferry_manifest_run_finish(j->m, j->run_id, code) ||
            (code == FERRY_OK && !j->barrier_failed &&
             ferry_manifest_set_note(j->m, UNCERTAIN_KEY, "")) ||
            ferry_manifest_commit(j->m))
                manifest_error(j);
}

/* ---- dry run ----------------------------------------------------------- */

/* Dry run: what copying it would remove or refuse to replace in DST, by
 * the rules the copy follows (rule 9): a refusal is a would-be failure. */
static bool would_place(struct journal *j, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        struct ferry_copy_cfg cc = {.times = j->opt->times,
                                    .written_since = j->written_since};
        struct ferry_stat st;
        int dfd = -1, err = 0;
        if (j->cfg->dstfd < 0)
                return true;
        int rc = ferry_fsio_open_dir(j->cfg->dstfd, dir, &dfd);
        if (rc == ENOTDIR || rc == ELOOP)
                err = ENOTDIR;
        else if (!rc && !ferry_fsio_statat(dfd, name, &st))
                err = S_ISDIR(st.mode)                            ? EISDIR
                      : ferry_copy_is_ours(&cc, it, &it->st, &st) ? 0
                                                                  : EEXIST;
        ferry_fsio_close(&dfd);
        if (!err)
                return true;
        char why[512], *what = NULL;
        struct ferry_dst_rec claim;
        if (err == EEXIST && !ferry_names_case_insensitive(j->cfg->names)) {
                ferry_copy_refusal(it, &st, why, sizeof(why));
                rc = EEXIST;
        } else
                rc = ferry_owner_clear_way(j->m, j->cfg->dstfd, j->cfg->names,
                                           dir, name, err, false, &what, &claim,
                                           why, sizeof(why));
        if (!rc && what) {
                j->sum->files_deleted++;
                emit(j, FERRY_EV_WOULD_DELETE, "", what, NULL);
        }
        free(what);
        if (!rc)
                return true;
        j->sum->files_failed++;
        emit(j, FERRY_EV_WARNING, dir, name, why);
        return false;
}

static void would_copy(struct journal *j, const struct ferry_batch *b,
                       const struct ferry_item *it)
{
        if (!would_place(j, b, it))
                return;
        j->sum->files_copied++;
        j->sum->bytes_copied += it->type == FT_REG ? it->st.size : 0;
        emit_item(j, FERRY_EV_WOULD_COPY, b, it, NULL);
}

static void would_delete(struct journal *j, const struct ferry_batch *b,
                         const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        if (protected_path(j, dir, name, false) ||
            src_holds_other_spelling(j, dir, name))
                return;
        struct ferry_stat st;
        int dfd = -1;
        if (j->cfg->dstfd < 0 ||
            ferry_fsio_open_dir(j->cfg->dstfd, dir, &dfd) ||
            ferry_fsio_statat(dfd, name, &st) || S_ISDIR(st.mode)) {
                ferry_fsio_close(&dfd);
                return; /* nothing there that a deletion would remove */
        }
        ferry_fsio_close(&dfd);
        if (!ferry_copy_matches(&it->dst, &st)) { /* as delete_file */
                emit(j, FERRY_EV_WARNING, dir, name,
                     it->dst.type ? "not deleted: it was changed since "
                                    "ferry copied it"
                                  : "not deleted: ferry did not write it");
                return;
        }
        if (j->delete_refused) {
                emit(j, FERRY_EV_WOULD_DELETE, dir, name, "--delete refused");
                return;
        }
        if (delete_held(j, dir, name, false))
                return;
        j->sum->files_deleted++;
        emit(j, FERRY_EV_WOULD_DELETE, dir, name, NULL);
}

static int dry_run(struct journal *j)
{
        if (!start_threads(j, true, false))
                run_loop(j); /* with no workers: exhausted stays false */
        stop_threads(j);
        if (!j->stop_code) {
                each_row(j, Q_PENDING, 0, would_copy);
                if (j->opt->delete_removed && !j->sum->scan_errors) {
                        check_delete(j);
                        each_row(j, Q_REMOVED_FILES, 0, would_delete);
                        report_held(j);
                }
        }
        int code = result_code(j);
        ferry_manifest_rollback(j->m);
        return code;
}

int ferry_journal_copy(const struct ferry_journal_cfg *cfg,
                       struct ferry_summary *sum, struct ferry_error *err)
{
        struct journal j;
        int code = journal_init(&j, cfg, sum, err, WORK_COPY);
        if (code)
                return code;
        if (begin_run(&j))
                goto out;
        if (cfg->opt->dry_run) {
                j.exhausted = true; /* hand nothing out */
                code = dry_run(&j);
                goto out;
        }
        if (!start_threads(&j, true, true))
                run_loop(&j);
        stop_threads(&j);
        if (!j.stop_code) {
                commit(&j); /* the copy's marks, apart from what follows */
                finish_tree(&j);
        }
        end_run(&j, result_code(&j));
out:
        if (!code)
                code = result_code(&j);
        progress(&j, true);
        journal_release(&j);
        return code;
}

int ferry_journal_verify(const struct ferry_journal_cfg *cfg,
                         enum ferry_verify_mode mode, struct ferry_summary *sum,
                         struct ferry_error *err)
{
        struct journal j;
        int kind = (mode & FERRY_VERIFY_DEST ? WORK_VERIFY_DST : 0) |
                   (mode & FERRY_VERIFY_SOURCE ? WORK_VERIFY_SRC : 0);
        int code = journal_init(&j, cfg, sum, err, kind);
        if (code)
                return code;
        uint64_t not_done = 0;
        /* the totals of the progress line: the done rows (a read
         * transaction of its own, before the verify's) */
        struct ferry_status_info info;
        if (!ferry_manifest_status(j.m, &info, NULL, NULL)) {
                j.prog.files_total = info.done.files;
                j.prog.bytes_total = info.done.bytes;
        }
        /* rows the latest scan did not see are no longer part of SRC */
        if (ferry_manifest_begin(j.m) ||
            ferry_manifest_current_gen(j.m, &j.gen) ||
            ferry_manifest_not_done(j.m, j.gen, &not_done)) {
                manifest_error(&j);
        } else {
                j.scan_done = true;
                if (!start_threads(&j, false, true))
                        run_loop(&j);
                stop_threads(&j);
                if (j.stop_code != FERRY_EMANIFEST &&
                    ferry_manifest_commit(j.m))
                        manifest_error(&j);
        }
        code = j.stop_code;
        if (!code && (j.sum->mismatched || j.sum->files_failed)) {
                code = FERRY_EVERIFY;
                snprintf(err->msg, sizeof(err->msg),
                         "verify found %llu missing or differing files%s",
                         (unsigned long long)j.sum->mismatched,
                         j.sum->files_failed ? " and unreadable ones" : "");
        }
        if (!code && not_done) {
                code = FERRY_EVERIFY;
                snprintf(err->msg, sizeof(err->msg),
                         "%llu files are not copied yet: run the copy first",
                         (unsigned long long)not_done);
        }
        progress(&j, true);
        journal_release(&j);
        return code;
}
