/*
 * queue.c - bounded blocking MPMC queue (see queue.h).
 * A ring buffer under one mutex: the items are batches, so contention is low.
 */
#define _GNU_SOURCE
#include "queue.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int ferry_queue_init(struct ferry_queue *q, size_t capacity)
{
        q->items = calloc(capacity, sizeof(*q->items));
        if (!q->items)
                return ENOMEM;
        q->cap = capacity;
        q->head = q->len = 0;
        q->closed = false;
        pthread_mutex_init(&q->lock, NULL);
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&q->not_empty, &attr);
        pthread_cond_init(&q->not_full, &attr);
        pthread_condattr_destroy(&attr);
        return 0;
}

void ferry_queue_release(struct ferry_queue *q)
{
        if (!q->items)
                return;
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->not_empty);
        pthread_cond_destroy(&q->not_full);
        free(q->items);
        q->items = NULL;
}

int ferry_queue_push(struct ferry_queue *q, void *item)
{
        pthread_mutex_lock(&q->lock);
        while (q->len == q->cap && !q->closed)
                pthread_cond_wait(&q->not_full, &q->lock);
        if (q->closed) {
                pthread_mutex_unlock(&q->lock);
                return FERRY_QUEUE_CLOSED;
        }
        q->items[(q->head + q->len) % q->cap] = item;
        q->len++;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->lock);
        return FERRY_QUEUE_OK;
}

static void take(struct ferry_queue *q, void **item)
{
        *item = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->len--;
        pthread_cond_signal(&q->not_full);
}

int ferry_queue_pop(struct ferry_queue *q, void **item, int timeout_ms)
{
        struct timespec deadline;
        if (timeout_ms >= 0) {
                clock_gettime(CLOCK_MONOTONIC, &deadline);
                deadline.tv_sec += timeout_ms / 1000;
                deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
                if (deadline.tv_nsec >= 1000000000) {
                        deadline.tv_sec++;
                        deadline.tv_nsec -= 1000000000;
                }
        }
        int rc = FERRY_QUEUE_OK;
        pthread_mutex_lock(&q->lock);
        while (q->len == 0 && !q->closed) {
                if (timeout_ms < 0) {
                        pthread_cond_wait(&q->not_empty, &q->lock);
                } else if (pthread_cond_timedwait(&q->not_empty, &q->lock,
                                                  &deadline) == ETIMEDOUT) {
                        break;
                }
        }
        if (q->len)
                take(q, item);
        else
                rc = q->closed ? FERRY_QUEUE_CLOSED : FERRY_QUEUE_TIMEOUT;
        pthread_mutex_unlock(&q->lock);
        return rc;
}

int ferry_queue_try_pop(struct ferry_queue *q, void **item)
{
        int rc = FERRY_QUEUE_TIMEOUT;
        pthread_mutex_lock(&q->lock);
        if (q->len) {
                take(q, item);
                rc = FERRY_QUEUE_OK;
        } else if (q->closed) {
                rc = FERRY_QUEUE_CLOSED;
        }
        pthread_mutex_unlock(&q->lock);
        return rc;
}

void ferry_queue_close(struct ferry_queue *q)
{
        pthread_mutex_lock(&q->lock);
        q->closed = true;
        pthread_cond_broadcast(&q->not_empty);
        pthread_cond_broadcast(&q->not_full);
        pthread_mutex_unlock(&q->lock);
}

size_t ferry_queue_len(struct ferry_queue *q)
{
        pthread_mutex_lock(&q->lock);
        size_t n = q->len;
        pthread_mutex_unlock(&q->lock);
        return n;
}
