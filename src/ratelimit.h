/*
 * ratelimit.h - a run's bandwidth limit (--bwlimit, `ferry set
 * --bwlimit`) and its pause gate (`ferry set --pause`, --window): one
 * token bucket shared by every worker of the run.
 *
 * Calling sequence:
 *   coordinator: ferry_rate_new(&r); lends r to the copiers
 *                (ferry_copy_cfg.rate); ferry_rate_set(r, bps, paused)
 *                whenever the limit or the pause changes; after the
 *                workers are joined, ferry_rate_free(r)
 *   a copier:    before each data write of n bytes,
 *                  if ((rc = ferry_rate_take(cfg.rate, n, cfg.stop)))
 *                          ... stopped: rc is ECANCELED
 *
 * The charge is on the write side: the bytes written to DST (or, for a
 * verify, nothing is charged). ferry_rate_take returns at once when r is
 * NULL or no limit is set and the run is not paused; otherwise it waits
 * until the bucket holds n bytes, or the pause ends. It waits on a
 * condition variable in slices of at most 100 ms (the mutex is not held
 * while it sleeps), so a stop (*stop true), a new limit or a resume is
 * seen within a slice. Thread-safe.
 */
#ifndef FERRY_RATELIMIT_H
#define FERRY_RATELIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ferry_rate;

/* 0, or ENOMEM / a pthread error; free with ferry_rate_free (NULL is
 * fine). Starts with no limit, not paused. */
int ferry_rate_new(struct ferry_rate **out);
void ferry_rate_free(struct ferry_rate *r);
/* bytes_per_s 0: no limit. Wakes every waiter. */
void ferry_rate_set(struct ferry_rate *r, uint64_t bytes_per_s, bool paused);
/* Charges n bytes to the bucket (waiting as above): 0, or ECANCELED when
 * *stop became true meanwhile. r NULL: 0 at once. stop may be NULL. */
int ferry_rate_take(struct ferry_rate *r, uint64_t n, atomic_bool *stop);

#endif
