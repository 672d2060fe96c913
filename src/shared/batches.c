/*
 * shared/batches.c - the hand-out of file claims to the worker pool and
 * their take-back (internal.h): a claim of FILE_CLAIM rows becomes one
 * batch; a batch that comes back is made durable in DST (the barrier)
 * and only then completed with its claim's token (rule 1).
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "chunks.h"
#include "failure.h"
#include "manifest_types.h"
#include "workers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* File rows a claim takes: each claim and its outcome are a statement of
 * the server's with a cost of its own (bench/shared, 12,000 files: 48
 * instead of 16 took a quarter off the server's CPU and changed no time
 * beyond the noise; bench/RESULTS.md "Issue 14, session 20"), while a
 * host's 2 x -j batches in flight stay a small part of a job. */
#define FILE_CLAIM 48
/* Once the scan is over, the first wait before another look at the whole
 * job for link groups' rows to let go, doubled after each up to
 * LINKS_AGAIN_MAX_S (let_links_go; each look reads every waiting row). */
#define LINKS_AGAIN_S     30
#define LINKS_AGAIN_MAX_S 600

/* A name of a link group whose data another row's copy holds: linked to
 * that copy ("dir/name" under DST, as its SRC name under SRC), with its
 * recorded hash; the copier links it only when SRC's name is this row's
 * inode on this host, with the ctime the copy recorded, and DST's is
 * still that copy (copy_link.c, the struct ferry_lead_rec after the
 * path). */
static int put_lead(struct ferry_batch *b, struct ferry_item *it,
                    const struct ferry_pg_row *r)
{
        if (!r->lead_name || r->hash_len != sizeof(it->hash) ||
            !r->lead_dst_type)
                return 0;
        size_t len = r->lead_path_len + !!r->lead_path_len + r->lead_name_len;
        struct ferry_lead_rec lr = {
                .ctime = shared_time(r->lead_ctime_ns),
                .dst = {.type = (enum ferry_ftype)r->lead_dst_type,
                        .size = r->lead_dst_size,
                        .mtime = shared_time(r->lead_dst_mtime_ns)},
        };
        char *p = malloc(len + 1 + sizeof(lr));
        if (!p)
                return ENOMEM;
        char *e = p;
        if (r->lead_path_len) {
                e = mempcpy(e, r->lead_path, r->lead_path_len);
                *e++ = '/';
        }
        e = mempcpy(e, r->lead_name, r->lead_name_len);
        *e++ = '\0';
        memcpy(e, &lr, sizeof(lr));
        int rc = ferry_batch_str(b, p, len + 1 + sizeof(lr), &it->link_off);
        free(p);
        if (!rc)
                memcpy(it->hash, r->hash, sizeof(it->hash));
        return rc;
}

int shared_put_row(struct ferry_batch *b, const struct ferry_pg_row *r)
{
        struct ferry_item *it = &b->items[b->n];
        memset(it, 0, sizeof(*it));
        if (ferry_batch_str(b, r->path, r->path_len, &it->dir_off) ||
            ferry_batch_str(b, r->name, r->name_len, &it->name_off) ||
            put_lead(b, it, r))
                return ENOMEM;
        it->id = r->id;
        it->dir_id = r->dir;
        it->type = (enum ferry_ftype)r->type;
        it->st = (struct ferry_stat){
                .size = r->size,
                .mtime = shared_time(r->mtime_ns),
                .ctime = shared_time(r->ctime_ns),
                .atime = shared_time(r->mtime_ns),
                .dev = r->dev,
                .ino = r->ino,
                .rdev = r->rdev,
                .mode = r->mode,
                .nlink = r->nlink ? r->nlink : 1,
                .uid = r->uid,
                .gid = r->gid,
        };
        /* rule 9: what ferry's last copy left in DST, which this one may
         * replace (none: the row was never copied) */
        it->dst = (struct ferry_dst_rec){
                .type = (enum ferry_ftype)r->dst_type,
                .size = r->dst_size,
                .mtime = shared_time(r->dst_mtime_ns),
        };
        it->need = MF_NEED_DATA;
        it->unmarked = r->unmarked;
        b->n++;
        return 0;
}

/* With nothing to claim, the waiting rows of link groups that may be
 * claimed now are let go (manifest_pg/links.c; *none false when some
 * were): each time until this host sees the scan over (cheap until then).
 * After that the outcomes of their groups let most go, and a look at the
 * whole job is for the rest (a row made to wait by a late listing of a
 * host cut off, a first name copied with another size): at once when no
 * file of the job is under a lease (nothing else would let them go), else
 * after a wait that doubles, so that a long job does not read every
 * waiting row again and again. */
static int let_links_go(struct shared *s, bool *none)
{
        double now = shared_now();
        if (s->links_over) {
                /* (a host with nothing to claim asks every 10-100 ms:
                 * this once a second is enough) */
                if (now - s->links_asked < 1)
                        return 0;
                s->links_asked = now;
                bool waiting = false, leased = false;
                int rc = ferry_pg_links_waiting(s->pg, &waiting, &leased);
                if (rc)
                        return shared_pg_fail(s, rc);
                if (!waiting)
                        return 0;
                if (leased && now - s->links_at < s->links_wait)
                        return 0;
                if (leased && s->links_wait < LINKS_AGAIN_MAX_S)
                        s->links_wait *= 2;
        }
        uint64_t n = 0;
        bool over = false;
        int rc = ferry_pg_links_release(s->pg, &n, &over);
        if (rc)
                return shared_pg_fail(s, rc);
        if (over && !s->links_over) {
                s->links_over = true;
                s->links_wait = LINKS_AGAIN_S;
        }
        s->links_at = now;
        if (n)
                *none = false;
        return 0;
}

/* A file of at least FERRY_CHUNK_MIN_FILE bytes to copy (not to link):
 * a plan, so that its chunks are copied by several streams at once
 * (copy_chunks.c), as on a single host; the chunks a claim of its row
 * recorded before (a host that died, or was cut off: chunks.c) are
 * done in it, in their temp file. 0, ENOMEM, or ECANCELED (s failed). */
static int put_plan(struct shared *s, struct ferry_batch *b, size_t k)
{
        struct ferry_item *it = &b->items[k];
        if (it->type != FT_REG || it->st.size < FERRY_CHUNK_MIN_FILE ||
            it->link_off)
                return 0;
        uint64_t cs = ferry_chunk_size_for(it->st.size);
        if (!cs)
                return 0; /* beyond 64 TiB: one stream */
        uint32_t n = ferry_chunk_count(it->st.size, cs), off = 0;
        if (ferry_batch_reserve(b,
                                sizeof(struct ferry_chunk_plan) +
                                        (size_t)n *
                                                sizeof(struct ferry_chunk_rec),
                                &off))
                return ENOMEM;
        it = &b->items[k];
        it->plan_off = off;
        /* (a multiple of 8: ferry_batch_reserve) */
        struct ferry_chunk_plan *plan =
                (struct ferry_chunk_plan *)(void *)(b->arena + off);
        plan->chunk_size = cs;
        plan->n = n;
        struct ferry_pg_chunk src;
        shared_chunk_src(it, &src);
        int rc = ferry_pg_chunk_plan(s->pg, &src, plan);
        if (rc) {
                shared_pg_fail(s, rc);
                return ECANCELED;
        }
        return 0;
}

int shared_hand_out(struct shared *s, bool *none)
{
        shared_fence_reset(s);
        struct ferry_pg_claim c;
        if (shared_claim(s, PG_FILES, FILE_CLAIM, &c, none))
                return s->code;
        if (*none)
                return let_links_go(s, none);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, c.n);
        int prc = 0;
        for (size_t i = 0; b && i < c.n; i++)
                if (shared_put_row(b, &c.rows[i]) ||
                    (prc = put_plan(s, b, i))) {
                        ferry_batch_free(b);
                        b = NULL;
                }
        int64_t token = c.token;
        ferry_pg_claim_release(&c);
        if (prc == ECANCELED) /* the manifest failed: said */
                return s->code;
        if (!b || ferry_queue_push(&s->work, b)) {
                ferry_batch_free(b);
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        }
        s->fl[s->nfl++] = (struct flight){b, token};
        int e = ferry_workers_want(s->pool, (unsigned)s->nfl);
        if (!e)
                return 0;
        /* no thread at all: nothing would take it back (its claim goes
         * back with the others at the end) */
        void *msg;
        while (ferry_queue_try_pop(&s->work, &msg) == FERRY_QUEUE_OK)
                ferry_batch_free(msg);
        s->nfl = 0;
        return shared_fail(s, FERRY_EINTERNAL,
                           "cannot start a worker thread: %s", strerror(e));
}

/* The outcome of item it, or false when it has none to record (not
 * attempted, or a failure of DST or of the run, which stops it). why
 * (size bytes) holds a failure's words, which o points to. */
static bool outcome_of(struct shared *s, struct ferry_batch *b,
                       struct ferry_item *it, struct ferry_pg_outcome *o,
                       char *why, size_t size)
{
        /* a name copied (or not) of a link group whose other names may
         * wait for it (links.c); not one linked: none waits for that */
        bool linked = it->result == R_DONE && it->link_off && !it->bytes;
        *o = (struct ferry_pg_outcome){.id = it->id,
                                       .link = it->st.nlink > 1 && !linked};
        switch (it->result) {
        case R_NONE: return false;
        case R_NOSPACE:
                shared_fail(s, FERRY_ENOSPC, "DST '%s' is full", s->opt->dst);
                return false;
        case R_DSTFAIL:
                shared_fail(s, FERRY_EDSTFAIL, "DST '%s' failed: %s",
                            s->opt->dst, strerror(it->err));
                return false;
        case R_NOFDS:
                shared_fail(s, FERRY_EINTERNAL, "no file descriptor came free");
                return false;
        case R_DONE:
                o->result = PG_DONE;
                o->hash = it->hash;
                o->hash_len = sizeof(it->hash);
                /* what was copied, not what the scan saw (verify.c) */
                o->has_stat = true;
                o->size = it->st.size;
                o->mtime_ns = shared_ns(it->st.mtime);
                o->ctime_ns = shared_ns(it->st.ctime);
                o->mode = it->st.mode, o->uid = it->st.uid, o->gid = it->st.gid;
                o->has_dst = true;
                o->dst_type = (int)it->dst.type;
                o->dst_size = it->dst.size;
                o->dst_mtime_ns = shared_ns(it->dst.mtime);
                return true;
        default: break;
        }
        if (it->why_off)
                snprintf(why, size, "%s", ferry_batch_at(b, it->why_off));
        else
                ferry_failure_str(&it->fail, why, size);
        o->result = it->result == R_VANISHED ? PG_VANISHED : PG_FAILED;
        o->error = why;
        return true;
}

/* Item it's outcome recorded (its claim's complete was taken): counted
 * and told, as a single host tells what its barrier made durable
 * (coord/barrier.c, count_done). why: a failure's words. */
static void tell(struct shared *s, struct ferry_batch *b,
                 const struct ferry_item *it, const char *why)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        size_t dl = strlen(dir), nl = strlen(name);
        if (it->result != R_DONE) {
                bool gone = it->result == R_VANISHED;
                if (gone)
                        s->sum->files_vanished++;
                else
                        s->sum->files_failed++;
                shared_event(s, gone ? FERRY_EV_VANISHED : FERRY_EV_FAILED, dir,
                             dl, name, nl, why, &it->fail);
                return;
        }
        if (it->adopted) { /* DST's equal file kept */
                s->sum->files_adopted++;
                shared_event(s, FERRY_EV_ADOPTED, dir, dl, name, nl, NULL,
                             NULL);
        } else if (it->link_off && !it->bytes) { /* a name linked */
                s->sum->files_linked++;
                shared_event(s, FERRY_EV_LINKED, dir, dl, name, nl, NULL, NULL);
        } else {
                if (it->adopt_differs) /* then copied as any other */
                        shared_event(s, FERRY_EV_WARNING, dir, dl, name, nl,
                                     "--adopt: the destination's file has "
                                     "the size and mtime of the source's but "
                                     "another content: copied again",
                                     NULL);
                s->sum->files_copied++;
                s->sum->bytes_copied += it->bytes;
                shared_event(s, FERRY_EV_COPIED, dir, dl, name, nl, NULL, NULL);
        }
        if (it->meta_fail.step != FERRY_STEP_NONE) {
                char w[256];
                s->sum->meta_failed++;
                ferry_failure_str(&it->meta_fail, w, sizeof(w));
                shared_event(s, FERRY_EV_META_FAILED, dir, dl, name, nl, w,
                             &it->meta_fail);
        }
}

int shared_take_back(struct shared *s, struct ferry_batch *b)
{
        size_t k = 0;
        while (k < s->nfl && s->fl[k].b != b)
                k++;
        if (k == s->nfl)
                return shared_fail(s, FERRY_EINTERNAL,
                                   "a batch not handed out");
        int64_t token = s->fl[k].token;
        s->fl[k] = s->fl[--s->nfl];
        int rc = 0;
        struct ferry_pg_outcome *o = calloc(b->n, sizeof(*o));
        char(*why)[256] = calloc(b->n, sizeof(*why));
        size_t *at = calloc(b->n, sizeof(*at)); /* each outcome's item */
        if (!o || !why || !at)
                rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
        size_t n = 0;
        for (size_t i = 0; !rc && i < b->n; i++)
                if (outcome_of(s, b, &b->items[i], &o[n], why[n],
                               sizeof(why[n])))
                        at[n++] = i;
        /* rule 1: the copies durable before their done marks */
        if (!rc && n) {
                int e = shared_barrier(s, b);
                if (e)
                        rc = shared_fail(s, FERRY_EDSTFAIL,
                                         "cannot make DST '%s' durable: %s",
                                         s->opt->dst, strerror(e));
        }
        bool refused = false, recorded = false;
        /* (a manifest that failed is not asked again for every batch) */
        if (!rc && n && s->code != FERRY_EMANIFEST) {
                int prc = ferry_pg_complete(s->pg, PG_FILES, token, o, n,
                                            &refused);
                if (prc)
                        rc = shared_pg_fail(s, prc);
                else
                        recorded = !refused;
        }
        if (recorded)
                rc = shared_chunks_done(s, b, o, at, n);
        /* told once recorded, not before: a claim refused, a barrier or
         * a manifest that failed leaves its rows to another claim */
        for (size_t i = 0; recorded && i < n; i++)
                tell(s, b, &b->items[at[i]], why[i]);
        if (refused)
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "a claim's lease ran out and another host took "
                             "its files: this host's copies of them are not "
                             "marked",
                             NULL);
        free(o);
        free(why);
        free(at);
        ferry_batch_free(b);
        return rc;
}
