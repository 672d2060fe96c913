/*
 * queue.h - a bounded, blocking, multi-producer multi-consumer queue of
 * pointers. Every queue between ferry's threads is one of these, so memory
 * stays flat whatever the size of the tree.
 *
 * Calling sequence:
 *   ferry_queue_init(&q, capacity);
 *   producers: ferry_queue_push(&q, item)   blocks while full
 *   consumers: ferry_queue_pop(&q, &item, timeout_ms)
 *   ferry_queue_close(&q)   wakes everyone; pops drain what is left, then
 *                           return FERRY_QUEUE_CLOSED; pushes fail
 *   ferry_queue_release(&q)  items still inside are the caller's to free
 *                            (drain with ferry_queue_try_pop first)
 * The queue never owns the items; they pass from producer to consumer.
 */
#ifndef FERRY_QUEUE_H
#define FERRY_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

enum { FERRY_QUEUE_OK = 0, FERRY_QUEUE_CLOSED = 1, FERRY_QUEUE_TIMEOUT = 2 };

struct ferry_queue {
        pthread_mutex_t lock;
        pthread_cond_t not_empty;
        pthread_cond_t not_full;
        void **items;
        size_t cap, head, len;
        bool closed;
};

int ferry_queue_init(struct ferry_queue *q, size_t capacity);
void ferry_queue_release(struct ferry_queue *q);
/* Returns FERRY_QUEUE_OK, or FERRY_QUEUE_CLOSED (item not taken). */
int ferry_queue_push(struct ferry_queue *q, void *item);
/* timeout_ms < 0 waits forever. */
int ferry_queue_pop(struct ferry_queue *q, void **item, int timeout_ms);
/* Non-blocking; FERRY_QUEUE_TIMEOUT when empty. */
int ferry_queue_try_pop(struct ferry_queue *q, void **item);
void ferry_queue_close(struct ferry_queue *q);
size_t ferry_queue_len(struct ferry_queue *q);

#endif
