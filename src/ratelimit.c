/*
 * ratelimit.c - the token bucket of --bwlimit and the pause gate
 * (ratelimit.h).
 *
 * The bucket holds up to BURST_SECONDS of the rate; a charge takes its
 * bytes at once and may leave the bucket in debt, and the charger then
 * waits until the debt is paid at the rate. Chargers in turn each add their
 * debt, so N workers together get the rate, not N times it. A new limit or
 * pause (ferry_rate_set) empties the bucket and bumps gen: a waiter sees
 * the change, and charges its bytes again under the new state.
 */
#define _GNU_SOURCE
#include "ratelimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define BURST_SECONDS 0.05
#define SLICE_SECONDS 0.1

struct ferry_rate {
        pthread_mutex_t mu;
        pthread_cond_t cv; /* on CLOCK_MONOTONIC */
        uint64_t bps;      /* 0: no limit */
        bool paused;
        uint64_t gen; /* bumped by each ferry_rate_set */
        /* a limit or a pause is set: read without the mutex, so that a
         * run without either takes no lock per buffer */
        atomic_bool active;
        double tokens, last;
};

static double mono(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ferry_rate_new(struct ferry_rate **out)
{
        *out = NULL;
        struct ferry_rate *r = calloc(1, sizeof(*r));
        if (!r)
                return ENOMEM;
        pthread_condattr_t ca;
        int rc = pthread_condattr_init(&ca);
        if (!rc) {
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                rc = pthread_cond_init(&r->cv, &ca);
                pthread_condattr_destroy(&ca);
        }
        if (rc) {
                free(r);
                return rc;
        }
        if ((rc = pthread_mutex_init(&r->mu, NULL))) {
                pthread_cond_destroy(&r->cv);
                free(r);
                return rc;
        }
        r->last = mono();
        *out = r;
        return 0;
}

void ferry_rate_free(struct ferry_rate *r)
{
        if (!r)
                return;
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        free(r);
}

void ferry_rate_set(struct ferry_rate *r, uint64_t bytes_per_s, bool paused)
{
        pthread_mutex_lock(&r->mu);
        if (r->bps != bytes_per_s || r->paused != paused) {
                r->bps = bytes_per_s;
                r->paused = paused;
                r->tokens = 0;
                r->last = mono();
                r->gen++;
                atomic_store(&r->active, bytes_per_s || paused);
                pthread_cond_broadcast(&r->cv);
        }
        pthread_mutex_unlock(&r->mu);
}

/* Waits (r->mu held, released while asleep) until t, at most a slice. */
static void wait_until(struct ferry_rate *r, double t)
{
        double now = mono(),
               end = t < now + SLICE_SECONDS ? t : now + SLICE_SECONDS;
        struct timespec ts = {(time_t)end,
                              (long)((end - (double)(time_t)end) * 1e9)};
        if (ts.tv_nsec >= 1000000000L)
                ts.tv_nsec = 999999999L;
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

static bool stopped(atomic_bool *stop)
{
        return stop && atomic_load(stop);
}

/* Takes n bytes under r->mu and returns when they may be written: the
 * time to wait until, or 0 for now. */
static double charge(struct ferry_rate *r, uint64_t n)
{
        double now = mono(), burst = (double)r->bps * BURST_SECONDS;
        r->tokens += (now - r->last) * (double)r->bps;
        if (r->tokens > burst)
                r->tokens = burst;
        r->last = now;
        r->tokens -= (double)n;
        return r->tokens >= 0 ? 0 : now - r->tokens / (double)r->bps;
}

int ferry_rate_take(struct ferry_rate *r, uint64_t n, atomic_bool *stop)
{
        if (!r || !atomic_load_explicit(&r->active, memory_order_relaxed))
                return 0;
        int rc = 0;
        pthread_mutex_lock(&r->mu);
        for (;;) {
                if (stopped(stop)) {
                        rc = ECANCELED;
                        break;
                }
                if (r->paused) {
                        wait_until(r, mono() + SLICE_SECONDS);
                        continue;
                }
                if (!r->bps)
                        break;
                uint64_t gen = r->gen;
                double until = charge(r, n);
                while (until && gen == r->gen && !stopped(stop) &&
                       mono() < until)
                        wait_until(r, until);
                if (gen == r->gen && !stopped(stop))
                        break; /* paid */
                /* stopped (said above), or a new state: charged again */
        }
        pthread_mutex_unlock(&r->mu);
        return rc;
}
