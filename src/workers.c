/*
 * workers.c - the copy/verify thread pool (workers.h).
 * A worker owns its copier; the only shared things are the two queues.
 * Once the work queue closed, a worker frees its copier and stays for the
 * end-of-run tree work (treework.h) until the pool is joined.
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
        /* the tree work: lock guards what follows */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned copying; /* workers not done with the work queue */
        unsigned serving; /* workers in the tree work's loop */
        bool closing;     /* ferry_workers_join: leave */
        struct ferry_queue *tree_work, *tree_inbox; /* NULL: none now */
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

/* After the copy: tree jobs from the queues ferry_workers_serve_tree
 * gives, until ferry_workers_end_tree closes them or the pool is joined. */
static void serve_tree(struct ferry_workers *p)
{
        pthread_mutex_lock(&p->lock);
        p->copying--;
        pthread_cond_broadcast(&p->cond);
        while (!p->closing && !p->tree_work)
                pthread_cond_wait(&p->cond, &p->lock);
        struct ferry_queue *work = p->closing ? NULL : p->tree_work;
        struct ferry_queue *inbox = p->tree_inbox;
        p->serving += work != NULL;
        pthread_mutex_unlock(&p->lock);
        if (!work)
                return;
        void *t;
        /* every job goes back: the coordinator waits for each */
        while (ferry_queue_pop(work, &t, -1) == FERRY_QUEUE_OK) {
                ferry_treework_run(t);
                ferry_queue_push(inbox, t);
        }
        pthread_mutex_lock(&p->lock);
        p->serving--;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        struct ferry_batch *b;
        while ((b = next_batch(w))) {
                run_batch(w, b);
                /* the coordinator drains the inbox until every batch is back */
                if (ferry_queue_push(w->pool->inbox, b) != FERRY_QUEUE_OK)
                        ferry_batch_free(b);
        }
        ferry_copier_free(w->copier); /* its buffer and directories */
        w->copier = NULL;
        serve_tree(w->pool);
        return NULL;
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
        if (pthread_mutex_init(&p->lock, NULL)) {
                free(p);
                return EAGAIN;
        }
        if (pthread_cond_init(&p->cond, NULL)) {
                pthread_mutex_destroy(&p->lock);
                free(p);
                return EAGAIN;
        }
        int rc = 0;
        for (unsigned i = 0; i < n; i++) {
                struct worker *w = &p->w[i];
                w->pool = p;
                if ((rc = ferry_copier_new(cfg, &w->copier)))
                        break;
                pthread_mutex_lock(&p->lock);
                p->copying++;
                pthread_mutex_unlock(&p->lock);
                if (pthread_create(&w->thread, NULL, worker_main, w)) {
                        pthread_mutex_lock(&p->lock);
                        p->copying--;
                        pthread_mutex_unlock(&p->lock);
                        ferry_copier_free(w->copier);
                        rc = EAGAIN;
                        break;
                }
                p->n++;
        }
        if (rc && !p->n) {
                pthread_cond_destroy(&p->cond);
                pthread_mutex_destroy(&p->lock);
                free(p);
                return rc;
        }
        *out = p; /* fewer threads than asked still make progress */
        return 0;
}

void ferry_workers_idle(struct ferry_workers *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        while (p->copying)
                pthread_cond_wait(&p->cond, &p->lock);
        pthread_mutex_unlock(&p->lock);
}

unsigned ferry_workers_count(const struct ferry_workers *p)
{
        return p ? p->n : 0;
}

void ferry_workers_serve_tree(struct ferry_workers *p, struct ferry_queue *work,
                              struct ferry_queue *inbox)
{
        pthread_mutex_lock(&p->lock);
        p->tree_work = work;
        p->tree_inbox = inbox;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

void ferry_workers_end_tree(struct ferry_workers *p)
{
        pthread_mutex_lock(&p->lock);
        if (p->tree_work)
                ferry_queue_close(p->tree_work);
        p->tree_work = p->tree_inbox = NULL; /* a late worker waits on */
        while (p->serving)
                pthread_cond_wait(&p->cond, &p->lock);
        pthread_mutex_unlock(&p->lock);
}

void ferry_workers_join(struct ferry_workers *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        p->closing = true;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->n; i++) {
                pthread_join(p->w[i].thread, NULL);
                ferry_copier_free(p->w[i].copier);
        }
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
}
