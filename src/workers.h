/*
 * workers.h - the worker pool: N threads, each with its own copier, that
 * pop batches from the work queue, copy or verify every item and push the
 * batch back to the journal's inbox.
 *
 * A tree pool (ferry_workers_start_tree) is the same threads for the
 * end-of-run tree work instead: they pop struct ferry_tree_job, run
 * ferry_treework_run on it and push it back (treework.h).
 *
 * Calling sequence:
 *   ferry_workers_start(&cfg, n, work, inbox, &w);
 *   ... the journal pushes batches to work and pops them from inbox ...
 *   ferry_queue_close(work); ferry_workers_join(w);
 */
#ifndef FERRY_WORKERS_H
#define FERRY_WORKERS_H

#include "copy.h"
#include "queue.h"

struct ferry_workers;

int ferry_workers_start(const struct ferry_copy_cfg *cfg, unsigned n,
                        struct ferry_queue *work, struct ferry_queue *inbox,
                        struct ferry_workers **out);
struct ferry_tree_cfg;
/* A pool for the tree work; cfg is borrowed until the join. */
int ferry_workers_start_tree(const struct ferry_tree_cfg *cfg, unsigned n,
                             struct ferry_queue *work,
                             struct ferry_queue *inbox,
                             struct ferry_workers **out);
/* Waits for every thread (close the work queue first) and frees the pool. */
void ferry_workers_join(struct ferry_workers *w);

#endif
