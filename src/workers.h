/*
 * workers.h - the worker pool: N threads, each with its own copier, that
 * pop batches from the work queue, copy or verify every item and push the
 * batch back to the coordinator's inbox.
 *
 * Once the work queue is closed, the same threads serve the end-of-run
 * tree work (treework.h): they pop struct ferry_tree_job from the queue
 * ferry_workers_serve_tree gives, run ferry_treework_run on each and push
 * it back, until ferry_workers_end_tree or the join.
 *
 * Calling sequence:
 *   ferry_workers_start(&cfg, n, work, inbox, &w);
 *   ... the coordinator pushes batches to work and pops them from inbox ...
 *   ferry_queue_close(work); ferry_workers_idle(w);
 *   [ferry_workers_serve_tree(w, tw, ti); ... ferry_workers_end_tree(w);]
 *   ferry_workers_join(w);
 */
#ifndef FERRY_WORKERS_H
#define FERRY_WORKERS_H

#include "copy.h"
#include "queue.h"

struct ferry_workers;

int ferry_workers_start(const struct ferry_copy_cfg *cfg, unsigned n,
                        struct ferry_queue *work, struct ferry_queue *inbox,
                        struct ferry_workers **out);
/* Waits until every thread is done with the work queue (close it first):
 * none pushes to inbox after this, and their copiers are freed. */
void ferry_workers_idle(struct ferry_workers *w);
/* Threads in the pool (fewer than asked when some could not start). */
unsigned ferry_workers_count(const struct ferry_workers *w);
/* The threads, idle, run the tree jobs of work and push them to inbox. */
void ferry_workers_serve_tree(struct ferry_workers *w, struct ferry_queue *work,
                              struct ferry_queue *inbox);
/* Closes that work queue and waits until no thread uses the two queues. */
void ferry_workers_end_tree(struct ferry_workers *w);
/* Waits for every thread (close the work queue first) and frees the pool. */
void ferry_workers_join(struct ferry_workers *w);

#endif
