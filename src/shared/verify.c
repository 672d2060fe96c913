/*
 * shared/verify.c - ferry --verify on a shared job (ferry_shared_verify):
 * `ferry --verify --manifest postgresql://... --job-name NAME SRC DST`
 * verifies the whole job from this one host.
 *
 * The job must exist (a verify makes none) and SRC and DST must be its,
 * by the fingerprints a copy checks (fp.c; DST's mark is read, never
 * made). Its done file rows are read a page at a time (keyset by id,
 * ferry_pg_done_files), handed to the worker pool in batches with their
 * recorded hash, at most two batches per thread in flight, and taken back
 * as the SQLite verify takes them (coord/verify.c): equal, missing,
 * differing, unreadable; the same events, summary and exit code (5 when
 * any file is missing or differs). A missing or differing file's row is
 * made pending again with its directories' metadata to apply
 * (ferry_pg_files_again): the job's copy command, run again, copies it.
 * No claim is taken: a verify holds no lease and records no host.
 *
 * Content only: the rows record what SRC's metadata was, not what the
 * copy applied of it (no applied bits, no xattr digest, the DST's caps
 * unknown here), so a metadata check would report what options or DST
 * left out as differences; the copier's metadata check is given nothing
 * to compare (an empty meta cfg). Directories are not checked.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "failure.h"
#include "job.h"
#include "workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Rows of a batch handed to the workers. */
#define VERIFY_BATCH 64

struct vrun {
        struct shared s;
        int work;                  /* WORK_VERIFY_* */
        struct ferry_pg_page page; /* the rows read, next the first not
                                      handed out */
        size_t next;
        int64_t after; /* the last row read */
        bool end;      /* no done row left to read */
        size_t out;    /* batches in flight */
        struct ferry_progress prog;
};

/* ---- hand-out and take-back ----------------------------------------- */

/* The next page of rows, when the last is all handed out. */
static int next_page(struct vrun *v)
{
        if (v->next < v->page.n || v->end)
                return 0;
        if (v->page.n)
                v->after = v->page.rows[v->page.n - 1].id;
        ferry_pg_page_release(&v->page);
        v->next = 0;
        int rc = ferry_pg_done_files(v->s.pg, v->after, FERRY_PG_BATCH_MAX,
                                     &v->page);
        if (rc)
                return shared_pg_fail(&v->s, rc);
        v->end = v->page.n == 0;
        return 0;
}

static int hand_out(struct vrun *v)
{
        struct shared *s = &v->s;
        if (next_page(v) || v->end)
                return s->code;
        size_t k = v->page.n - v->next;
        if (k > VERIFY_BATCH)
                k = VERIFY_BATCH;
        struct ferry_batch *b = ferry_batch_new(v->work, k);
        for (size_t i = 0; b && i < k; i++) {
                const struct ferry_pg_row *r = &v->page.rows[v->next + i];
                if (shared_put_row(b, r)) {
                        ferry_batch_free(b);
                        b = NULL;
                        break;
                }
                /* a done row without its hash is proven by nothing: it
                 * differs, and is copied again */
                if (r->hash_len == sizeof(b->items[i].hash))
                        memcpy(b->items[i].hash, r->hash, r->hash_len);
        }
        if (!b || ferry_queue_push(&s->work, b)) {
                ferry_batch_free(b);
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        }
        v->next += k;
        v->out++;
        int e = ferry_workers_want(s->pool, (unsigned)v->out);
        if (!e)
                return 0;
        void *msg; /* no thread at all: nothing would take it back */
        while (ferry_queue_try_pop(&s->work, &msg) == FERRY_QUEUE_OK)
                ferry_batch_free(msg);
        v->out = 0;
        return shared_fail(s, FERRY_EINTERNAL,
                           "cannot start a worker thread: %s", strerror(e));
}

/* What item it's result says (coord/verify.c's record_verify, the
 * manifest's part aside); true when its row is to be copied again. */
static bool record(struct vrun *v, const struct ferry_batch *b,
                   const struct ferry_item *it)
{
        struct shared *s = &v->s;
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        size_t dl = strlen(dir), nl = strlen(name);
        char what[512];
        if (it->result != R_NONE) {
                v->prog.files_done++;
                v->prog.bytes_done += it->st.size;
        }
        switch (it->result) {
        case R_NONE: return false; /* not attempted: a stop */
        case R_DONE:
                s->sum->verified++;
                shared_event(s, FERRY_EV_VERIFIED, dir, dl, name, nl, NULL,
                             NULL);
                return false;
        case R_NOFDS:
                shared_fail(s, FERRY_EINTERNAL, "no file descriptor came free");
                return false;
        case R_DSTFAIL:
                shared_fail(s, FERRY_EDSTFAIL, "DST '%s' failed: %s",
                            s->opt->dst, strerror(it->err));
                return false;
        case R_MISMATCH:
        case R_MISSING:
        case R_META_DIFFERS: /* (not asked for: see the top) */
                ferry_failure_message(&it->fail, false, what, sizeof(what));
                s->sum->verified++;
                s->sum->mismatched++;
                shared_event(s,
                             it->result == R_MISSING ? FERRY_EV_MISSING
                                                     : FERRY_EV_MISMATCH,
                             dir, dl, name, nl, what, &it->fail);
                return true;
        default:
                if (it->why_off)
                        snprintf(what, sizeof(what), "%s",
                                 ferry_batch_at(b, it->why_off));
                else
                        ferry_failure_message(&it->fail, false, what,
                                              sizeof(what));
                s->sum->files_failed++;
                v->prog.errors++;
                shared_event(s, FERRY_EV_FAILED, dir, dl, name, nl, what,
                             &it->fail);
                return false;
        }
}

static int take_back(struct vrun *v, struct ferry_batch *b)
{
        struct shared *s = &v->s;
        int64_t ids[VERIFY_BATCH];
        size_t n = 0;
        v->out--;
        for (size_t i = 0; i < b->n; i++)
                if (record(v, b, &b->items[i]))
                        ids[n++] = b->items[i].id;
        ferry_batch_free(b);
        uint64_t again = 0;
        /* (a manifest that failed is not asked again for every batch) */
        int rc = n && s->code != FERRY_EMANIFEST
                         ? ferry_pg_files_again(s->pg, ids, n, &again)
                         : 0;
        return rc ? shared_pg_fail(s, rc) : 0;
}

/* ---- the loop ------------------------------------------------------- */

static void progress(struct vrun *v, bool final)
{
        struct shared *s = &v->s;
        double now = shared_now();
        if (!s->opt->progress || (!final && now - s->last_progress < 1.0))
                return;
        s->last_progress = now;
        v->prog.elapsed = now - s->t0;
        v->prog.final = final;
        s->opt->progress(&v->prog, s->opt->cb_arg);
}

static void verify_loop(struct vrun *v)
{
        struct shared *s = &v->s;
        size_t room = 2 * (size_t)s->jobs;
        for (;;) {
                bool stopping = s->code || atomic_load(s->stop);
                while (!stopping && !v->end && v->out < room && !hand_out(v))
                        ;
                stopping = s->code || atomic_load(s->stop);
                if (!v->out && (stopping || v->end))
                        break;
                void *msg = NULL;
                if (!ferry_queue_pop(&s->inbox, &msg, 200) && msg)
                        take_back(v, msg);
                progress(v, false);
        }
}

/* ---- start and end -------------------------------------------------- */

/* The job found, by its name and SRC's and DST's fingerprints, and what
 * it has not copied yet (*not_done rows, *unlisted directories). */
static int find_job(struct shared *s, uint64_t *not_done, uint64_t *unlisted,
                    struct ferry_progress *p)
{
        char src_fp[SHARED_FP_LEN], dst_fp[SHARED_FP_LEN];
        if (shared_src_fp(s, src_fp, NULL, NULL) ||
            shared_dst_fp(s, dst_fp, NULL))
                return s->code;
        int rc = ferry_pg_job_find(s->pg, s->opt->job_name, src_fp, dst_fp);
        struct ferry_pg_counts c;
        uint64_t leased = 0;
        if (!rc)
                rc = ferry_pg_counts(s->pg, &c);
        if (!rc)
                rc = ferry_pg_remaining(s->pg, PG_DIRS, unlisted, &leased);
        if (rc)
                return shared_pg_fail(s, rc);
        *not_done = c.files - c.files_done;
        p->files_total = c.files_done;
        p->bytes_total = c.bytes_done;
        return 0;
}

static int start_pool(struct shared *s)
{
        s->ccfg = (struct ferry_copy_cfg){
                .srcfd = s->srcfd,
                .dstfd = s->dstfd,
                /* .meta: nothing applied is known, nothing compared */
                .retries = s->opt->retries,
                .stop = s->stop,
        };
        size_t room = 2 * (size_t)s->jobs;
        if (ferry_queue_init(&s->work, room + 1) ||
            ferry_queue_init(&s->inbox, room + 1))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        if (ferry_workers_start(&s->ccfg, s->jobs, s->jobs, &s->work, &s->inbox,
                                &s->pool))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        return 0;
}

static void stop_pool(struct vrun *v)
{
        struct shared *s = &v->s;
        if (!s->pool)
                return;
        ferry_queue_close(&s->work);
        ferry_workers_join(s->pool);
        s->sum->workers = s->jobs;
        void *msg; /* what came back after the loop ended (a failure) */
        while (!ferry_queue_try_pop(&s->inbox, &msg) && msg)
                ferry_batch_free(msg);
        ferry_queue_release(&s->work);
        ferry_queue_release(&s->inbox);
}

/* The exit code of a verify that ran to its end, as the SQLite one's. */
static int end_code(struct vrun *v, uint64_t not_done, uint64_t unlisted)
{
        struct shared *s = &v->s;
        const struct ferry_summary *m = s->sum;
        if (m->mismatched || m->files_failed)
                return shared_fail(s, FERRY_EVERIFY,
                                   "verify found %llu missing or differing "
                                   "files, %llu with other metadata%s",
                                   (unsigned long long)m->mismatched, 0ULL,
                                   m->files_failed ? " and unreadable ones"
                                                   : "");
        if (unlisted)
                return shared_fail(s, FERRY_EVERIFY,
                                   "the job's scan is not over (%llu "
                                   "directories to list): run the copy first",
                                   (unsigned long long)unlisted);
        if (not_done)
                return shared_fail(s, FERRY_EVERIFY,
                                   "%llu files are not copied yet: run the "
                                   "copy first",
                                   (unsigned long long)not_done);
        return 0;
}

int ferry_shared_verify(const struct ferry_options *opt,
                        enum ferry_verify_mode mode, struct ferry_summary *sum,
                        struct ferry_error *err)
{
        memset(sum, 0, sizeof(*sum));
        err->msg[0] = '\0';
        int rc = shared_check_options(opt, err);
        if (rc)
                return rc;
        if (opt->n_filters || opt->n_excludes || opt->min_size >= 0 ||
            opt->max_size >= 0 || opt->files_from)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "--verify of a shared job verifies the "
                                      "whole job: selection options are not "
                                      "taken with it");
        struct vrun v = {
                .s = {.opt = opt,
                      .sum = sum,
                      .err = err,
                      .srcfd = -1,
                      .dstfd = -1,
                      .stop = ferry_job_stop_flag(),
                      .jobs = opt->jobs ? opt->jobs : SHARED_JOBS,
                      .t0 = shared_now()},
                .work = (mode & FERRY_VERIFY_DEST ? WORK_VERIFY_DST : 0) |
                        (mode & FERRY_VERIFY_SOURCE ? WORK_VERIFY_SRC : 0),
        };
        struct shared *s = &v.s;
        uint64_t not_done = 0, unlisted = 0;
        if (!v.work)
                shared_fail(s, FERRY_EUSAGE, "nothing to verify");
        else if (!shared_connect(s) && !shared_open_roots(s, false) &&
                 !find_job(s, &not_done, &unlisted, &v.prog) && !start_pool(s))
                verify_loop(&v);
        stop_pool(&v);
        ferry_pg_page_release(&v.page);
        if (!s->code && atomic_load(s->stop))
                shared_fail(s, FERRY_EINTR, "%s", "");
        if (!s->code)
                end_code(&v, not_done, unlisted);
        if (s->pg && (!s->code || s->code == FERRY_EVERIFY))
                progress(&v, true);
        sum->jobs_peak = s->jobs;
        sum->seconds = shared_now() - s->t0;
        ferry_pg_close(s->pg);
        if (s->srcfd >= 0)
                close(s->srcfd);
        if (s->dstfd >= 0)
                close(s->dstfd);
        return s->code;
}
