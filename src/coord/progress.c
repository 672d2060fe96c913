/*
 * coord/progress.c - the progress snapshot handed to the caller about
 * once a second (struct ferry_progress): files and bytes done of the
 * totals known so far. A copy's bytes count as they are written, a big
 * file's chunk by chunk (bytes_progress), not when a file is done; a
 * resumed big file's chunks of earlier runs count from its hand-out
 * (credit_resumed).
 */
#define _GNU_SOURCE
#include "internal.h"

#include "chunks.h"

#include <stdatomic.h>

/* A resumed file's chunks of earlier runs are done bytes from the start
 * (as `ferry status` counts them); a file done counts its size less
 * them. Beyond RESUME_CREDITS such files in flight, a file gets none: its
 * bytes count when it is done, as before. */
void credit_resumed(struct coord *c, const struct ferry_batch *b)
{
        for (size_t i = 0; i < b->n && c->n_credit < RESUME_CREDITS; i++) {
                const struct ferry_item *it = &b->items[i];
                const struct ferry_chunk_plan *p = ferry_item_plan(b, it);
                if (!p || !p->resume)
                        continue;
                uint64_t bytes = 0;
                for (uint32_t k = 0; k < p->n; k++) {
                        uint64_t at = (uint64_t)k * p->chunk_size;
                        if (p->chunks[k].state == CH_DONE)
                                bytes += it->st.size - at < p->chunk_size
                                                 ? it->st.size - at
                                                 : p->chunk_size;
                }
                if (!bytes)
                        continue;
                c->credit[c->n_credit++] =
                        (struct resume_credit){it->id, bytes};
                c->bytes_committed += bytes;
                c->prog.bytes_resumed += bytes;
        }
}

uint64_t take_credit(struct coord *c, int64_t id)
{
        for (unsigned i = 0; i < c->n_credit; i++) {
                if (c->credit[i].id != id)
                        continue;
                uint64_t bytes = c->credit[i].bytes;
                c->credit[i] = c->credit[--c->n_credit];
                return bytes;
        }
        return 0;
}

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
