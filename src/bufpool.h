/*
 * bufpool.h - a job's bounded pool of large I/O buffers, shared by its
 * threads, so that memory does not grow with the copies in flight.
 *
 * Each copier keeps a small buffer of its own (FERRY_COPIER_BUF, copier.h),
 * enough for the small files that are most of a tree. A read of a larger
 * file, or a chunk stream (chunks.h), borrows one buffer of the pool's size
 * for as long as it streams, and gives it back. The pool holds at most
 * budget / size buffers, made when first borrowed and kept until the pool
 * is freed. Borrowing never waits: when every buffer is lent out, the
 * caller gets NULL and streams through its own small buffer (slower by the
 * count of calls, never stuck, never more memory).
 *
 * Thread-safe: any thread may borrow and give back (one mutex).
 *
 * Calling sequence:
 *   ferry_bufpool_new(FERRY_BUFPOOL_BUDGET, FERRY_BUFPOOL_SIZE, &p);
 *   any thread: void *b = ferry_bufpool_try_get(p);   NULL: none free
 *               ... up to ferry_bufpool_size(p) bytes in b ...
 *               ferry_bufpool_put(p, b);
 *   ferry_bufpool_free(p);   every buffer given back first
 */
#ifndef FERRY_BUFPOOL_H
#define FERRY_BUFPOOL_H

#include <stddef.h>

/* One pooled buffer: a whole read or write of a large file (the size
 * reads had before the pool), and the bytes of all of them together. */
#define FERRY_BUFPOOL_SIZE   (128 * 1024)
#define FERRY_BUFPOOL_BUDGET (2 * 1024 * 1024)

struct ferry_bufpool;

/* A pool of at most budget / size (at least 1) buffers of size bytes; no
 * buffer is made yet. 0 or ENOMEM. Caller frees with ferry_bufpool_free. */
int ferry_bufpool_new(size_t budget, size_t size, struct ferry_bufpool **out);
/* Frees the pool and its buffers; all of them must have been given back.
 * NULL: nothing. */
void ferry_bufpool_free(struct ferry_bufpool *p);
/* The size of each buffer (0 for a NULL pool). */
size_t ferry_bufpool_size(const struct ferry_bufpool *p);
/* Lends a buffer of ferry_bufpool_size bytes, or NULL when none is free
 * (or p is NULL, or memory ran out): never waits. The caller owns it until
 * ferry_bufpool_put. */
void *ferry_bufpool_try_get(struct ferry_bufpool *p);
/* Gives back a buffer ferry_bufpool_try_get lent (NULL: nothing). */
void ferry_bufpool_put(struct ferry_bufpool *p, void *buf);

#endif
