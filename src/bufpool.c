/*
 * bufpool.c - the bounded pool of large I/O buffers (bufpool.h): a stack
 * of free buffers under one mutex, and a count of those made, which never
 * passes the budget.
 */
#include "bufpool.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>

struct ferry_bufpool {
        size_t size;  /* of each buffer */
        unsigned max; /* buffers the budget allows */
        /* lock guards what follows */
        pthread_mutex_t lock;
        unsigned made;  /* buffers allocated so far */
        unsigned nfree; /* free[0 .. nfree) are not lent */
        void *free[];
};

int ferry_bufpool_new(size_t budget, size_t size, struct ferry_bufpool **out)
{
        size = size ? size : 1;
        size_t max = budget / size;
        max = max ? max : 1;
        if (max > 65536)
                max = 65536;
        struct ferry_bufpool *p = calloc(1, sizeof(*p) + max * sizeof(void *));
        if (!p)
                return ENOMEM;
        p->size = size;
        p->max = (unsigned)max;
        if (pthread_mutex_init(&p->lock, NULL)) {
                free(p);
                return ENOMEM;
        }
        *out = p;
        return 0;
}

void ferry_bufpool_free(struct ferry_bufpool *p)
{
        if (!p)
                return;
        for (unsigned i = 0; i < p->nfree; i++)
                free(p->free[i]);
        pthread_mutex_destroy(&p->lock);
        free(p);
}

size_t ferry_bufpool_size(const struct ferry_bufpool *p)
{
        return p ? p->size : 0;
}

void *ferry_bufpool_try_get(struct ferry_bufpool *p)
{
        if (!p)
                return NULL;
        void *b = NULL;
        bool make = false;
        pthread_mutex_lock(&p->lock);
        if (p->nfree)
                b = p->free[--p->nfree];
        else if (p->made < p->max)
                make = true, p->made++; /* room reserved for it */
        pthread_mutex_unlock(&p->lock);
        if (!make)
                return b;
        if ((b = malloc(p->size)))
                return b;
        pthread_mutex_lock(&p->lock);
        p->made--;
        pthread_mutex_unlock(&p->lock);
        return NULL;
}

void ferry_bufpool_put(struct ferry_bufpool *p, void *buf)
{
        if (!p || !buf)
                return;
        pthread_mutex_lock(&p->lock);
        p->free[p->nfree++] = buf; /* at most made <= max lent */
        pthread_mutex_unlock(&p->lock);
}
