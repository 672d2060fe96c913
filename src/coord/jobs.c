/*
 * coord/jobs.c - how many copies are in flight (coord/internal.h): -j N
 * fixes the number, -j auto (opt->jobs 0) feeds tune.c one rate per
 * interval and turns the knobs it answers with (the workers' limit, the
 * scan's width, the batches in flight); batches are sized to the time
 * their items take. Runs on the coordinator thread (run.c's tick).
 */
#include "internal.h"

#include "scan.h"
#include "workers.h"

#include <string.h>

/* The workers' counts are judged (-j auto) and batches sized at most every
 * TUNE_SHORTEST seconds, once TUNE_ITEMS items finished since the last
 * time (or TUNE_LONGEST passed). A batch should take BATCH_TARGET
 * seconds: short enough that the end of a run is not one worker's batch.
 * The rate counts BYTES_PER_ITEM bytes as one item. */
#define TUNE_SHORTEST  0.1
#define TUNE_LONGEST   1.0
#define TUNE_ITEMS     32
#define BATCH_TARGET   0.05
#define BYTES_PER_ITEM (1u << 20)

/* -j N fixes the limit; -j auto (opt->jobs 0) starts the tuner. cap: what
 * job.c fitted to the descriptors (0: -j N itself, or FERRY_TUNE_MAX); for
 * -j N, as far as `ferry set -j` may raise it. */
void jobs_init(struct coord *c)
{
        struct jobs_ctl *j = &c->jobs;
        unsigned cap = c->cfg->jobs_cap;
        j->autotune = c->opt->jobs == 0;
        if (!cap)
                cap = j->autotune ? FERRY_TUNE_MAX : c->opt->jobs;
        j->cap = cap ? cap : 1;
        /* -j N below the cap: `ferry set -j` may raise it (control.c) */
        j->limit =
                !j->autotune && c->opt->jobs < j->cap ? c->opt->jobs : j->cap;
        if (j->autotune) {
                ferry_tune_init(&j->tune, 1, j->cap, FERRY_TUNE_START);
                j->limit = j->tune.cur;
        }
        j->since = now();
}

/* BATCHES_PER_COPY batches in flight per copy allowed: one running, the
 * rest waiting, so that a worker has work past the next hand-out (while
 * the scan runs, new rows are handed out at most every 50 ms, after
 * their commit) even with batches of BATCH_TARGET. */
void follow_limit(struct coord *c)
{
        /* paused (control.c): nothing more is handed out */
        unsigned want = c->ctl.paused ? 0 : c->jobs.limit * BATCHES_PER_COPY;
        c->ho.max_in_flight = want > c->ho.in_flight ? want : c->ho.in_flight;
}

static void set_limit(struct coord *c, unsigned n)
{
        if (n == c->jobs.limit)
                return;
        c->jobs.limit = n;
        ferry_workers_set_limit(c->workers, n);
        /* a source that wants fewer copies than auto starts with (it
         * seeks, or thrashes) gets as few directory reads; at or above
         * that, the scan reads as wide as it may */
        if (c->scan) {
                unsigned scanners = c->opt->scanners ? c->opt->scanners : 1;
                ferry_scan_set_limit(
                        c->scan,
                        n < FERRY_TUNE_START && n < scanners ? n : scanners);
        }
        follow_limit(c);
}

/* A thread per batch in flight, up to the limit. When none can start,
 * the batches handed out go back (their rows stay pending). */
void want_workers(struct coord *c)
{
        if (!c->workers || c->ho.in_flight <= ferry_workers_count(c->workers))
                return;
        int rc = ferry_workers_want(c->workers, c->ho.in_flight);
        if (!rc)
                return;
        set_error(c, FERRY_EINTERNAL, "cannot start threads: %s", strerror(rc));
        void *p;
        while (ferry_queue_try_pop(&c->work, &p) == FERRY_QUEUE_OK) {
                struct ferry_batch *b = p;
                c->ho.in_flight--;
                c->ho.outstanding -= b->n;
                ferry_batch_free(b);
        }
}

/* `ferry set -j` (control.c) */
void jobs_set(struct coord *c, unsigned n)
{
        struct jobs_ctl *j = &c->jobs;
        j->autotune = n == 0;
        if (j->autotune)
                ferry_tune_init(&j->tune, 1, j->cap, j->limit);
        set_limit(c, j->autotune ? j->tune.cur : n < j->cap ? n : j->cap);
}

static bool tuning(const struct coord *c)
{
        return c->jobs.autotune && phase_hands_out(c->phase) &&
               !c->ctl.paused; /* a pause is no rate to judge */
}

/* Each interval: batches sized to the items' time, and -j auto's step. */
void tune_tick(struct coord *c, double t)
{
        struct jobs_ctl *j = &c->jobs;
        double dt = t - j->since;
        if (!c->workers || dt < TUNE_SHORTEST)
                return;
        struct ferry_workers_stats s;
        ferry_workers_stats(c->workers, &s);
        uint64_t items = s.items - j->at.items;
        if (items < TUNE_ITEMS && dt < TUNE_LONGEST)
                return;
        double busy = (double)(s.busy_ns - j->at.busy_ns) / 1e9;
        if (items) {
                double per_batch = BATCH_TARGET / (busy / (double)items);
                c->ho.batch_items = per_batch >= BATCH_ITEMS ? BATCH_ITEMS
                                    : per_batch < 1          ? 1
                                                    : (unsigned)per_batch;
        }
        /* judged only while every copy allowed has a batch: at the end
         * of a hand-out the rate falls for want of work, not of copies */
        if (items && tuning(c) && c->ho.in_flight >= j->limit) {
                double bytes = (double)(s.bytes - j->at.bytes);
                double work = (double)items + bytes / BYTES_PER_ITEM;
                ferry_tune_context(&j->tune, bytes / (double)items,
                                   c->ctl.want.bwlimit > 0);
                set_limit(c, ferry_tune_step(&j->tune, work / dt, busy / dt));
        }
        j->since = t;
        j->at = s;
}
