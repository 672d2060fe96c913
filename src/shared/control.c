/*
 * shared/control.c - a host's side of live control (internal.h): about
 * once a second it reads the job's control (manifest_pg/control.c,
 * written by `ferry set --manifest URL --job-name NAME`) and applies it:
 * paused, it claims nothing new (what is in flight finishes, leases are
 * renewed); -j N sets its copies in flight, up to the threads its pool
 * may start (SHARED_JOBS_MAX, or its own -j when that is more); the
 * job's --bwlimit (per host) and --window (each host's local clock), when
 * set, stand for this host's own. Outside its window a host is paused as
 * by `ferry set --pause`: it claims nothing new and what is in flight
 * finishes, at its --bwlimit (ratelimit.h: its copies share one bucket).
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "ratelimit.h"
#include "workers.h"

#include <stdio.h>

/* How often a host reads the control. */
#define CONTROL_POLL_S 1.0

int shared_control_start(struct shared *s)
{
        s->resume_at = -1;
        if (ferry_rate_new(&s->rate))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        ferry_rate_set(s->rate, s->opt->bwlimit, false);
        return 0;
}

void shared_control_release(struct shared *s)
{
        ferry_rate_free(s->rate);
        s->rate = NULL;
}

/* Says once that the job was paused or resumed by `ferry set`, or that
 * this host left or entered its window. */
static void tell(struct shared *s, bool set_paused, int resume_at, int ws,
                 int we)
{
        if (set_paused != s->set_paused)
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             set_paused ? "the job is paused (ferry set "
                                          "--pause); what is in flight "
                                          "finishes"
                                        : "the job is resumed",
                             NULL);
        if ((resume_at >= 0) == (s->resume_at >= 0))
                return;
        char why[160];
        if (resume_at >= 0)
                snprintf(why, sizeof(why),
                         "outside the window %02d:%02d-%02d:%02d: nothing new "
                         "is claimed until %02d:%02d; what is in flight "
                         "finishes",
                         ws / 60, ws % 60, we / 60, we % 60, ws / 60, ws % 60);
        else
                snprintf(why, sizeof(why),
                         "inside the window "
                         "%02d:%02d-%02d:%02d: claiming again",
                         ws / 60, ws % 60, we / 60, we % 60);
        shared_event(s, FERRY_EV_WARNING, "", 0, "", 0, why, NULL);
}

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
        const struct ferry_options *o = s->opt;
        bool job_window = c.window_start != -2;
        int ws = job_window ? c.window_start : o->window_start,
            we = job_window ? c.window_end : o->window_end;
        bool inside = ferry_window_inside(ws, we, ferry_window_now());
        int resume_at = inside ? -1 : ws;
        tell(s, c.paused, resume_at, ws, we);
        s->set_paused = c.paused;
        s->resume_at = resume_at;
        s->paused = c.paused || !inside;
        ferry_rate_set(s->rate,
                       c.bwlimit >= 0 ? (uint64_t)c.bwlimit : o->bwlimit,
                       false);
        unsigned limit = c.host_jobs ? c.host_jobs : s->jobs;
        if (limit > s->max_jobs)
                limit = s->max_jobs;
        if (limit != s->limit) {
                ferry_workers_set_limit(s->pool, limit);
                s->limit = limit;
        }
        return 0;
}
