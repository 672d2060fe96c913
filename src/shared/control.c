/*
 * shared/control.c - a host's side of live control (internal.h): about
 * once a second it reads the job's control (manifest_pg/control.c,
 * written by `ferry set --manifest URL --job-name NAME`) and applies it:
 * paused, it claims nothing new (what is in flight finishes, leases are
 * renewed); -j N sets its copies in flight, up to the threads its pool
 * may start (SHARED_JOBS_MAX, or its own -j when that is more).
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "workers.h"

/* How often a host reads the control. */
#define CONTROL_POLL_S 1.0

int shared_control(struct shared *s)
{
        double now = shared_now();
        if (now - s->last_control < CONTROL_POLL_S)
                return 0;
        s->last_control = now;
        struct ferry_pg_control c;
        int rc = ferry_pg_control(s->pg, &c);
        if (rc)
                return shared_pg_fail(s, rc);
        if (c.paused != s->paused)
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             c.paused
                                     ? "the job is paused (ferry set --pause); "
                                       "what is in flight finishes"
                                     : "the job is resumed",
                             NULL);
        s->paused = c.paused;
        unsigned limit = c.host_jobs ? c.host_jobs : s->jobs;
        if (limit > s->max_jobs)
                limit = s->max_jobs;
        if (limit != s->limit) {
                ferry_workers_set_limit(s->pool, limit);
                s->limit = limit;
        }
        return 0;
}
