/*
 * coord/control.c - live control of the running job (coord/internal.h):
 * the run's side of `ferry set` and --window.
 *
 * control_init writes the run's options (--bwlimit, -j, --window) and pid
 * to "<manifest>.control" (control.h) and makes the token bucket the
 * copiers share (ratelimit.h); control_tick, from the coordinator's tick,
 * reads the file about twice a second and, when `ferry set` changed its
 * serial, applies it: the limit to the bucket, -j to the limit of copies
 * (jobs_set), and the pause. Paused (`ferry set --pause`, or the clock
 * outside --window), nothing is handed out (follow_limit) and the copies
 * at the workers wait at their next buffer (ferry_rate_take).
 * control_release removes the file: a setting never outlives its run.
 */
#include "internal.h"

#include "control.h"
#include "ratelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define POLL_SECONDS 0.5

/* The pause and the limit as the file and the clock say now. */
static void apply(struct coord *c)
{
        struct live_ctl *l = &c->ctl;
        const struct ferry_control *w = &l->want;
        bool inside = ferry_window_inside(w->window_start, w->window_end,
                                          ferry_window_now());
        l->paused = w->paused || !inside;
        c->prog.paused = l->paused;
        c->prog.resume_at = !w->paused && !inside ? w->window_start : -1;
        ferry_rate_set(l->rate, w->bwlimit, l->paused);
        if (w->jobs != l->jobs) {
                l->jobs = w->jobs;
                jobs_set(c, w->jobs);
        }
}

int control_init(struct coord *c)
{
        struct live_ctl *l = &c->ctl;
        c->prog.resume_at = -1;
        if (ferry_rate_new(&l->rate)) {
                snprintf(c->err->msg, sizeof(c->err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        l->want = (struct ferry_control){
                .pid = (long)getpid(),
                .bwlimit = c->opt->bwlimit,
                .jobs = c->opt->jobs,
                .window_start = c->opt->window_start,
                .window_end = c->opt->window_end,
        };
        l->jobs = c->opt->jobs;
        /* a dry run changes nothing, and is not controlled */
        if (c->cfg->manifest_path && !c->opt->dry_run &&
            (l->path = ferry_control_path(c->cfg->manifest_path)) &&
            ferry_control_write(l->path, &l->want)) {
                free(l->path); /* not controlled: its options hold */
                l->path = NULL;
        }
        apply(c);
        return 0;
}

void control_tick(struct coord *c, double t)
{
        struct live_ctl *l = &c->ctl;
        if (t - l->last_poll < POLL_SECONDS)
                return;
        l->last_poll = t;
        struct ferry_control f;
        if (l->path && !ferry_control_load(l->path, &f) &&
            f.pid == l->want.pid && f.serial != l->want.serial)
                l->want = f;
        apply(c); /* the clock moves on: the window */
}

void control_release(struct coord *c)
{
        struct live_ctl *l = &c->ctl;
        if (l->path)
                unlink(l->path);
        free(l->path);
        ferry_rate_free(l->rate); /* the workers are joined */
        l->path = NULL;
        l->rate = NULL;
}
