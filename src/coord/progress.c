/*
 * coord/progress.c - the progress snapshot handed to the caller about
 * once a second (struct ferry_progress): files and bytes done of the
 * totals known so far. A copy's bytes count as they are written, a big
 * file's chunk by chunk (bytes_progress), not when a file is done.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <stdatomic.h>

/* A copy's bytes done: those of done rows, and those written for rows in
 * flight (a big file's chunks as they are written), never counted twice
 * (a result's bytes leave the live count when it is recorded), never
 * more than the total, never less than shown before. */
static void bytes_progress(struct coord *c)
{
        uint64_t live = atomic_load(&c->bytes_live);
        uint64_t v = c->bytes_committed +
                     (live > c->bytes_settled ? live - c->bytes_settled : 0);
        uint64_t cap = c->prog.bytes_total > c->bytes_committed
                               ? c->prog.bytes_total
                               : c->bytes_committed;
        if (v > cap)
                v = cap; /* a retry wrote some bytes twice */
        if (v > c->prog.bytes_done)
                c->prog.bytes_done = v;
}

void progress(struct coord *c, bool final)
{
        if (!c->opt->progress)
                return;
        if (c->work_kind == WORK_COPY)
                bytes_progress(c);
        c->prog.elapsed = now() - c->t0;
        c->prog.scanning = !c->in.scan_done;
        c->prog.final = final;
        c->opt->progress(&c->prog, c->opt->cb_arg);
        c->last_prog = now();
}
