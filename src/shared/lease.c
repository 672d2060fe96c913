/*
 * shared/lease.c - a host's claims and their fence (internal.h): a claim
 * of rows under the host's lease, the renewal of everything in flight
 * every third of a lease, and the fence that tells the workers until when
 * the claims in flight are surely this host's (copy.h, ferry_fence_passed:
 * two thirds of a lease from the statement that made or renewed them; 0
 * once a renewal finds a claim taken). Moved out of run.c, the loop.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include <stdlib.h>
#include <time.h>

int shared_claim(struct shared *s, enum ferry_pg_kind kind, size_t max,
                 struct ferry_pg_claim *c, bool *none)
{
        int rc = ferry_pg_claim(s->pg, kind, max, s->lease, c);
        if (rc)
                return shared_pg_fail(s, rc);
        *none = c->n == 0;
        if (c->moved && !s->moved) {
                s->moved = true;
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "another host ran the job again (a new scan "
                             "of SRC): this host's part is over",
                             NULL);
        }
        return 0;
}

static int64_t now_ns(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A claim is this host's for a lease from when the statement that made or
 * renewed it was sent (the server's lease starts later); two thirds of it
 * leave the workers a third of a lease to find the fence moved. */
static int64_t fence_from(const struct shared *s, int64_t sent)
{
        return sent + (int64_t)s->lease * 2 / 3 * 1000000000;
}

void shared_fence_reset(struct shared *s)
{
        if (s->claims_lost && !s->nfl && !s->nscans) {
                s->claims_lost = false;
                atomic_store(&s->fence, fence_from(s, now_ns()));
        }
}

void shared_fence_claim(struct shared *s)
{
        atomic_store(&s->fence, fence_from(s, now_ns()));
}

int shared_renew(struct shared *s)
{
        double now = shared_now();
        if (now - s->last_renew < s->lease / 3.0)
                return 0;
        s->last_renew = now;
        int64_t *tokens = malloc((s->nfl + s->nscans + 1) * sizeof(*tokens));
        if (!tokens)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        size_t n = 0;
        uint64_t rows = s->nscans, renewed = 0;
        for (size_t i = 0; i < s->nfl; i++) {
                tokens[n++] = s->fl[i].token;
                rows += s->fl[i].b->n;
        }
        for (size_t i = 0; i < s->nscans; i++)
                tokens[n++] = s->scan_tokens[i];
        int64_t sent = now_ns();
        /* with nothing in flight too: last_seen and the counts that
         * status's rate reads (003_hosts.sql) */
        int rc = ferry_pg_renew(s->pg, tokens, n, s->lease, &renewed);
        free(tokens);
        if (rc)
                return shared_pg_fail(s, rc);
        if (renewed < rows && !s->claims_lost) {
                s->claims_lost = true;
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "a lease ran out and another host took the "
                             "claim: what this host copies of it is not put "
                             "in place",
                             NULL);
        }
        shared_fence_reset(s);
        atomic_store(&s->fence, s->claims_lost ? 0 : fence_from(s, sent));
        return 0;
}
