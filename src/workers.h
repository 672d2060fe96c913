/*
 * workers.h - the worker pool: up to max threads, each with its own
 * copier, that pop batches from the work queue, copy or verify every item
 * and push the batch back to the coordinator's inbox.
 *
 * Threads start on demand (ferry_workers_want: one per batch in flight, up
 * to the limit), so a one-file job starts one. The limit (-j N, or what
 * the -j auto tuner says now) may change while the pool runs: a thread
 * whose index is at or above it parks (takes no batch) until the limit
 * rises again or the work queue closes; none is killed.
 *
 * Once the work queue is closed, the threads that exist serve the
 * end-of-run tree work (treework.h): they pop struct ferry_tree_job from
 * the queue ferry_workers_serve_tree gives, run ferry_treework_run on each
 * and push it back, until ferry_workers_end_tree; then they wait for the
 * next tree work (a shared job's metadata pass makes one per claim) until
 * the join.
 *
 * Calling sequence (the coordinator thread alone calls these):
 *   ferry_workers_start(&cfg, max, limit, work, inbox, &w);   no thread yet
 *   ... the coordinator pushes batches to work, calls
 *       ferry_workers_want(w, batches in flight), pops them from inbox,
 *       reads ferry_workers_stats and may ferry_workers_set_limit ...
 *   ferry_queue_close(work); ferry_workers_idle(w);
 *   [ferry_workers_serve_tree(w, tw, ti); ... ferry_workers_end_tree(w);]...
 *   ferry_workers_join(w);
 */
#ifndef FERRY_WORKERS_H
#define FERRY_WORKERS_H

#include "copy.h"
#include "queue.h"

#include <stdint.h>

struct ferry_workers;

/* What the workers did so far (each item counted when it is finished). */
struct ferry_workers_stats {
        uint64_t items;   /* items copied or verified */
        uint64_t bytes;   /* their sizes */
        uint64_t busy_ns; /* the sum of the items' times */
};

/* No thread starts here; cfg is copied. */
int ferry_workers_start(const struct ferry_copy_cfg *cfg, unsigned max,
                        unsigned limit, struct ferry_queue *work,
                        struct ferry_queue *inbox, struct ferry_workers **out);
/* Starts threads until min(want, limit) exist. 0, or an errno when no
 * thread exists and none could start (fewer than wanted still work). */
int ferry_workers_want(struct ferry_workers *w, unsigned want);
/* From now on at most n (1 to max) threads take batches. */
void ferry_workers_set_limit(struct ferry_workers *w, unsigned n);
unsigned ferry_workers_limit(const struct ferry_workers *w);
void ferry_workers_stats(struct ferry_workers *w,
                         struct ferry_workers_stats *out);
/* Waits until every thread is done with the work queue (close it first):
 * none pushes to inbox after this, and their copiers are freed. */
void ferry_workers_idle(struct ferry_workers *w);
/* Threads in the pool (those started so far). */
unsigned ferry_workers_count(const struct ferry_workers *w);
/* The threads, idle, run the tree jobs of work and push them to inbox. */
void ferry_workers_serve_tree(struct ferry_workers *w, struct ferry_queue *work,
                              struct ferry_queue *inbox);
/* Closes that work queue and waits until no thread uses the two queues. */
void ferry_workers_end_tree(struct ferry_workers *w);
/* Waits for every thread (close the work queue first) and frees the pool. */
void ferry_workers_join(struct ferry_workers *w);

#endif
