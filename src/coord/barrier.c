/*
 * coord/barrier.c - where a copied row becomes done (crash-safety rule 1).
 *
 * Owns the copy results waiting for the barrier, the barrier thread (its
 * only other thread, started with the first barrier: it runs syncfs and
 * the directory fsyncs, so that hand-outs go on meanwhile) and the
 * recording of each result. A directory's fsync is left out when the
 * syncfs of its file system, run after the batch's renames, and one
 * fsync after it made every directory there durable (XFS, Btrfs, ext4,
 * ext2: sync_device). A row is
 * marked done only in on_barrier, after its barrier succeeded, and the
 * mark becomes true with the COMMIT that follows; a barrier that failed
 * leaves its rows pending (copied again later) and notes the run as
 * uncertain. A row whose metadata alone was applied in place is recorded
 * the same way: the barrier's syncfs makes its metadata durable too
 * (--durability=file: its own fsync, or its directory's). The
 * counts and events tell copies, links and metadata apart (count_done).
 * In-flight state is memory only: a crash leaves those rows
 * pending. Results of --verify go to verify.c instead.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "chunks.h"
#include "copy.h"
#include "failure.h"
#include "fsio.h"
#include "owner.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BARRIER_ITEMS   2048
#define BARRIER_SECONDS 0.25

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* Whether it's DST directory is fsynced at the barrier: it received an
 * entry; or (--durability=file, where no syncfs runs) metadata applied
 * in place to an entry that has no descriptor to fsync (a symlink, a
 * special file: copy_meta.c fsyncs a regular file's own), which the
 * directory's fsync commits with the file system's journal. */
static bool needs_dir_sync(const struct ferry_item *it, bool file)
{
        return it->need != MF_NEED_META || (file && it->type != FT_REG);
}

/* The file systems a barrier has synced: DST's own, then those of the
 * mounts below DST that its directories lie on; and of each, whether
 * that syncfs and one directory's fsync after it made every directory of
 * it durable (covered: ferry_fsio_fs_sync says COMMITS or WRITES), so
 * that its other directories need no fsync of their own. */
#define SYNCED_MAX 16
struct synced {
        uint64_t dev[SYNCED_MAX];
        bool covered[SYNCED_MAX];
        size_t n;
};

/* ferry_fsio_sync_device of fd's file system, run after every entry of
 * the barrier was made, and its verdict noted in done. 0 or an errno. */
static int sync_device(int fd, const struct ferry_stat *st, struct synced *done,
                       bool *covered)
{
        int rc = ferry_fsio_sync_device(fd, covered);
        if (!rc && done->n < SYNCED_MAX) { /* past it: synced each time */
                done->dev[done->n] = st->dev;
                done->covered[done->n++] = *covered;
        }
        return rc;
}

/* The sync of directory fd's file system when this barrier has not run
 * it yet (sync_device; a mount below DST: syncfs of DST's root covers
 * only DST's own); *covered as there. 0 or an errno. */
static int sync_mount(int fd, struct synced *done, bool *covered)
{
        struct ferry_stat st;
        *covered = false;
        int rc = ferry_fsio_fstat(fd, &st);
        if (rc)
                return rc;
        for (size_t i = 0; i < done->n; i++)
                if (done->dev[i] == st.dev) {
                        *covered = done->covered[i];
                        return 0;
                }
        return sync_device(fd, &st, done, covered);
}

/* fsyncs each destination directory that received a file (or, see
 * needs_dir_sync, metadata with no descriptor); with done (batch
 * durability) first syncs the file system of each one on a mount below
 * DST (sync_mount), and leaves out the fsyncs that sync made needless
 * (ferry_fsio_sync_device: XFS, Btrfs, ext2/3/4). */
static int sync_dirs(const struct ferry_coord_cfg *cfg,
                     struct ferry_batch *list, struct synced *done)
{
        size_t n = 0, cap = 0;
        for (struct ferry_batch *b = list; b; b = b->next)
                cap += b->n;
        /* pairs: dir id, then batch index + item index packed */
        struct ent {
                int64_t dir;
                struct ferry_batch *b;
                uint32_t off;
        } *e = malloc(cap * sizeof(*e) + 1);
        if (!e)
                return ENOMEM;
        bool file = cfg->opt->durability == FERRY_DURABLE_FILE;
        for (struct ferry_batch *b = list; b; b = b->next)
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result == R_DONE &&
                            needs_dir_sync(&b->items[i], file) &&
                            (!n || e[n - 1].dir != b->items[i].dir_id))
                                e[n++] = (struct ent){b->items[i].dir_id, b,
                                                      b->items[i].dir_off};
        qsort(e, n, sizeof(*e), cmp_i64);
        int rc = 0;
        for (size_t i = 0; i < n && !rc; i++) {
                if (i && e[i].dir == e[i - 1].dir)
                        continue;
                int fd = -1;
                int64_t since = 0; /* no descriptor: wait, holding none */
                do
                        rc = ferry_fsio_open_dir(
                                cfg->dstfd, ferry_batch_at(e[i].b, e[i].off),
                                &fd);
                while (rc && ferry_fsio_fd_wait(&since, rc));
                bool covered = false;
                if (!rc && done)
                        rc = sync_mount(fd, done, &covered);
                if (!rc && !covered)
                        rc = ferry_fsio_fsync(fd);
                ferry_fsio_close(&fd);
        }
        free(e);
        return rc;
}

static bool any_done(const struct ferry_batch *list)
{
        for (const struct ferry_batch *b = list; b; b = b->next)
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result == R_DONE)
                                return true;
        return false;
}

static int run_barrier(const struct ferry_coord_cfg *cfg,
                       struct ferry_batch *list)
{
        if (!any_done(list) || cfg->opt->durability == FERRY_DURABLE_NONE)
                return 0;
        ferry_fsio_crashpoint("before_barrier");
        int rc = 0;
        struct synced done = {.n = 0}, *batch = NULL;
        if (cfg->opt->durability == FERRY_DURABLE_BATCH) {
                struct ferry_stat root;
                bool covered;
                rc = ferry_fsio_fstat(cfg->dstfd, &root);
                if (!rc)
                        rc = sync_device(cfg->dstfd, &root, &done, &covered);
                batch = &done;
        }
        if (!rc)
                rc = sync_dirs(cfg, list, batch);
        if (!rc)
                ferry_fsio_crashpoint("after_barrier");
        return rc;
}

void *barrier_main(void *arg)
{
        ferry_thread_quiet();
        struct coord *c = arg;
        void *p;
        while (ferry_queue_pop(&c->bar.q, &p, -1) == FERRY_QUEUE_OK) {
                struct barrier_job *job = p;
                job->msg.err = run_barrier(c->cfg, job->list);
                ferry_queue_push(&c->inbox, job);
        }
        return NULL;
}

void reason(const struct ferry_batch *b, const struct ferry_item *it, char *buf,
            size_t size)
{
        if (it->why_off)
                snprintf(buf, size, "%s", ferry_batch_at(b, it->why_off));
        else
                ferry_failure_message(&it->fail, false, buf, size);
}

/* The outcomes of a batch's results, recorded together
 * (ferry_manifest_record_outcomes), with what they point to. */
struct outcomes {
        struct ferry_outcome o[BATCH_ITEMS];
        struct ferry_dst_rec claim[BATCH_ITEMS];
        struct ferry_failure fail[BATCH_ITEMS];
        char why[BATCH_ITEMS][512];
        size_t n;
};

static void record_outcomes(struct coord *c, struct outcomes *out)
{
        bool fresh = false;
        if (out->n && c->stop_code != FERRY_EMANIFEST &&
            ferry_manifest_record_outcomes(c->m, out->o, out->n, &fresh))
                manifest_error(c);
        if (fresh)
                c->fresh = true;
        out->n = 0;
}

/* The next outcome's slot (its why, fail and claim beside it). */
static struct ferry_outcome *next_outcome(struct coord *c, struct outcomes *out)
{
        if (out->n == BATCH_ITEMS)
                record_outcomes(c, out); /* a batch is no bigger */
        return &out->o[out->n++];
}

/*
 * An entry of another type in the way of it (R_IN_WAY): removed when it is
 * ferry's, and the row stays pending for a later pass to copy; left alone
 * otherwise, and the row fails with why. A claimed entry (claim->type set)
 * is the row's from now on.
 */
static bool clear_way(struct coord *c, const struct ferry_batch *b,
                      const struct ferry_item *it, char *why, size_t size,
                      struct ferry_failure *fail, struct ferry_dst_rec *claim)
{
        char *what = NULL;
        int rc = ferry_owner_clear_way(c->m, c->cfg->dstfd, c->cfg->names,
                                       ferry_batch_at(b, it->dir_off),
                                       ferry_batch_at(b, it->name_off), it->err,
                                       true, &what, claim, why, size);
        if (!rc && what) {
                c->sum->files_deleted++;
                emit(c, FERRY_EV_DELETED, "", what, NULL);
        }
        free(what);
        if (rc && rc != EEXIST && stop_for_dst(c, rc))
                return true; /* DST failed: the row stays pending */
        *fail = rc == EEXIST ? ferry_failure_of(FERRY_SIDE_DST,
                                                FERRY_STEP_NOT_OURS, 0)
                             : ferry_failure_of(FERRY_SIDE_DST,
                                                FERRY_STEP_CLEAR, rc);
        if (rc)
                return false;
        note_low(c, it->id);
        return true;
}

/* The MF_AP_* bits a done row holds beyond what the copier applied: the
 * run's --hard-links (its names are links, or it has no other) and
 * --atimes (the times applied were SRC's atime too). */
static uint32_t applied_also(const struct coord *c, const struct ferry_item *it)
{
        uint32_t also = 0;
        if (coord_hard_links(c) && it->type == FT_REG)
                also |= MF_AP_LINKS;
        if (c->opt->atimes && (it->applied & MF_AP_TIMES))
                also |= MF_AP_ATIMES;
        return also;
}

/* A done row's counts and event: its metadata alone applied in place, a
 * hardlink name made as a link (no data), or a copy. credit: its bytes
 * the progress counted done at its hand-out (a resume's, progress.c). */
static void count_done(struct coord *c, const struct ferry_batch *b,
                       const struct ferry_item *it, uint64_t credit)
{
        if (it->need == MF_NEED_META) {
                c->sum->meta_applied++;
                emit_item(c, FERRY_EV_META, b, it, NULL, NULL);
                return;
        }
        if (it->adopted) {
                c->sum->files_adopted++;
                /* its bytes are in DST: done for the progress (ETA) */
                c->bytes_committed +=
                        it->st.size > credit ? it->st.size - credit : 0;
                emit_item(c, FERRY_EV_ADOPTED, b, it, NULL, NULL);
                return;
        }
        if (it->adopt_differs) /* then copied as any other */
                emit_item(c, FERRY_EV_WARNING, b, it,
                          "--adopt: the destination's file has the size and "
                          "mtime of the source's but another content: "
                          "copied again",
                          NULL);
        if (it->link_off && !it->bytes) {
                c->sum->files_linked++;
                emit_item(c, FERRY_EV_LINKED, b, it, NULL, NULL);
                return;
        }
        /* a file in chunks counts whole (its size, as a file copied
         * at once does), whatever of it an earlier run wrote, or holes
         * left unwritten; it->bytes is what this run wrote of it (the
         * live byte count's share, settled in record_copy) */
        uint64_t bytes = ferry_item_plan(b, it) ? it->st.size : it->bytes;
        c->sum->files_copied++;
        c->sum->bytes_copied += bytes;
        /* progress (progress.c) */
        c->bytes_committed += bytes > credit ? bytes - credit : 0;
        emit_item(c, FERRY_EV_COPIED, b, it, NULL, NULL);
}

/* Adds what became of it to out (nothing: it stays pending). */
static void record_copy(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it, bool durable,
                        struct outcomes *out)
{
        struct ferry_outcome *o = next_outcome(c, out);
        size_t k = (size_t)(o - out->o);
        char *why = out->why[k];
        size_t size = sizeof(out->why[k]);
        struct ferry_failure *fail = &out->fail[k];
        struct ferry_dst_rec *claim = &out->claim[k];
        *o = (struct ferry_outcome){.id = it->id};
        *fail = it->fail;
        c->bytes_settled += it->bytes; /* no longer live (progress) */
        /* a resume's earlier chunks, counted done at its hand-out: no
         * more when the row stays to copy (a later pass credits it
         * again; the progress shown never goes back, progress.c) */
        uint64_t credit = it->plan_off ? take_credit(c, it->id) : 0;
        if (it->result != R_DONE || !durable) {
                c->bytes_committed -= credit;
                c->prog.bytes_resumed -= credit;
        }
        if (it->result == R_IN_WAY &&
            clear_way(c, b, it, why, size, fail, claim)) {
                if (claim->type) /* stays pending: copied again later */
                        *o = (struct ferry_outcome){
                                .kind = FO_CLAIM, .id = it->id, .claim = claim};
                else
                        out->n--;
                return;
        }
        switch (it->result) {
        case R_DONE:
                if (!durable)
                        break; /* stays pending: copied again later */
                o->kind = FO_DONE;
                o->item = it;
                o->plan = ferry_item_plan(b, it); /* its chunks' hashes */
                o->applied_also = applied_also(c, it);
                count_done(c, b, it, credit);
                if (it->meta_fail.step) /* data there, metadata not all */
                        meta_shortfall(c, ferry_batch_at(b, it->dir_off),
                                       ferry_batch_at(b, it->name_off), false,
                                       &it->meta_fail);
                break;
        case R_IN_WAY: /* why says why it stays */
        case R_FAILED:
        case R_CHANGED:
        case R_MISMATCH:
        case R_MISSING:
        case R_META_DIFFERS: /* verify's: not in a copy */
                if (it->result != R_IN_WAY)
                        reason(b, it, why, size);
                o->kind = FO_FAILED;
                o->why = why;
                o->fail = fail;
                /* its chunks are of a SRC that is no more */
                o->src_changed = it->result == R_CHANGED;
                c->sum->files_failed++;
                c->prog.errors++;
                emit_item(c, FERRY_EV_FAILED, b, it, why, fail);
                if (fail->step == FERRY_STEP_TOO_BIG)
                        too_big_seen(c, why);
                break;
        case R_VANISHED:
                o->kind = FO_VANISHED;
                o->why = "vanished from the source";
                o->fail = &it->fail;
                c->sum->files_vanished++;
                emit_item(c, FERRY_EV_VANISHED, b, it, "vanished", &it->fail);
                break;
        case R_NOSPACE:
        case R_DSTFAIL: stops_run(c, it); break;
        case R_NOFDS: stop_no_fds(c, it->err); break;
        case R_NONE: break;
        }
        if (o->kind)
                c->prog.files_done++;
        else
                out->n--; /* nothing to record */
}

/* A barrier failed: files of this run are in place in DST without their
 * done marks (and a power cut may have emptied them). Until a run ends
 * with exit 0, what appeared in DST since this run began is taken for
 * ferry's own leftovers (ferry_copy_is_ours). */
static void note_uncertain(struct coord *c)
{
        char buf[32];
        if (ferry_manifest_note(c->m, UNCERTAIN_KEY, buf, sizeof(buf)))
                return;
        if (buf[0])
                return; /* an earlier run's start is earlier still */
        snprintf(buf, sizeof(buf), "%lld", (long long)c->run_started);
        ferry_manifest_owe_sync(c->m); /* its COMMIT must survive a power cut */
        if (ferry_manifest_set_note(c->m, UNCERTAIN_KEY, buf))
                manifest_error(c);
}

void on_barrier(struct coord *c, struct barrier_job *job)
{
        c->bar.running = NULL;
        bool durable = job->msg.err == 0;
        /* a full or failed DST says so in the run's one message */
        if (ferry_fsio_out_of_fds(job->msg.err))
                stop_no_fds(c, job->msg.err); /* not the barrier's fault */
        else if (!durable && !stop_for_dst(c, job->msg.err) && !c->bar.failed) {
                c->bar.failed = true;
                note_uncertain(c);
                if (c->opt->event)
                        c->opt->event(
                                FERRY_EV_WARNING, "", 0,
                                "durability barrier on the destination "
                                "failed; those files will be copied again",
                                NULL, c->opt->cb_arg);
        }
        /* one batch's outcomes at a time: a directory is touched once
         * for the files copied into it */
        struct outcomes out;
        out.n = 0;
        for (struct ferry_batch *b = job->list; b; b = b->next) {
                for (size_t i = 0; i < b->n && c->stop_code != FERRY_EMANIFEST;
                     i++)
                        record_copy(c, b, &b->items[i], durable, &out);
                record_outcomes(c, &out);
                c->ho.outstanding -= b->n;
        }
        free_list(job->list);
        free(job);
        commit(c);
        /* the first pass is right after the first COMMIT of done marks,
         * however many timed commits came before it (t54's power cut) */
        ferry_fsio_crashpoint("after_done_commit");
}

/* A chunk durable in its temp file (the worker's fdatasync came first,
 * so no barrier): its row goes with the next commit; one lost costs a
 * copy of the chunk again, so it owes the -wal no sync. */
void on_chunk(struct coord *c, struct ferry_chunk_msg *m)
{
        if (c->stop_code != FERRY_EMANIFEST && !c->opt->dry_run) {
                if (ferry_manifest_record_chunk(c->m, m))
                        manifest_error(c);
                else
                        c->dirty = c->chunks = true;
        }
        free(m);
}

static void start_barrier(struct coord *c)
{
        /* a run with nothing to make durable starts no thread for it */
        int err = c->bar.started
                          ? 0
                          : ferry_thread_start(&c->bar.thread, barrier_main, c);
        if (err) {
                set_error(c, FERRY_EINTERNAL, "cannot start threads: %s",
                          strerror(err));
                return;
        }
        c->bar.started = true;
        struct barrier_job *job = calloc(1, sizeof(*job));
        if (!job) {
                set_error(c, FERRY_EINTERNAL, "out of memory");
                return;
        }
        job->msg.kind = MSG_BARRIER;
        job->list = c->bar.head;
        c->bar.head = c->bar.tail = NULL;
        c->bar.items = 0;
        c->bar.running = job;
        ferry_queue_push(&c->bar.q, job);
}

void maybe_barrier(struct coord *c)
{
        if (c->bar.running || !c->bar.head)
                return;
        if (c->bar.items >= BARRIER_ITEMS || c->ho.in_flight == 0 ||
            now() - c->bar.since >= BARRIER_SECONDS || c->stop_code)
                start_barrier(c);
}

void on_batch(struct coord *c, struct ferry_batch *b)
{
        c->ho.in_flight--;
        /* a full or failed DST stops the hand-out now, not after the
         * barrier; the results wait for it (record_copy) */
        for (size_t i = 0; i < b->n; i++)
                if (stops_run(c, &b->items[i]))
                        break;
        if (b->work != WORK_COPY) {
                for (size_t i = 0; i < b->n; i++)
                        if (b->items[i].result != R_NONE &&
                            b->items[i].result != R_DSTFAIL &&
                            b->items[i].result != R_NOSPACE)
                                record_verify(c, b, &b->items[i]);
                c->ho.outstanding -= b->n;
                ferry_batch_free(b);
                return;
        }
        /* rows whose copy never started: pending as they were, handed
         * out again, and no longer this batch's (neither out nor waiting
         * for the barrier) */
        if (b->given_back < b->n) {
                for (size_t i = b->given_back; !c->stop_code && i < b->n; i++)
                        note_low(c, b->items[i].id);
                c->ho.outstanding -= b->n - b->given_back;
                b->n = b->given_back;
        }
        b->next = NULL;
        if (c->bar.tail)
                c->bar.tail->next = b;
        else
                c->bar.head = b;
        if (!c->bar.items)
                c->bar.since = now();
        c->bar.tail = b;
        c->bar.items += b->n;
}

bool all_committed(const struct coord *c)
{
        return !c->ho.in_flight && !c->bar.running && !c->bar.head;
}
