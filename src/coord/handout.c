/*
 * coord/handout.c - what goes to the workers next.
 *
 * Owns the hand-out's state (struct handout): the pass and where the
 * manifest's hand-out of it is (struct ferry_handout), the low rows, and
 * the count of batches and items out. Pass 1 (phases
 * SCANNING and FIRST_PASS) follows the scan by row id, so that copying
 * overlaps the scan, and skips hardlink followers; it also hands out, by
 * id, rows that became pending behind its cursor (note_low). The later
 * passes (LATER_PASS), each started only when every result so far is
 * committed, pick up what pass 1 could not: rows that became pending
 * behind its cursor beyond LOW_ROWS, and followers whose first name is
 * done. A verify (VERIFYING) hands out each done row once.
 *
 * handout_init, handout_note_low and handout_next work on a manifest alone
 * (tests/unit/test_handout.c drives them against MF_MEMORY); refill is the
 * coordinator's side: when to hand out, and to whom.
 */
#define _GNU_SOURCE
#include "chunks.h"
#include "config.h"
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* While the scan runs, scan results are committed for a hand-out at most
 * this often (each commit is an fsync of the WAL). */
#define HANDOUT_COMMIT_GAP 0.05

void handout_init(struct handout *h, int work_kind, unsigned max_in_flight)
{
        memset(h, 0, sizeof(*h));
        h->work_kind = work_kind;
        h->hand_out = true;
        h->pass = 1;
        h->max_in_flight = max_in_flight;
        h->batch_items = BATCH_ITEMS;
}

/* Rows below the cursor are never handed out by the first pass, so each
 * is handed out once here; the later passes start when nothing is in
 * flight. Beyond LOW_ROWS they wait for the second pass. */
void handout_note_low(struct handout *h, int64_t id)
{
        if (ferry_manifest_handout_passed(&h->at, id) && h->n_low < LOW_ROWS)
                h->low[h->n_low++] = id;
}

/* Pass p of generation gen from its first row, unless it is the one
 * going on. */
static void keep_pass(struct handout *h, enum ferry_pass p, int64_t gen)
{
        if (h->at.pass != p || h->at.gen != gen)
                ferry_manifest_handout_start(&h->at, p, gen);
}

static int fill(struct handout *h, struct ferry_manifest *m,
                struct ferry_batch **out)
{
        struct ferry_batch *b = ferry_batch_new(h->work_kind, h->batch_items);
        if (!b)
                return FERRY_EINTERNAL;
        if (ferry_manifest_handout(m, &h->at, b, h->batch_items, BATCH_BYTES)) {
                ferry_batch_free(b);
                return FERRY_EMANIFEST;
        }
        if (!b->n)
                ferry_batch_free(b);
        else
                *out = b;
        return 0;
}

/* The rows noted by handout_note_low, a batch of them at a time. */
static int fill_low(struct handout *h, struct ferry_manifest *m,
                    struct ferry_batch **out)
{
        if (!h->n_low)
                return 0;
        struct ferry_batch *b = ferry_batch_new(h->work_kind, h->batch_items);
        if (!b)
                return FERRY_EINTERNAL;
        uint64_t bytes = 0; /* as fill's limit: big files spread out */
        int rc = 0;
        while (h->n_low && b->n < h->batch_items && bytes < BATCH_BYTES) {
                int64_t id = h->low[--h->n_low];
                size_t before = b->n;
                if (ferry_manifest_handout_again(m, &h->at, id, b)) {
                        rc = FERRY_EMANIFEST;
                        break;
                }
                if (b->n > before)
                        bytes += b->items[before].st.size;
        }
        if (!b->n || rc)
                ferry_batch_free(b);
        else
                *out = b;
        return rc;
}

/* Pass 1: the low rows first, then on from the cursor. Once the scan is
 * over and it finds nothing, with everything committed, pass 2 starts. */
static int first_pass(struct handout *h, struct ferry_manifest *m, int64_t gen,
                      bool settled, enum run_phase *phase,
                      struct ferry_batch **out)
{
        keep_pass(h, PASS_COPY_FIRST, gen);
        int rc = fill_low(h, m, out);
        if (!rc && !*out)
                rc = fill(h, m, out);
        if (rc || *out || *phase == PH_SCANNING || !settled)
                return rc;
        *phase = PH_LATER_PASS;
        h->pass = 2;
        ferry_manifest_handout_start(&h->at, PASS_COPY_NEXT, gen);
        h->pass_gave = false;
        return 0;
}

/* A later pass, from row 1; the next one starts at once when this one gave
 * something and all of it is committed (returning nothing here would
 * leave the loop waiting for a message that is not coming, up to 100 ms
 * at the end of every run). */
static int later_pass(struct handout *h, struct ferry_manifest *m, int64_t gen,
                      bool settled, enum run_phase *phase,
                      struct ferry_batch **out)
{
        keep_pass(h, PASS_COPY_NEXT, gen);
        for (;;) {
                int rc = fill(h, m, out);
                if (rc)
                        return rc;
                if (*out) {
                        h->pass_gave = true;
                        return 0;
                }
                if (!settled)
                        return 0;
                if (!h->pass_gave || h->pass >= MAX_PASSES) {
                        *phase = PH_DRAINING;
                        return 0;
                }
                h->pass++;
                ferry_manifest_handout_start(&h->at, PASS_COPY_NEXT, gen);
                h->pass_gave = false;
        }
}

int handout_next(struct handout *h, struct ferry_manifest *m, int64_t gen,
                 bool settled, enum run_phase *phase, struct ferry_batch **out)
{
        *out = NULL;
        switch (*phase) {
        case PH_SCANNING:
        case PH_FIRST_PASS: return first_pass(h, m, gen, settled, phase, out);
        case PH_LATER_PASS: return later_pass(h, m, gen, settled, phase, out);
        case PH_VERIFYING: {
                keep_pass(h, PASS_VERIFY, gen);
                int rc = fill(h, m, out);
                if (!*out)
                        *phase = PH_DRAINING;
                return rc;
        }
        default: return 0; /* nothing is handed out in the other phases */
        }
}

void note_low(struct coord *c, int64_t id)
{
        handout_note_low(&c->ho, id);
}

/*
 * Rule 1 wants a row's pending state committed before its data is touched:
 * a changed row that is still done in the committed manifest would be a lie
 * after a crash, and a new row's id (which names its temp file) could be
 * lost. So nothing is handed out while new or changed rows are uncommitted;
 * they are committed early for a hand-out, at most every 50 ms while the
 * scan runs (each commit is an fsync: a re-run that finds one changed file
 * in most directories would otherwise commit once per listing) and at once
 * when it is done. Other scan results (unchanged rows, directory marks)
 * wait for the group commit: a no-op re-run commits about once a second.
 */
static bool ready_to_hand_out(struct coord *c)
{
        if (!c->fresh)
                return true; /* nothing uncommitted could be handed out */
        if (c->stop_code || (c->phase == PH_SCANNING &&
                             now() - c->last_commit < HANDOUT_COMMIT_GAP))
                return false;
        commit(c);
        return !c->stop_code && !c->dirty;
}

/* A batch with a file copied in chunks (credit_resumed counts a resumed
 * one's chunks once it is handed out) gives nothing back. The first pass
 * hands given-back rows out again soon (note_low; beyond LOW_ROWS, the
 * second pass does). */
static bool has_plan(const struct ferry_batch *b)
{
        for (size_t i = 0; i < b->n; i++)
                if (ferry_item_plan(b, &b->items[i]))
                        return true;
        return false;
}

static uint64_t give_back_ns(void)
{
#ifdef FERRY_TESTING
        /* t97: every batch gives back all but its first item */
        const char *env = getenv("FERRY_GIVE_BACK_NS");
        if (env && *env)
                return strtoull(env, NULL, 10);
#endif
        return (uint64_t)(GIVE_BACK_SECONDS * 1e9);
}

static bool handing_out(const struct coord *c)
{
        return c->ho.hand_out && phase_hands_out(c->phase);
}

/* Hands batches to the workers while the phase hands out, up to
 * max_in_flight batches and MAX_OUTSTANDING items uncommitted. */
void refill(struct coord *c)
{
        struct handout *h = &c->ho;
        while (handing_out(c) && h->in_flight < h->max_in_flight &&
               h->outstanding < MAX_OUTSTANDING) {
                if (h->work_kind == WORK_COPY && !ready_to_hand_out(c))
                        return;
                enum run_phase phase = c->phase;
                struct ferry_batch *b = NULL;
                int rc = handout_next(h, c->m, c->gen, all_committed(c), &phase,
                                      &b);
                if (rc == FERRY_EMANIFEST)
                        manifest_error(c);
                else if (rc)
                        set_error(c, FERRY_EINTERNAL, "out of memory");
                if (rc)
                        return;
                if (phase != c->phase)
                        set_phase(c, phase); /* a batch of the new phase next */
                else if (!b)
                        return;
                if (!b)
                        continue;
                /* rule 1: the rows handed out are durable first */
                if (h->work_kind == WORK_COPY && ferry_manifest_sync(c->m)) {
                        ferry_batch_free(b);
                        manifest_error(c);
                        return;
                }
                if (h->work_kind == WORK_COPY && h->pass == 1 && !has_plan(b))
                        b->give_back_ns = give_back_ns();
                h->outstanding += b->n;
                h->in_flight++;
                if (h->work_kind == WORK_COPY)
                        credit_resumed(c, b); /* progress.c */
                ferry_queue_push(&c->work, b);
        }
}
