/*
 * test_bufpool.c - the bounded pool of large buffers (src/bufpool.h): it
 * lends no more than its budget allows, never waits, reuses what is given
 * back, and stays within the budget when many threads borrow at once.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "bufpool.h"

#include <pthread.h>

static void test_budget_bounds_the_buffers(void)
{
        struct ferry_bufpool *p;
        CHECK_EQ(ferry_bufpool_new(4 * 1024, 1024, &p), 0);
        CHECK_EQ(ferry_bufpool_size(p), 1024);
        void *b[5];
        for (int i = 0; i < 4; i++) {
                b[i] = ferry_bufpool_try_get(p);
                CHECK(b[i] != NULL);
                if (b[i])
                        memset(b[i], i, 1024); /* all of it is ours */
        }
        b[4] = ferry_bufpool_try_get(p); /* the budget is spent: no wait */
        CHECK(b[4] == NULL);
        ferry_bufpool_put(p, b[2]);
        void *again = ferry_bufpool_try_get(p);
        CHECK(again == b[2]); /* given back, lent again, none made */
        CHECK(ferry_bufpool_try_get(p) == NULL);
        ferry_bufpool_put(p, again);
        for (int i = 0; i < 4; i++)
                if (i != 2)
                        ferry_bufpool_put(p, b[i]);
        ferry_bufpool_free(p);
}

static void test_small_budget_and_null_pool(void)
{
        struct ferry_bufpool *p;
        CHECK_EQ(ferry_bufpool_new(10, 1024, &p), 0); /* below one: one */
        void *b = ferry_bufpool_try_get(p);
        CHECK(b != NULL);
        CHECK(ferry_bufpool_try_get(p) == NULL);
        ferry_bufpool_put(p, b);
        ferry_bufpool_free(p);
        CHECK(ferry_bufpool_try_get(NULL) == NULL);
        CHECK_EQ(ferry_bufpool_size(NULL), 0);
        ferry_bufpool_put(NULL, NULL);
        ferry_bufpool_free(NULL);
}

#define THREADS 8
#define ROUNDS  2000

struct shared {
        struct ferry_bufpool *p;
        atomic_int lent, most;
};

static void *borrower(void *arg)
{
        struct shared *s = arg;
        for (int i = 0; i < ROUNDS; i++) {
                unsigned char *b = ferry_bufpool_try_get(s->p);
                if (!b)
                        continue;
                int n = atomic_fetch_add(&s->lent, 1) + 1;
                int m = atomic_load(&s->most);
                while (n > m && !atomic_compare_exchange_weak(&s->most, &m, n))
                        ;
                b[0] = (unsigned char)i; /* no other thread holds it */
                b[4095] = b[0];
                CHECK(b[4095] == (unsigned char)i);
                atomic_fetch_sub(&s->lent, 1);
                ferry_bufpool_put(s->p, b);
        }
        return NULL;
}

static void test_threads_stay_within_budget(void)
{
        struct shared s = {0};
        CHECK_EQ(ferry_bufpool_new(3 * 4096, 4096, &s.p), 0);
        pthread_t t[THREADS];
        for (int i = 0; i < THREADS; i++)
                CHECK_EQ(pthread_create(&t[i], NULL, borrower, &s), 0);
        for (int i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        CHECK(atomic_load(&s.most) >= 1);
        CHECK(atomic_load(&s.most) <= 3);
        CHECK_EQ(atomic_load(&s.lent), 0);
        ferry_bufpool_free(s.p);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_budget_bounds_the_buffers);
        RUN(test_small_budget_and_null_pool);
        RUN(test_threads_stay_within_budget);
        return unit_done();
}
