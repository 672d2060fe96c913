/*
 * thread.h - starting the threads a run cannot do without.
 *
 * pthread_create fails with EAGAIN when the system is short of threads or
 * of memory for a stack for a moment (a loaded machine, a sanitizer's
 * shadow memory). For the first worker, the first scanner and the barrier
 * thread that is no reason to end a run that could go on a moment later,
 * so ferry_thread_start tries again for about two seconds. Threads a run
 * can do without (more workers, chunk helpers) use pthread_create once.
 */
#ifndef FERRY_THREAD_H
#define FERRY_THREAD_H

#include <pthread.h>

/* pthread_create(t, NULL, fn, arg), again after EAGAIN for up to ~2 s;
 * 0 or the last error. */
int ferry_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* Blocks SIGINT, SIGTERM and SIGHUP in the calling thread: every thread
 * but the main one calls it first, so the stop signals always reach the
 * main thread (a handler deferred by a sanitizer until a thread blocked
 * in a long system call comes back would delay the stop). */
void ferry_thread_quiet(void);

#endif
