/*
 * shared/chunks.c - a large file's chunks in a shared job (internal.h;
 * manifest_pg/chunks.c, sql/pg/013_chunks.sql).
 *
 * The copier reports each chunk once it is durable in the temp file
 * (MSG_CHUNK in the inbox, copy_stream.c), as on a single host; this host
 * records it under the claim of the batch that holds its row, so that a
 * host that claims the row after this one died takes those chunks from
 * its temp file (batches.c, put_plan: the plan from what was recorded;
 * copy_chunks.c, adopt_temp: into a temp file of its own) instead of
 * reading them from SRC again. A chunk whose batch is back
 * already, or whose row another claim holds now, is not recorded: its
 * copy is over, or not this host's any more. Once a file is done, what
 * was recorded of it goes.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "chunks.h"

#include <stdlib.h>
#include <string.h>

void shared_chunk_src(const struct ferry_item *it, struct ferry_pg_chunk *c)
{
        memset(c, 0, sizeof(*c));
        c->file = it->id;
        c->src_size = it->st.size;
        c->src_mtime_ns = shared_ns(it->st.mtime);
        c->src_ctime_ns = shared_ns(it->st.ctime);
}

/* The token of the claim in flight whose batch holds row id; 0: none. */
static int64_t token_of(const struct shared *s, int64_t id)
{
        for (size_t k = 0; k < s->nfl; k++) {
                const struct ferry_batch *b = s->fl[k].b;
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].id == id)
                                return s->fl[k].token;
        }
        return 0;
}

int shared_chunk_record(struct shared *s, struct ferry_chunk_msg *m)
{
        struct ferry_pg_chunk c;
        int64_t token = token_of(s, m->file_id);
        int rc = 0;
        if (token && s->code != FERRY_EMANIFEST) {
                struct ferry_item it = {.id = m->file_id, .st = m->src};
                shared_chunk_src(&it, &c);
                c.token = token;
                c.idx = (int32_t)m->idx;
                c.chunk_size = m->chunk_size;
                c.tmp_ino = m->tmp_ino;
                memcpy(c.hash, m->hash, sizeof(c.hash));
                int prc = ferry_pg_record_chunk(s->pg, &c);
                if (prc)
                        rc = shared_pg_fail(s, prc);
        }
        free(m);
        return rc;
}

int shared_chunks_done(struct shared *s, const struct ferry_batch *b,
                       const struct ferry_pg_outcome *o, const size_t *at,
                       size_t n)
{
        int64_t *ids = NULL;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (o[i].result != PG_DONE || !b->items[at[i]].plan_off)
                        continue;
                if (!ids && !(ids = calloc(n, sizeof(*ids))))
                        return shared_fail(s, FERRY_EINTERNAL, "out of memory");
                ids[k++] = o[i].id;
        }
        int rc = ferry_pg_chunks_drop(s->pg, ids, k);
        free(ids);
        return rc ? shared_pg_fail(s, rc) : 0;
}
