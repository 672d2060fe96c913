/*
 * shared/internal.h - a copy run on the shared manifest (issue 14): what
 * the files of src/shared/ share. One process is one host of the job; its
 * coordinator thread holds the one PostgreSQL connection (pg.h: one
 * thread at a time) and is the only one that claims, renews and completes.
 *
 * run.c starts the host and runs its loop: claim batches of file rows,
 * hand them to the worker pool (workers.h, the SQLite run's copiers),
 * take them back, run the DST barrier and only then complete them (rule
 * 1); list claimed directories between hand-outs (scan.c); renew the
 * leases of what is in flight; and at the end, when the whole job's scan
 * and copies are over, apply directories' metadata (finish.c). fp.c makes
 * the SRC and DST fingerprints a host joins with; batches.c hands claims
 * out and takes them back; control.c applies `ferry set`. verify.c is
 * --verify: the job's done rows read a page at a time and verified by the
 * same worker pool, with no claim.
 */
#ifndef FERRY_SHARED_INTERNAL_H
#define FERRY_SHARED_INTERNAL_H

#include "ferry.h"
#include "copy.h"
#include "fsio.h"
#include "manifest_pg/pg.h"
#include "queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How long a call waits for the server to come back (restart, network). */
#define SHARED_PG_WAIT_S 120
/* Copies (a verify's batches) in flight without -j N. */
#define SHARED_JOBS 16
/* Scan threads of a host: directories listed at once. */
#define SHARED_SCANNERS 16
/* Copies in flight `ferry set -j N` may raise a host to (its -j, when
 * that is more). */
#define SHARED_JOBS_MAX 256

/* A file claim handed to the workers, until its barrier and outcome. */
struct flight {
        struct ferry_batch *b;
        int64_t token;
};

struct shared {
        const struct ferry_options *opt;
        struct ferry_summary *sum;
        struct ferry_error *err;
        struct ferry_pg *pg;
        int srcfd, dstfd;
        uint64_t src_dev; /* -x */
        /* --include, --exclude, --min-size, --max-size (select.c); NULL:
         * every entry */
        struct ferry_select *select;
        atomic_bool *stop;
        int lease;         /* seconds */
        unsigned jobs;     /* -j: copies in flight at the start */
        unsigned max_jobs; /* the pool's threads at most */
        unsigned limit;    /* copies in flight now (control.c) */
        /* claims nothing new (control.c): the job's control pauses it
         * (set_paused), or this host's clock is outside its window (until
         * resume_at, minutes after local midnight; -1 when not) */
        bool paused, set_paused;
        int resume_at;
        /* --bwlimit: the token bucket this host's copies share (control.c
         * sets its rate) */
        struct ferry_rate *rate;
        /* another host ran the job again (a scan generation this host did
         * not join): this host claims nothing more and ends */
        bool moved;
        double last_control;
        /* the copies' fence (copy.h; run.c, shared_renew): every claim in
         * flight is surely this host's until then (CLOCK_MONOTONIC ns);
         * 0 while a claim was found lost, until those in flight are back */
        _Atomic int64_t fence;
        bool claims_lost;
        /* batches.c: this host saw the scan over (links.c), when it
         * last let link groups' rows go, and the wait before the next
         * look (seconds) */
        bool links_over;
        double links_at, links_wait, links_asked;
        /* --delete refused: SRC looks emptied or replaced; or entries
         * kept, --max-delete reached (delete.c): exit 25 */
        bool delete_refused, delete_held;
        /* this host saw the job over and finished it (run.c) */
        bool over;
        struct ferry_copy_cfg ccfg;
        struct ferry_workers *pool;
        struct ferry_queue work, inbox;
        struct flight *fl; /* in flight, nfl of cap 2 * max_jobs */
        size_t nfl;
        double last_renew, last_progress;
        double t0;
        int code; /* what ends the run early (0: nothing) */
        /* scan.c: the scan threads and the directories in flight (the
         * token of each, for renewals) */
        struct ferry_queue scanq;
        pthread_t scanners[SHARED_SCANNERS];
        unsigned nscan;
        bool scan_started;
        int64_t scan_tokens[SHARED_SCANNERS];
        size_t nscans;
};

/* run.c: the options a shared job takes (FERRY_EUSAGE naming the first
 * it does not, in e); the connection to opt->manifest (s->pg); SRC's and
 * DST's root opened (DST made first when make_dst), refused when they
 * are one directory. */
int shared_check_options(const struct ferry_options *o, struct ferry_error *e);
int shared_connect(struct shared *s);
int shared_open_roots(struct shared *s, bool make_dst);
/* Seconds on a monotonic clock. */
double shared_now(void);
/* A host that waits for other hosts' work (nothing to claim) sleeps *ms
 * (0 at first: a few ms), doubled after each wait up to 100 ms; the
 * caller sets *ms back to 0 once it finds work. */
void shared_idle(int *ms);
/* Formats s->err and sets s->code, unless a code is set already; returns
 * s->code. */
int shared_fail(struct shared *s, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The PostgreSQL failure as s's (FERRY_EMANIFEST unless rc says more). */
int shared_pg_fail(struct shared *s, int rc);
/* Renews the leases of everything in flight (file batches, directories
 * being listed) once a third of a lease has passed since the last, and
 * moves the fence: two thirds of a lease past the renewal's start when
 * every row in flight was renewed, 0 when one was not (its lease ran out
 * and another host took it). */
int shared_renew(struct shared *s);
/* Before a claim: a host whose lost claims are all back has its fence
 * again (new claims are its own for a lease). */
void shared_fence_reset(struct shared *s);
/* Before a claim of the end-of-run work, none other in flight: the fence
 * is two thirds of a lease from now. */
void shared_fence_claim(struct shared *s);
/* Claims up to max rows of kind under s's lease; *none when none was
 * claimable (c then holds nothing). */
int shared_claim(struct shared *s, enum ferry_pg_kind kind, size_t max,
                 struct ferry_pg_claim *c, bool *none);
/* Tells the caller's event callback. */
void shared_event(struct shared *s, enum ferry_event ev, const char *dir,
                  size_t dir_len, const char *name, size_t name_len,
                  const char *detail, const struct ferry_failure *fail);

static inline int64_t shared_ns(struct ferry_time t)
{
        return t.sec * 1000000000 + (int64_t)t.nsec;
}
static inline struct ferry_time shared_time(int64_t ns)
{
        int64_t sec = ns / 1000000000, rem = ns % 1000000000;
        if (rem < 0)
                sec--, rem += 1000000000;
        return (struct ferry_time){sec, (uint32_t)rem};
}

/* barrier.c: makes what batch b's done items wrote durable (rule 1), as
 * the options say; 0 or an errno. shared_dirs_covered: the barrier's
 * sync covers every DST directory (no fsync of each is needed). */
int shared_barrier(struct shared *s, const struct ferry_batch *b);
bool shared_dirs_covered(const struct shared *s);
/* barrier.c: DST's file system synced (the end-of-run work's, before its
 * outcomes commit); 0, or s's failure (FERRY_EDSTFAIL). */
int shared_sync_dst(struct shared *s);

/* batches.c: claims a batch of files and hands it to the pool (*none:
 * none was claimable); takes one back: barrier, then its outcomes. */
int shared_hand_out(struct shared *s, bool *none);
int shared_take_back(struct shared *s, struct ferry_batch *b);
/* Appends file row r to b as an item to copy (b has room for it); ENOMEM
 * or 0. */
int shared_put_row(struct ferry_batch *b, const struct ferry_pg_row *r);

/* control.c: reads the job's live control about once a second and
 * applies it (s->paused, s->limit, the rate of s->rate; the job's
 * --bwlimit and --window, or this host's own); start makes s->rate,
 * release frees it (the workers joined). */
int shared_control(struct shared *s);
int shared_control_start(struct shared *s);
void shared_control_release(struct shared *s);

/* fp.c: the fingerprint of SRC (its root's entries: names, types, sizes;
 * names not NULL: those names too, sorted, *nnames of them, freed with
 * shared_names_free) and of DST (the job's mark in DST's root,
 * SHARED_MARK, made when missing: *made says so; made NULL: a missing
 * mark is refused, FERRY_EPATH, and none made). out: at least
 * SHARED_FP_LEN bytes. */
#define SHARED_MARK   ".ferry-job"
#define SHARED_FP_LEN 80
int shared_src_fp(struct shared *s, char *out, char ***names, size_t *nnames);
void shared_names_free(char **names, size_t n);
int shared_dst_fp(struct shared *s, char *out, bool *made);

/* scan.c: lists SRC's directory path whole on this thread, as a claimed
 * one is listed (the selection, -x, the kinds of entries the options
 * copy), and hands fn its subdirectories and its files (as rows of
 * directory 0); the directory's errno, fn's result, or 0. For the dry
 * run (dryrun.c), which claims nothing. */
typedef int (*shared_list_fn)(struct shared *s, const struct ferry_pg_dir *dirs,
                              size_t nd, const struct ferry_pg_file *files,
                              size_t nf, void *arg);
int shared_list_dir(struct shared *s, const char *path, size_t path_len,
                    shared_list_fn fn, void *arg);
/* dryrun.c: ferry -n with a shared manifest: what a run would copy, adopt
 * or refuse, said as a single host's dry run says it; writes nothing. */
int shared_dry_run(struct shared *s);

/* scan.c: starts and ends the scan threads; claims directories for the
 * idle ones (*none: none was claimable); records a listing that came back
 * in the inbox (MSG_LISTING: rows added, the directory completed;
 * *added_dirs when it had subdirectories), or drops one unrecorded. */
int shared_scan_start(struct shared *s);
void shared_scan_end(struct shared *s);
int shared_scan_claim(struct shared *s, bool *none);
int shared_scan_done(struct shared *s, void *msg, bool *added_dirs);
void shared_scan_drop(void *msg);
/* The root's row (every host adds it; it exists once). */
int shared_add_root(struct shared *s);

/* finish.c: marks what this gen's scan did not see removed, runs
 * --delete (delete.c), then applies the metadata of every listed
 * directory still to apply, a claim at a time (the whole job's copies are
 * over). */
int shared_finish_dirs(struct shared *s);
/* delete.c: --delete's deletions in DST of the job's removed rows, when
 * the scan was complete and SRC does not look emptied or replaced. */
int shared_delete(struct shared *s);
/* delete.c: what --delete keeps of the removed rows (a run's and a dry
 * run's): the job's mark, a path the selection leaves out (never a source
 * deletion), or a name SRC holds under another spelling on a DST that
 * does not tell them apart (its copy there is that file's now). */
struct shared_keep {
        struct ferry_names *names; /* NULL: DST tells spellings apart */
        struct ferry_fold *fold;
};
int shared_keep_init(const struct shared *s, struct shared_keep *k);
bool shared_delete_keeps(const struct shared *s, struct shared_keep *k,
                         const char *dir, const char *name, bool is_dir);
void shared_keep_release(struct shared_keep *k);
/* delete.c: why SRC looks replaced or emptied to k, the guard's counts
 * (coord/guard.c's source_suspect, for the whole job); false when it
 * does not. */
bool shared_delete_suspect(const struct shared *s,
                           const struct ferry_pg_delete_check *k, char *why,
                           size_t size);
/* chunks.c: a large file's chunks. The row and SRC of item it (no
 * chunk). */
void shared_chunk_src(const struct ferry_item *it, struct ferry_pg_chunk *c);
/* Records chunk m (a MSG_CHUNK from the copier) under the claim in flight
 * that holds its row, and frees it; 0 or s's failure. */
struct ferry_chunk_msg;
int shared_chunk_record(struct shared *s, struct ferry_chunk_msg *m);
/* Drops the chunks of the files of batch b done by outcomes o[0..n-1]
 * (o[i] is b->items[at[i]]'s), once they are recorded. */
int shared_chunks_done(struct shared *s, const struct ferry_batch *b,
                       const struct ferry_pg_outcome *o, const size_t *at,
                       size_t n);
/* dry_delete.c: -n --delete, once the dry run's listing is over: what a
 * run's --delete would delete listed; over: the job's run is over;
 * new_done: files the listing found a run would copy or adopt whose rows
 * are not done now. */
int shared_dry_delete(struct shared *s, bool over, uint64_t new_done);
/* delete.c: refused (as shared_delete_join refuses) when theirs, the
 * --max-delete of the run's deletions (-1: none), is not this host's. */
int shared_delete_limit_check(struct shared *s, int64_t theirs);
/* delete.c: a host run with --delete records its --max-delete as its
 * gen's, or is refused when the gen has another (FERRY_EUSAGE). */
int shared_delete_join(struct shared *s);

/* select.c: the selection options. open: s->select from the options
 * (FERRY_EUSAGE for a bad pattern, the message in s->err); join: this
 * host's selection is the joined gen's (the first host's), else
 * FERRY_EUSAGE saying both; out: the scan leaves out entry name of
 * directory dir (dlen bytes, "" SRC's root); protects: dir/name (name
 * NULL: the directory dir) is left out, so not deleted; keep: the rows
 * the gen's scan did not see that it leaves out take the gen (not marked
 * removed). */
int shared_select_open(struct shared *s);
void shared_select_free(struct shared *s);
int shared_select_join(struct shared *s);
/* select.c: a dry run's shared_select_join: refused (as a run) when
 * theirs, the selection of the run under way (NULL: none yet), is not
 * this host's. */
int shared_select_dry(struct shared *s, const char *theirs);
bool shared_select_out(const struct shared *s, const char *dir, size_t dlen,
                       const char *name, const struct ferry_stat *st);
bool shared_select_protects(const struct shared *s, const char *dir,
                            const char *name, bool is_dir);
int shared_select_keep(struct shared *s);
/* Once the job is over: each path --files-from lists that no host's scan
 * found (the manifest has no row of it in the gen) said as a warning, as
 * a single host says it; returns how many. */
uint64_t shared_select_missing(struct shared *s);

#endif
