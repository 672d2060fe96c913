/*
 * workers.c - the copy/verify thread pool (workers.h).
 * A worker owns its copier; the only shared things are the two queues.
 * A tree pool's workers have no copier: they run tree jobs (treework.h).
 * Descriptors: each holds at most FERRY_COPIER_FDS (fdlimit.h fits -j to
 * the limit), and none while idle once descriptors ran short.
 */
#include "workers.h"

#include "fsio.h"
#include "treework.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct worker {
        struct ferry_workers *pool;
        struct ferry_copier *copier;
        pthread_t thread;
};

struct ferry_workers {
        struct ferry_queue *work, *inbox;
        atomic_bool *stop;
        const struct ferry_tree_cfg *tree; /* a tree pool's */
        unsigned n;
        struct worker w[];
};

static void run_batch(struct worker *w, struct ferry_batch *b)
{
        for (size_t i = 0; i < b->n; i++) {
                struct ferry_item *it = &b->items[i];
                if (atomic_load(w->pool->stop)) {
                        it->result = R_NONE;
                        continue;
                }
                if (b->work & WORK_COPY)
                        ferry_copier_copy(w->copier, b, it);
                else
                        ferry_copier_verify(w->copier, b, it);
        }
}

/* The next batch; NULL when the queue closed. A worker about to wait for
 * work closes its cached directories once descriptors ran short in this
 * run: an idle worker must not hold what a busy one needs. */
static struct ferry_batch *next_batch(struct worker *w)
{
        void *item;
        if (ferry_queue_try_pop(w->pool->work, &item) == FERRY_QUEUE_OK)
                return item;
        if (ferry_fsio_fd_waits())
                ferry_copier_rest(w->copier);
        return ferry_queue_pop(w->pool->work, &item, -1) == FERRY_QUEUE_OK
                       ? item
                       : NULL;
}

/* A tree pool's thread: the jobs go back whatever happened (the
 * coordinator waits for every one). */
static void *tree_main(void *arg)
{
        struct worker *w = arg;
        void *t;
        while (ferry_queue_pop(w->pool->work, &t, -1) == FERRY_QUEUE_OK) {
                ferry_treework_run(w->pool->tree, t);
                ferry_queue_push(w->pool->inbox, t);
        }
        return NULL;
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        struct ferry_batch *b;
        while ((b = next_batch(w))) {
                run_batch(w, b);
                /* the journal drains the inbox until every batch is back */
                if (ferry_queue_push(w->pool->inbox, b) != FERRY_QUEUE_OK)
                        ferry_batch_free(b);
        }
        return NULL;
}

/* Starts n threads of p (copy pools: cfg for their copiers). */
static int start(struct ferry_workers *p, const struct ferry_copy_cfg *cfg,
                 unsigned n, struct ferry_workers **out)
{
        int rc = 0;
        for (unsigned i = 0; i < n; i++) {
                struct worker *w = &p->w[i];
                w->pool = p;
                if (cfg && (rc = ferry_copier_new(cfg, &w->copier)))
                        break;
                if (pthread_create(&w->thread, NULL,
                                   cfg ? worker_main : tree_main, w)) {
                        ferry_copier_free(w->copier);
                        rc = EAGAIN;
                        break;
                }
                p->n++;
        }
        if (rc && !p->n) {
                free(p);
                return rc;
        }
        *out = p; /* fewer threads than asked still make progress */
        return 0;
}

int ferry_workers_start(const struct ferry_copy_cfg *cfg, unsigned n,
                        struct ferry_queue *work, struct ferry_queue *inbox,
                        struct ferry_workers **out)
{
        struct ferry_workers *p =
                calloc(1, sizeof(*p) + n * sizeof(struct worker));
        if (!p)
                return ENOMEM;
        p->work = work;
        p->inbox = inbox;
        p->stop = cfg->stop;
        return start(p, cfg, n, out);
}

int ferry_workers_start_tree(const struct ferry_tree_cfg *cfg, unsigned n,
                             struct ferry_queue *work,
                             struct ferry_queue *inbox,
                             struct ferry_workers **out)
{
        struct ferry_workers *p =
                calloc(1, sizeof(*p) + n * sizeof(struct worker));
        if (!p)
                return ENOMEM;
        p->work = work;
        p->inbox = inbox;
        p->tree = cfg;
        return start(p, NULL, n, out);
}

void ferry_workers_join(struct ferry_workers *p)
{
        if (!p)
                return;
        for (unsigned i = 0; i < p->n; i++) {
                pthread_join(p->w[i].thread, NULL);
                ferry_copier_free(p->w[i].copier); /* NULL: a tree pool */
        }
        free(p);
}
