/*
 * coord/run.c - the coordinator thread's loop (coord.h, coord/internal.h).
 *
 * Owns the run's phase (set_phase, assert_run_state: the diagram is in
 * internal.h), the loop that pops the inbox (listings from the scanners,
 * finished batches from the workers, finished barriers) and dispatches
 * each message to its role file, starting and stopping the scanner, worker
 * and barrier threads, the run's first fatal error (set_error) and the
 * policy for a full or failed DST, the group COMMIT and progress, and the
 * copy's entry point and result code (how many copies run: jobs.c). The
 * manifest's write transaction is the coordinator's alone: no other thread
 * touches the manifest.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "buf.h"
#include "copy.h"
#include "fsio.h"
#include "scan.h"
#include "treework.h"
#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INBOX_CAP            128
#define COMMIT_SECONDS       1.0
#define CHUNK_COMMIT_SECONDS 0.05
#define CHUNK_SYNC_SECONDS   0.5
#define LISTING_CHUNK        128

/* ---- the run's phase --------------------------------------------------- */

/* The checks are a bug's, never a run's: built in testing and debug
 * builds (as assert), where a broken invariant stops at once. */
#if COORD_CHECKS
#define TO(p) (1u << (p))

/* The arrows of the diagram in internal.h: arrows[from] holds each to. */
static const unsigned arrows[] = {
        [PH_STARTING] = TO(PH_SCANNING) | TO(PH_VERIFYING) | TO(PH_STOPPING),
        [PH_SCANNING] = TO(PH_FIRST_PASS) | TO(PH_DRAINING) | TO(PH_STOPPING),
        [PH_FIRST_PASS] = TO(PH_LATER_PASS) | TO(PH_STOPPING),
        [PH_LATER_PASS] = TO(PH_DRAINING) | TO(PH_STOPPING),
        [PH_VERIFYING] = TO(PH_DRAINING) | TO(PH_STOPPING),
        [PH_DRAINING] = TO(PH_FINISHING) | TO(PH_DONE) | TO(PH_STOPPING),
        [PH_STOPPING] = TO(PH_DONE),
        [PH_FINISHING] = TO(PH_DONE) | TO(PH_STOPPING),
        [PH_DONE] = 0,
};

static const char *const phase_name[] = {
        [PH_STARTING] = "STARTING",
        [PH_SCANNING] = "SCANNING",
        [PH_FIRST_PASS] = "FIRST_PASS",
        [PH_LATER_PASS] = "LATER_PASS",
        [PH_VERIFYING] = "VERIFYING",
        [PH_DRAINING] = "DRAINING",
        [PH_STOPPING] = "STOPPING",
        [PH_FINISHING] = "FINISHING",
        [PH_DONE] = "DONE",
};

#define RUN_CHECK(cond)                                                        \
        do {                                                                   \
                if (!(cond))                                                   \
                        state_broken(c, #cond, __LINE__);                      \
        } while (0)

static void state_broken(const struct coord *c, const char *what, int line)
{
        fprintf(stderr, "ferry: coordinator in phase %s: %s fails (%s:%d)\n",
                phase_name[c->phase], what, __FILE__, line);
        abort();
}
#else
#define RUN_CHECK(cond) ((void)0)
#endif

/* Each phase's invariants, in the manner of SQLite's assert_pager_state. */
void assert_run_state(const struct coord *c)
{
        const struct handout *h = &c->ho;
        bool copy = c->work_kind == WORK_COPY;
        /* the workers may stay, idle, for the tree work */
        bool joined =
                (!c->workers || c->workers_idle) && !c->scan && !c->bar.started;
        (void)h, (void)copy, (void)joined;
        RUN_CHECK(c->phase <= PH_DONE);
        /* a stop code is set in STOPPING, and after it only */
        RUN_CHECK(c->phase == PH_DONE ||
                  (c->phase == PH_STOPPING) == (c->stop_code != 0));
        RUN_CHECK(h->in_flight <= h->max_in_flight);
        RUN_CHECK(h->hand_out || !h->in_flight);
        switch (c->phase) {
        case PH_STARTING: RUN_CHECK(joined && h->pass == 1); break;
        case PH_SCANNING:
                RUN_CHECK(copy && !c->in.scan_done && h->pass == 1);
                break;
        case PH_FIRST_PASS:
                RUN_CHECK(copy && h->hand_out && c->in.scan_done &&
                          h->pass == 1);
                break;
        case PH_LATER_PASS:
                RUN_CHECK(copy && h->hand_out && c->in.scan_done &&
                          h->pass >= 2 && h->pass <= MAX_PASSES);
                break;
        case PH_VERIFYING:
                RUN_CHECK(!copy && c->in.scan_done && !c->scan);
                break;
        case PH_DRAINING: RUN_CHECK(c->in.scan_done); break;
        case PH_STOPPING: break;
        case PH_FINISHING:
        case PH_DONE: RUN_CHECK(joined && all_committed(c)); break;
        }
}

/* Moves the run to phase to, along an arrow of the diagram. */
void set_phase(struct coord *c, enum run_phase to)
{
        RUN_CHECK(to <= PH_DONE && (arrows[c->phase] & TO(to)));
        /* a later pass starts, and the copy's hand-out ends, only when
         * every result so far is committed */
        RUN_CHECK(to != PH_LATER_PASS || all_committed(c));
        RUN_CHECK(c->phase != PH_LATER_PASS || to != PH_DRAINING ||
                  all_committed(c));
        c->phase = to;
        assert_run_state(c);
}

double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Records the first fatal error and asks every thread to stop. */
void set_error(struct coord *c, int code, const char *fmt, ...)
{
        if (!c->stop_code || c->stop_code == FERRY_EINTR) {
                c->stop_code = code;
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(c->err->msg, sizeof(c->err->msg), fmt, ap);
                va_end(ap);
        }
        atomic_store(c->cfg->stop, true);
        if (c->phase != PH_STOPPING && c->phase != PH_DONE)
                set_phase(c, PH_STOPPING);
}

void manifest_error(struct coord *c)
{
        set_error(c, FERRY_EMANIFEST, "%s", ferry_manifest_errmsg(c->m));
}

const char *join_path(struct coord *c, const char *dir, const char *name,
                      size_t *len)
{
        ferry_buf_reset(&c->path);
        ferry_buf_adds(&c->path, dir);
        ferry_buf_add_path(&c->path, name);
        if (c->path.oom) {
                ferry_buf_release(&c->path); /* a later call may find memory */
                return NULL;
        }
        *len = c->path.len;
        return c->path.buf;
}

void emit_failure(struct coord *c, enum ferry_event ev, const char *dir,
                  const char *name, const char *detail,
                  const struct ferry_failure *fail)
{
        if (!c->opt->event)
                return;
        size_t len = 0;
        const char *path = join_path(c, dir, name, &len);
        if (path)
                c->opt->event(ev, path, len, detail, fail, c->opt->cb_arg);
}

void emit(struct coord *c, enum ferry_event ev, const char *dir,
          const char *name, const char *detail)
{
        emit_failure(c, ev, dir, name, detail, NULL);
}

void emit_item(struct coord *c, enum ferry_event ev,
               const struct ferry_batch *b, const struct ferry_item *it,
               const char *detail, const struct ferry_failure *fail)
{
        emit_failure(c, ev, ferry_batch_at(b, it->dir_off),
                     ferry_batch_at(b, it->name_off), detail, fail);
}

void commit(struct coord *c)
{
        /* a dry run's one transaction is rolled back at the end */
        if (c->stop_code == FERRY_EMANIFEST || c->opt->dry_run)
                return;
        /* a chunk row's commit owes no sync (a kill keeps it, one lost is
         * copied again); a power cut is to lose at most half a second's */
        if (c->chunks && now() - c->chunks_synced >= CHUNK_SYNC_SECONDS) {
                ferry_manifest_owe_sync(c->m);
                c->chunks_synced = now();
        }
        ferry_fsio_crashpoint("before_commit");
        if (ferry_manifest_commit(c->m) || ferry_manifest_begin(c->m)) {
                manifest_error(c);
                return;
        }
        ferry_fsio_crashpoint("after_commit");
        c->last_commit = now();
        c->dirty = c->fresh = c->chunks = false;
}

/* ENOSPC or EDQUOT on the destination: the whole run stops (exit 11). */
static bool dst_full(int err)
{
        return err == ENOSPC || err == EDQUOT;
}

static void stop_full(struct coord *c)
{
        set_error(c, FERRY_ENOSPC,
                  "destination is full: free some space and run the same "
                  "command to resume");
}

/* fsio waited a minute for a descriptor and none came free: a leak, or the
 * system's file table is full. Failing the remaining files one by one
 * would help nobody; the rows stay pending. */
void stop_no_fds(struct coord *c, int err)
{
        if (atomic_load(c->cfg->stop))
                return; /* stopping anyway: the wait was cut short */
        struct rlimit rl;
        char limit[64] = "";
        if (err == EMFILE && !getrlimit(RLIMIT_NOFILE, &rl))
                snprintf(limit, sizeof(limit), "; the limit is %llu",
                         (unsigned long long)rl.rlim_cur);
        set_error(c, FERRY_EINTERNAL,
                  "no file descriptor came free (%s%s): stopped; close files "
                  "elsewhere or raise the limit (ulimit -n), then run the "
                  "same command to resume",
                  strerror(err), limit);
}

/* DST itself failed (rule 10; why from ferry_copy_dst_failed): the whole
 * run stops (exit 12) and the rows it did not finish stay pending. */
static void stop_dst_failed(struct coord *c, int why)
{
        set_error(c, FERRY_EDSTFAIL,
                  "the destination '%s' failed: %s; stopped, nothing lost: "
                  "run the same command when it is back",
                  c->opt->dst, strerror(why));
}

/* An operation on DST failed with err: true when that stops the run, as a
 * full DST or as DST itself failing (its root no longer answers). */
bool stop_for_dst(struct coord *c, int err)
{
        if (dst_full(err)) {
                stop_full(c);
                return true;
        }
        int why = ferry_copy_dst_suspect(err)
                          ? ferry_copy_dst_failed(c->cfg->dstfd)
                          : 0;
        if (why)
                stop_dst_failed(c, why);
        return why != 0;
}

/* A worker's result that stops the run: true for those, which are never
 * recorded (the row stays pending). */
bool stops_run(struct coord *c, const struct ferry_item *it)
{
        switch (it->result) {
        case R_NOSPACE: stop_full(c); return true;
        case R_DSTFAIL: stop_dst_failed(c, it->err); return true;
        default: return false;
        }
}

void free_list(struct ferry_batch *list)
{
        while (list) {
                struct ferry_batch *next = list->next;
                ferry_batch_free(list);
                list = next;
        }
}

/* Every message starts with a struct ferry_msg; p is the whole message. */
static void handle(struct coord *c, void *p)
{
        const struct ferry_msg *msg = p;
        switch (msg->kind) {
        case MSG_LISTING: on_listing(c, p); break;
        case MSG_SCAN_DONE: on_scan_done(c); break;
        case MSG_BATCH: on_batch(c, p); break;
        case MSG_BARRIER: on_barrier(c, p); break;
        case MSG_CHUNK: on_chunk(c, p); break;
        }
}

static bool finished(const struct coord *c)
{
        return (c->phase == PH_STOPPING || c->phase == PH_DRAINING) &&
               all_committed(c);
}

static void check_stop(struct coord *c)
{
        if (atomic_load(c->cfg->stop) && !c->stop_code) {
                c->stop_code = FERRY_EINTR;
                snprintf(c->err->msg, sizeof(c->err->msg),
                         "interrupted: resume with the same command");
                set_phase(c, PH_STOPPING);
        }
}

static void tick(struct coord *c)
{
        double t = now();
        tune_tick(c, t);
        control_tick(c, t);
        if (t - c->last_prog >= 1.0)
                progress(c, false);
        /* a chunk's row is what a resume keeps: committed sooner */
        double gap = c->chunks ? CHUNK_COMMIT_SECONDS : COMMIT_SECONDS;
        if (!c->bar.running && t - c->last_commit >= gap)
                commit(c);
}

static void run_loop(struct coord *c)
{
        for (;;) {
                check_stop(c);
                follow_limit(c);
                refill(c);
                want_workers(c);
                if (finished(c))
                        return;
                maybe_barrier(c);
                void *msg;
                int rc = ferry_queue_pop(&c->inbox, &msg, 100);
                for (int k = 0; rc == FERRY_QUEUE_OK && k < 64; k++) {
                        handle(c, msg);
                        rc = ferry_queue_try_pop(&c->inbox, &msg);
                }
                if (rc == FERRY_QUEUE_OK)
                        handle(c, msg);
                tick(c);
        }
}

/* The loop from its first phase (SCANNING or VERIFYING) on; a start that
 * failed has moved on to STOPPING already, and the loop ends at once. */
void start_loop(struct coord *c, enum run_phase first)
{
        if (c->phase == PH_STARTING)
                set_phase(c, first);
        run_loop(c);
}

int start_threads(struct coord *c, bool scan, bool work)
{
        int rc = 0;
        if (work) {
                struct ferry_copy_cfg cc = {
                        .srcfd = c->cfg->srcfd,
                        .dstfd = c->cfg->dstfd,
                        .meta = coord_meta_cfg(c),
                        .specials = c->opt->specials && c->dst_caps.specials,
                        .devices = c->opt->devices,
                        .trust_mtime = c->opt->trust_mtime,
                        .adopt = c->opt->adopt,
                        .fsync_each = c->opt->durability == FERRY_DURABLE_FILE,
                        .retries = c->opt->retries,
                        .stop = c->cfg->stop,
                        .names = c->cfg->names,
                        .rate = c->ctl.rate,
                        /* issue 11: byte progress, chunks recorded */
                        .bytes_live = &c->bytes_live,
                        .chunk_inbox = &c->inbox,
                        .no_sync = c->opt->durability == FERRY_DURABLE_NONE,
                };
                cc.written_since = c->written_since;
                /* the barrier thread starts with the first barrier
                 * (barrier.c) */
                rc = ferry_workers_start(&cc, c->jobs.cap, c->jobs.limit,
                                         &c->work, &c->inbox, &c->workers);
        }
        if (!rc && scan) {
                struct ferry_scan_cfg sc = {
                        .srcfd = c->cfg->srcfd,
                        .select = c->cfg->select,
                        .own = c->cfg->own,
                        .inbox = &c->inbox,
                        .stop = c->cfg->stop,
                        .threads = c->opt->scanners ? c->opt->scanners : 1,
                        .retries = c->opt->retries,
                        .chunk = LISTING_CHUNK,
                        .one_file_system = c->opt->one_file_system,
                };
                int src_err;
                rc = ferry_scan_start(&sc, &c->scan, &src_err);
                if (src_err) {
                        set_error(c, FERRY_EPATH,
                                  "cannot read the source directory: %s",
                                  strerror(src_err));
                        return rc;
                }
        }
        if (rc)
                set_error(c, FERRY_EINTERNAL, "cannot start threads: %s",
                          strerror(rc));
        return rc;
}

static void drain_inbox(struct coord *c)
{
        void *p;
        while (ferry_queue_try_pop(&c->inbox, &p) == FERRY_QUEUE_OK) {
                const struct ferry_msg *msg = p;
                if (msg->kind == MSG_LISTING) {
                        ferry_listing_free(p);
                } else if (msg->kind == MSG_BATCH) {
                        ferry_batch_free(p);
                } else if (msg->kind == MSG_BARRIER) {
                        struct barrier_job *job = p;
                        free_list(job->list);
                        free(job);
                } else if (msg->kind == MSG_CHUNK) {
                        free(p); /* not recorded: copied again */
                }
        }
}

void stop_threads(struct coord *c)
{
        ferry_queue_close(&c->work);
        ferry_workers_idle(c->workers); /* joined in coord_release */
        c->workers_idle = true;
        ferry_queue_close(&c->bar.q);
        if (c->bar.started)
                pthread_join(c->bar.thread, NULL);
        c->bar.started = false;
        atomic_store(c->cfg->stop, true); /* a scan cut short must end */
        ferry_queue_close(&c->inbox);
        ferry_scan_join(c->scan);
        c->scan = NULL;
        drain_inbox(c);
        free_list(c->bar.head);
        c->bar.head = c->bar.tail = NULL;
}

int coord_init(struct coord *c, const struct ferry_coord_cfg *cfg,
               struct ferry_summary *sum, struct ferry_error *err,
               int work_kind)
{
        memset(c, 0, sizeof(*c));
        memset(sum, 0, sizeof(*sum));
        ferry_buf_init(&c->path);
        c->cfg = cfg;
        c->opt = cfg->opt;
        c->m = cfg->m;
        c->sum = sum;
        c->err = err;
        c->work_kind = work_kind;
        c->phase = PH_STARTING;
        jobs_init(c);
        handout_init(&c->ho, work_kind, c->jobs.limit * BATCHES_PER_COPY);
        c->t0 = c->last_prog = c->last_commit = now();
        c->umask = umask(022); /* read it: no thread runs yet */
        ferry_dst_caps_all(&c->dst_caps);
        umask(c->umask);
        if (ferry_queue_init(&c->inbox, INBOX_CAP) ||
            /* room for every batch a limit up to the cap puts in flight */
            ferry_queue_init(&c->work, c->jobs.cap * BATCHES_PER_COPY + 1) ||
            ferry_queue_init(&c->bar.q, 2)) {
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        return control_init(c);
}

void coord_release(struct coord *c)
{
        ferry_treework_free(c->fin.tree); /* NULL but on a bug's path */
        c->fin.tree = NULL;
        c->sum->jobs_peak =
                c->jobs.autotune ? c->jobs.tune.peak : c->jobs.limit;
        c->sum->workers = ferry_workers_count(c->workers);
        ferry_workers_join(c->workers);
        c->workers = NULL;
        control_release(c);
        ferry_queue_release(&c->inbox);
        ferry_queue_release(&c->work);
        ferry_queue_release(&c->bar.q);
        free(c->in.recs);
        ferry_fold_free(c->fin.fold);
        ferry_buf_release(&c->path);
        c->sum->seconds = now() - c->t0;
}

/* After a failed barrier the files were handed out again; only those that
 * never became durable make the run partial. */
static bool barrier_left_files(struct coord *c)
{
        uint64_t files = 0, bytes = 0;
        if (!c->bar.failed || c->opt->dry_run ||
            ferry_manifest_count(c->m, COUNT_TO_COPY, c->gen, &files, &bytes))
                return c->bar.failed;
        if (files && !c->err->msg[0])
                snprintf(c->err->msg, sizeof(c->err->msg),
                         "the durability barrier on the destination failed: "
                         "%llu files are not durably copied; run the same "
                         "command again",
                         (unsigned long long)files);
        return files > 0;
}

int result_code(struct coord *c)
{
        if (c->stop_code)
                return c->stop_code;
        /* before 23: the same command would not delete either */
        if (c->fin.code)
                return c->fin.code;
        if (c->sum->files_failed || c->sum->scan_errors ||
            barrier_left_files(c))
                return FERRY_EPARTIAL;
        if (c->sum->files_vanished)
                return FERRY_EVANISHED;
        /* every file's data arrived; only metadata fell short */
        if (c->sum->meta_failed)
                return FERRY_EMETA;
        return FERRY_OK;
}

static void end_run(struct coord *c, int code)
{
        if (c->stop_code == FERRY_EMANIFEST) {
                ferry_manifest_rollback(c->m);
                return;
        }
        if (ferry_manifest_run_finish(c->m, c->run_id, code) ||
            ((code == FERRY_OK || code == FERRY_EMETA) && !c->bar.failed &&
             ferry_manifest_set_note(c->m, UNCERTAIN_KEY, "")) ||
            ferry_manifest_commit(c->m))
                manifest_error(c);
}

int ferry_coord_copy(const struct ferry_coord_cfg *cfg,
                     struct ferry_summary *sum, struct ferry_error *err)
{
        struct coord c;
        int code = coord_init(&c, cfg, sum, err, WORK_COPY);
        if (code)
                return code;
        if (begin_run(&c))
                goto out;
        if (cfg->opt->dry_run) {
                c.ho.hand_out = false; /* hand nothing out */
                code = dry_run(&c);
                goto out;
        }
        if (!start_threads(&c, true, true))
                start_loop(&c, PH_SCANNING);
        stop_threads(&c);
        if (!c.stop_code) {
                set_phase(&c, PH_FINISHING);
                commit(&c); /* the copy's marks, apart from what follows */
                finish_tree(&c);
                meta_shortfall_end(&c);
        }
        end_run(&c, result_code(&c));
out:
        if (!code)
                code = result_code(&c);
        set_phase(&c, PH_DONE);
        progress(&c, true);
        coord_release(&c);
        return code;
}
