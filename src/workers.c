/*
 * workers.c - the copy/verify thread pool (workers.h).
 * A worker owns its copier; the shared things are the two queues, the
 * limit (atomic; a worker at or above it parks on the pool's condition),
 * the counters the -j auto tuner reads (atomic) and the pool of large
 * buffers the copiers borrow from (bufpool.h), freed at the join.
 * Once the work queue closed, a worker frees its copier and stays for the
 * end-of-run tree work (treework.h) until the pool is joined.
 * Descriptors: each holds at most FERRY_COPIER_FDS (fdlimit.h fits the
 * most threads to the limit), and none while idle once descriptors ran
 * short.
 */
#define _GNU_SOURCE
#include "workers.h"

#include "fsio.h"
#include "treework.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct worker {
        struct ferry_workers *pool;
        struct ferry_copier *copier;
        unsigned index; /* parks while index >= limit */
        pthread_t thread;
};

struct ferry_workers {
        struct ferry_copy_cfg cfg;  /* for the copiers of threads to come */
        struct ferry_bufpool *bufs; /* the copiers' large buffers (cfg.bufs) */
        struct ferry_queue *work, *inbox;
        atomic_bool *stop;
        atomic_uint limit;
        atomic_uint_least64_t items, bytes, busy_ns;
        /* lock guards what follows */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned copying; /* workers not done with the work queue */
        unsigned serving; /* workers in the tree work's loop */
        bool work_closed; /* ferry_workers_idle: parked workers leave */
        bool closing;     /* ferry_workers_join: leave */
        struct ferry_queue *tree_work, *tree_inbox; /* NULL: none now */
        unsigned n, max; /* threads started, and room for */
        struct worker w[];
};

static uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Items i on of b, not started after the batch ran for ran ns: given
 * back to the coordinator. */
static bool give_back(struct ferry_batch *b, size_t i, uint64_t ran)
{
        if (!b->give_back_ns || !i || ran < b->give_back_ns)
                return false;
        b->given_back = i;
        for (; i < b->n; i++)
                b->items[i].result = R_NONE;
        return true;
}

static void run_batch(struct worker *w, struct ferry_batch *b)
{
        struct ferry_workers *p = w->pool;
        uint64_t start = mono_ns();
        for (size_t i = 0; i < b->n; i++) {
                struct ferry_item *it = &b->items[i];
                if (atomic_load(p->stop)) {
                        it->result = R_NONE;
                        continue;
                }
                uint64_t t0 = mono_ns();
                if (give_back(b, i, t0 - start))
                        return;
                if (b->work & WORK_COPY)
                        ferry_copier_copy(w->copier, b, it);
                else
                        ferry_copier_verify(w->copier, b, it);
                atomic_fetch_add(&p->busy_ns, mono_ns() - t0);
                atomic_fetch_add(&p->bytes, (uint64_t)it->st.size);
                atomic_fetch_add(&p->items, 1);
        }
}

static bool parked(const struct worker *w)
{
        return w->index >= atomic_load(&w->pool->limit);
}

/* Waits while w is above the limit and the work queue is open. */
static void wait_unparked(struct worker *w)
{
        struct ferry_workers *p = w->pool;
        if (!parked(w))
                return;
        ferry_copier_rest(w->copier); /* a parked worker holds no directory */
        pthread_mutex_lock(&p->lock);
        while (parked(w) && !p->work_closed)
                pthread_cond_wait(&p->cond, &p->lock);
        pthread_mutex_unlock(&p->lock);
}

/* The next batch; NULL when the queue closed. A worker about to wait for
 * work closes its cached directories once descriptors ran short in this
 * run: an idle worker must not hold what a busy one needs. A worker
 * pushed above the limit while it waited gives the batch back. */
static struct ferry_batch *next_batch(struct worker *w)
{
        struct ferry_workers *p = w->pool;
        for (;;) {
                wait_unparked(w);
                void *item;
                if (ferry_queue_try_pop(p->work, &item) != FERRY_QUEUE_OK) {
                        if (ferry_fsio_fd_waits())
                                ferry_copier_rest(w->copier);
                        if (ferry_queue_pop(p->work, &item, -1) !=
                            FERRY_QUEUE_OK)
                                return NULL;
                }
                /* room for it: the queue holds every batch in flight */
                if (!parked(w) ||
                    ferry_queue_push(p->work, item) != FERRY_QUEUE_OK)
                        return item;
        }
}

/* After the copy: tree jobs from the queues ferry_workers_serve_tree
 * gives, until ferry_workers_end_tree closes them or the pool is joined. */
/* Serves one tree work after another (a shared job's metadata pass makes
 * one per claim) until the pool is joined. */
static void serve_tree(struct ferry_workers *p)
{
        pthread_mutex_lock(&p->lock);
        p->copying--;
        pthread_cond_broadcast(&p->cond);
        for (;;) {
                /* end_tree clears tree_work under the lock it closes the
                 * queue with: a thread back from one finds it NULL */
                while (!p->closing && !p->tree_work)
                        pthread_cond_wait(&p->cond, &p->lock);
                if (p->closing)
                        break;
                struct ferry_queue *work = p->tree_work;
                struct ferry_queue *inbox = p->tree_inbox;
                p->serving++;
                pthread_mutex_unlock(&p->lock);
                void *t;
                /* every job goes back: the coordinator waits for each */
                while (ferry_queue_pop(work, &t, -1) == FERRY_QUEUE_OK) {
                        ferry_treework_run(t);
                        ferry_queue_push(inbox, t);
                }
                pthread_mutex_lock(&p->lock);
                p->serving--;
                pthread_cond_broadcast(&p->cond);
        }
        pthread_mutex_unlock(&p->lock);
}

static void *worker_main(void *arg)
{
        ferry_thread_quiet();
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

int ferry_workers_start(const struct ferry_copy_cfg *cfg, unsigned max,
                        unsigned limit, struct ferry_queue *work,
                        struct ferry_queue *inbox, struct ferry_workers **out)
{
        max = max ? max : 1;
        struct ferry_workers *p =
                calloc(1, sizeof(*p) + max * sizeof(struct worker));
        if (!p)
                return ENOMEM;
        p->cfg = *cfg;
        if (ferry_bufpool_new(FERRY_BUFPOOL_BUDGET, FERRY_BUFPOOL_SIZE,
                              &p->bufs)) {
                free(p);
                return ENOMEM;
        }
        p->cfg.bufs = p->bufs;
        p->work = work;
        p->inbox = inbox;
        p->stop = cfg->stop;
        p->max = max;
        atomic_init(&p->limit, limit < 1 ? 1 : limit > max ? max : limit);
        if (pthread_mutex_init(&p->lock, NULL)) {
                ferry_bufpool_free(p->bufs);
                free(p);
                return EAGAIN;
        }
        if (pthread_cond_init(&p->cond, NULL)) {
                pthread_mutex_destroy(&p->lock);
                ferry_bufpool_free(p->bufs);
                free(p);
                return EAGAIN;
        }
        *out = p;
        return 0;
}

/* One more thread; 0 or an errno. */
static int start_one(struct ferry_workers *p)
{
        struct worker *w = &p->w[p->n];
        w->pool = p;
        w->index = p->n;
        int rc = ferry_copier_new(&p->cfg, &w->copier);
        if (rc)
                return rc;
        pthread_mutex_lock(&p->lock);
        p->copying++;
        pthread_mutex_unlock(&p->lock);
        /* the first thread the run needs; more can wait for a later try */
        if (p->n ? pthread_create(&w->thread, NULL, worker_main, w)
                 : ferry_thread_start(&w->thread, worker_main, w)) {
                pthread_mutex_lock(&p->lock);
                p->copying--;
                pthread_mutex_unlock(&p->lock);
                ferry_copier_free(w->copier);
                w->copier = NULL;
                return EAGAIN;
        }
        pthread_mutex_lock(&p->lock);
        p->n++;
        pthread_mutex_unlock(&p->lock);
        return 0;
}

int ferry_workers_want(struct ferry_workers *p, unsigned want)
{
        if (!p)
                return 0; /* no pool: the caller works alone */
        unsigned limit = atomic_load(&p->limit);
        want = want < limit ? want : limit;
        int rc = 0;
        /* n changes on this thread only: reading it needs no lock; after
         * the copy a thread may still start, for the tree work */
        while (p->n < want && !p->closing && !(rc = start_one(p)))
                ;
        return p->n ? 0 : rc;
}

void ferry_workers_set_limit(struct ferry_workers *p, unsigned n)
{
        if (!p)
                return;
        n = n < 1 ? 1 : n > p->max ? p->max : n;
        unsigned was = atomic_exchange(&p->limit, n);
        if (n > was) { /* wake the parked */
                pthread_mutex_lock(&p->lock);
                pthread_cond_broadcast(&p->cond);
                pthread_mutex_unlock(&p->lock);
        }
}

unsigned ferry_workers_limit(const struct ferry_workers *p)
{
        return p ? atomic_load(&p->limit) : 0;
}

void ferry_workers_stats(struct ferry_workers *p,
                         struct ferry_workers_stats *out)
{
        out->items = atomic_load(&p->items);
        out->bytes = atomic_load(&p->bytes);
        out->busy_ns = atomic_load(&p->busy_ns);
}

void ferry_workers_idle(struct ferry_workers *p)
{
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        p->work_closed = true; /* the parked see the closed queue */
        pthread_cond_broadcast(&p->cond);
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
        p->work_closed = true;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->n; i++) {
                pthread_join(p->w[i].thread, NULL);
                ferry_copier_free(p->w[i].copier);
        }
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        ferry_bufpool_free(p->bufs); /* every copier gave its buffer back */
        free(p);
}
