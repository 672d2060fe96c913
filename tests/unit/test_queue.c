/*
 * test_queue.c - the bounded MPMC queue (src/queue.h): FIFO order,
 * blocking when full, close semantics, timeouts, and a many-thread stress
 * whose counts must add up (also run under ThreadSanitizer).
 */
#define _GNU_SOURCE
#include "unit.h"

#include "queue.h"

#include <pthread.h>

#define P(x) ((void *)(uintptr_t)(x))
#define U(p) ((uintptr_t)(p))

static void test_fifo_order(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 4), 0);
        for (uintptr_t i = 1; i <= 4; i++)
                CHECK_EQ(ferry_queue_push(&q, P(i)), FERRY_QUEUE_OK);
        CHECK_EQ(ferry_queue_len(&q), 4);
        void *it = NULL;
        for (uintptr_t i = 1; i <= 4; i++) {
                CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_OK);
                CHECK_EQ(U(it), i);
        }
        CHECK_EQ(ferry_queue_len(&q), 0);
        CHECK_EQ(ferry_queue_try_pop(&q, &it), FERRY_QUEUE_TIMEOUT);

        /* interleaved pushes and pops wrap the ring many times */
        uintptr_t next_in = 1, next_out = 1;
        bool ordered = true;
        ferry_queue_push(&q, P(next_in++)); /* one stays in, offsetting */
        for (int round = 0; round < 50; round++) {
                int k = 1 + round % 3;
                for (int i = 0; i < k; i++)
                        ferry_queue_push(&q, P(next_in++));
                for (int i = 0; i < k; i++) {
                        if (ferry_queue_try_pop(&q, &it) != FERRY_QUEUE_OK ||
                            U(it) != next_out++)
                                ordered = false;
                }
        }
        while (ferry_queue_try_pop(&q, &it) == FERRY_QUEUE_OK)
                if (U(it) != next_out++)
                        ordered = false;
        CHECK(ordered);
        CHECK_EQ(next_out, next_in);
        ferry_queue_release(&q);
        ferry_queue_release(&q); /* a second release does nothing */
}

static void test_capacity_one_and_null_items(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 1), 0);
        void *it = P(1);
        CHECK_EQ(ferry_queue_push(&q, NULL), FERRY_QUEUE_OK);
        CHECK_EQ(ferry_queue_len(&q), 1);
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_OK);
        CHECK(it == NULL);
        CHECK_EQ(ferry_queue_push(&q, P(7)), FERRY_QUEUE_OK);
        CHECK_EQ(ferry_queue_try_pop(&q, &it), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 7);
        ferry_queue_release(&q);
}

struct pusher {
        struct ferry_queue *q;
        void *item;
        int rc;
        atomic_bool done;
};

static void *push_thread(void *arg)
{
        struct pusher *p = arg;
        p->rc = ferry_queue_push(p->q, p->item);
        atomic_store(&p->done, true);
        return NULL;
}

static void test_push_blocks_when_full(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 2), 0);
        ferry_queue_push(&q, P(1));
        ferry_queue_push(&q, P(2));
        struct pusher p = {.q = &q, .item = P(3), .rc = -1};
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, push_thread, &p), 0);
        unit_sleep_ms(150);
        CHECK(!atomic_load(&p.done)); /* still blocked: the queue is full */
        CHECK_EQ(ferry_queue_len(&q), 2);
        void *it = NULL;
        CHECK_EQ(ferry_queue_pop(&q, &it, -1), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 1);
        pthread_join(t, NULL);
        CHECK(atomic_load(&p.done));
        CHECK_EQ(p.rc, FERRY_QUEUE_OK);
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 2);
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 3);
        ferry_queue_release(&q);
}

static void test_close_drains_then_closed(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 4), 0);
        ferry_queue_push(&q, P(10));
        ferry_queue_push(&q, P(11));
        ferry_queue_close(&q);
        void *it = NULL;
        CHECK_EQ(ferry_queue_push(&q, P(12)), FERRY_QUEUE_CLOSED);
        CHECK_EQ(ferry_queue_len(&q), 2); /* the refused item is not inside */
        CHECK_EQ(ferry_queue_pop(&q, &it, -1), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 10);
        CHECK_EQ(ferry_queue_try_pop(&q, &it), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 11);
        it = P(99);
        CHECK_EQ(ferry_queue_pop(&q, &it, -1), FERRY_QUEUE_CLOSED);
        CHECK_EQ(ferry_queue_pop(&q, &it, 100), FERRY_QUEUE_CLOSED);
        CHECK_EQ(ferry_queue_try_pop(&q, &it), FERRY_QUEUE_CLOSED);
        CHECK_EQ(U(it), 99);   /* untouched when nothing was taken */
        ferry_queue_close(&q); /* closing twice is harmless */
        ferry_queue_release(&q);
}

struct popper {
        struct ferry_queue *q;
        int timeout_ms;
        int rc;
        void *item;
        double waited;
};

static void *pop_thread(void *arg)
{
        struct popper *p = arg;
        double t0 = unit_now();
        p->rc = ferry_queue_pop(p->q, &p->item, p->timeout_ms);
        p->waited = unit_now() - t0;
        return NULL;
}

static void test_close_wakes_waiters(void)
{
        /* a consumer waiting forever on an empty queue */
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 1), 0);
        struct popper c = {.q = &q, .timeout_ms = -1, .rc = -1};
        pthread_t tc;
        CHECK_EQ(pthread_create(&tc, NULL, pop_thread, &c), 0);
        unit_sleep_ms(50);
        ferry_queue_close(&q);
        pthread_join(tc, NULL);
        CHECK_EQ(c.rc, FERRY_QUEUE_CLOSED);
        ferry_queue_release(&q);

        /* a producer blocked on a full queue */
        CHECK_EQ(ferry_queue_init(&q, 1), 0);
        ferry_queue_push(&q, P(1));
        struct pusher p = {.q = &q, .item = P(2), .rc = -1};
        pthread_t tp;
        CHECK_EQ(pthread_create(&tp, NULL, push_thread, &p), 0);
        unit_sleep_ms(50);
        ferry_queue_close(&q);
        pthread_join(tp, NULL);
        CHECK_EQ(p.rc, FERRY_QUEUE_CLOSED);
        void *it = NULL;
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_OK);
        CHECK_EQ(U(it), 1); /* only the item pushed before the close */
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_CLOSED);
        ferry_queue_release(&q);
}

static void test_timeouts(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 2), 0);
        void *it = P(5);
        double t0 = unit_now();
        CHECK_EQ(ferry_queue_pop(&q, &it, 0), FERRY_QUEUE_TIMEOUT);
        CHECK(unit_now() - t0 < 1.0);
        t0 = unit_now();
        CHECK_EQ(ferry_queue_pop(&q, &it, 120), FERRY_QUEUE_TIMEOUT);
        double waited = unit_now() - t0;
        CHECK(waited >= 0.110);
        CHECK(waited < 3.0);
        /* a timeout over a second (tv_nsec carry) */
        t0 = unit_now();
        CHECK_EQ(ferry_queue_pop(&q, &it, 1050), FERRY_QUEUE_TIMEOUT);
        waited = unit_now() - t0;
        CHECK(waited >= 1.04);
        CHECK(waited < 4.0);
        CHECK_EQ(U(it), 5);

        /* a timed wait ends early when an item arrives */
        struct popper c = {.q = &q, .timeout_ms = 5000, .rc = -1};
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, pop_thread, &c), 0);
        unit_sleep_ms(50);
        CHECK_EQ(ferry_queue_push(&q, P(42)), FERRY_QUEUE_OK);
        pthread_join(t, NULL);
        CHECK_EQ(c.rc, FERRY_QUEUE_OK);
        CHECK_EQ(U(c.item), 42);
        CHECK(c.waited < 4.0);

        /* and an untimed one too */
        c = (struct popper){.q = &q, .timeout_ms = -1, .rc = -1};
        CHECK_EQ(pthread_create(&t, NULL, pop_thread, &c), 0);
        unit_sleep_ms(50);
        CHECK_EQ(ferry_queue_push(&q, P(43)), FERRY_QUEUE_OK);
        pthread_join(t, NULL);
        CHECK_EQ(c.rc, FERRY_QUEUE_OK);
        CHECK_EQ(U(c.item), 43);
        ferry_queue_release(&q);
}

/* Stress: items are (producer << 32 | sequence), sequence from 1. */
#define PRODUCERS    4
#define CONSUMERS    4
#define PER_PRODUCER 10000

struct stress_producer {
        struct ferry_queue *q;
        uint64_t id;
        int failures;
};

struct stress_consumer {
        struct ferry_queue *q;
        bool timed;                /* pop with 1 ms timeouts */
        uint64_t count[PRODUCERS]; /* items seen per producer */
        uint64_t sum[PRODUCERS];   /* sum of their sequences */
        uint64_t last[PRODUCERS];  /* order check per producer */
        int out_of_order, bad_items, timeouts;
};

static void *stress_produce(void *arg)
{
        struct stress_producer *p = arg;
        for (uint64_t i = 1; i <= PER_PRODUCER; i++)
                if (ferry_queue_push(p->q, P(p->id << 32 | i)) !=
                    FERRY_QUEUE_OK)
                        p->failures++;
        return NULL;
}

static void *stress_consume(void *arg)
{
        struct stress_consumer *c = arg;
        for (;;) {
                void *it;
                int rc = ferry_queue_pop(c->q, &it, c->timed ? 1 : -1);
                if (rc == FERRY_QUEUE_TIMEOUT) {
                        c->timeouts++;
                        continue;
                }
                if (rc == FERRY_QUEUE_CLOSED)
                        return NULL;
                uint64_t v = U(it), pid = v >> 32, seq = v & 0xffffffffu;
                if (pid >= PRODUCERS || !seq || seq > PER_PRODUCER) {
                        c->bad_items++;
                        continue;
                }
                /* FIFO: one producer's items reach any one consumer in
                 * the order they were pushed */
                if (seq <= c->last[pid])
                        c->out_of_order++;
                c->last[pid] = seq;
                c->count[pid]++;
                c->sum[pid] += seq;
        }
}

static void test_mpmc_stress(void)
{
        struct ferry_queue q;
        CHECK_EQ(ferry_queue_init(&q, 16), 0);
        struct stress_producer prod[PRODUCERS];
        struct stress_consumer cons[CONSUMERS];
        pthread_t tp[PRODUCERS], tc[CONSUMERS];
        memset(cons, 0, sizeof(cons));
        for (int i = 0; i < CONSUMERS; i++) {
                cons[i].q = &q;
                cons[i].timed = i % 2;
                CHECK_EQ(pthread_create(&tc[i], NULL, stress_consume, &cons[i]),
                         0);
        }
        for (int i = 0; i < PRODUCERS; i++) {
                prod[i] = (struct stress_producer){&q, (uint64_t)i, 0};
                CHECK_EQ(pthread_create(&tp[i], NULL, stress_produce, &prod[i]),
                         0);
        }
        for (int i = 0; i < PRODUCERS; i++) {
                pthread_join(tp[i], NULL);
                CHECK_EQ(prod[i].failures, 0);
        }
        ferry_queue_close(&q);
        for (int i = 0; i < CONSUMERS; i++)
                pthread_join(tc[i], NULL);

        const uint64_t want_sum =
                (uint64_t)PER_PRODUCER * (PER_PRODUCER + 1) / 2;
        int out_of_order = 0, bad = 0;
        for (int p = 0; p < PRODUCERS; p++) {
                uint64_t count = 0, sum = 0;
                for (int i = 0; i < CONSUMERS; i++) {
                        count += cons[i].count[p];
                        sum += cons[i].sum[p];
                }
                CHECK_EQ(count, PER_PRODUCER);
                CHECK_EQ(sum, want_sum);
        }
        for (int i = 0; i < CONSUMERS; i++) {
                out_of_order += cons[i].out_of_order;
                bad += cons[i].bad_items;
        }
        CHECK_EQ(out_of_order, 0);
        CHECK_EQ(bad, 0);
        CHECK_EQ(ferry_queue_len(&q), 0);
        ferry_queue_release(&q);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_fifo_order);
        RUN(test_capacity_one_and_null_items);
        RUN(test_push_blocks_when_full);
        RUN(test_close_drains_then_closed);
        RUN(test_close_wakes_waiters);
        RUN(test_timeouts);
        RUN(test_mpmc_stress);
        return unit_done();
}
