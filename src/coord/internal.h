/*
 * coord/internal.h - what the coordinator's files share: its state, its
 * phases, and the functions one role file calls in another.
 *
 * The coordinator is one thread (coord.h); its files are its roles:
 *   run.c      the loop, dispatch, threads, the phase, errors, result codes
 *   progress.c the progress snapshot (bytes as they are written)
 *   start.c    the start of a copy run: the run's row, the DST sample,
 *              what metadata DST holds (and so what is applied)
 *   metafail.c metadata shortfalls counted and named (a few per cause)
 *   ingest.c   scan results into manifest rows, and what they found
 *   handout.c  what is handed out next: passes, low rows
 *   barrier.c  the barrier thread and recording copy results (rule 1)
 *   verify.c   recording --verify's results, and the verify run
 *   verify_dirs.c  --verify of the directories' metadata
 *   finish.c   end-of-run tree work: temps, --delete, directory metadata
 *              (their DST operations are treework.c's: on a slow DST, the
 *              idle workers')
 *   guard.c    --delete's guard (a SRC replaced or emptied) and --max-delete
 *   dryrun.c   the dry run's report
 * Other spellings in SRC (case-insensitive DST) are names_fold.h's.
 *
 * The run's phase (enum run_phase) says what the coordinator may do now.
 * Its arrows, and the function behind each:
 *
 *   STARTING --start_loop-->   SCANNING      (copy, dry run)
 *   STARTING --start_loop-->   VERIFYING     (verify)
 *   SCANNING --on_scan_done--> FIRST_PASS    (copy)
 *   SCANNING --on_scan_done--> DRAINING      (dry run: nothing handed out)
 *   FIRST_PASS --handout_next--> LATER_PASS  (pass 1 gave all, all committed)
 *   LATER_PASS --handout_next--> DRAINING    (a pass gave nothing, or the
 *                                             last pass, MAX_PASSES, ended)
 *   VERIFYING --handout_next--> DRAINING     (every done row handed out)
 *   DRAINING --after the loop--> FINISHING   (copy, dry run)
 *   DRAINING --after the loop--> DONE        (verify)
 *   FINISHING --end of run--> DONE
 *   any other but DONE --set_error, check_stop--> STOPPING
 *   STOPPING --end of run--> DONE
 *
 * The loop (run_loop) runs from SCANNING or VERIFYING until it is DRAINING
 * or STOPPING with nothing in flight and every result committed. Rule 1 is
 * not a phase: a row becomes done only in on_barrier (barrier.c), whatever
 * the phase, and that becomes true with the COMMIT that follows.
 * assert_run_state (run.c) checks each phase's invariants at every arrow.
 */
#ifndef FERRY_COORD_INTERNAL_H
#define FERRY_COORD_INTERNAL_H
struct ferry_chunk_msg;

#include "coord.h"

#include "batch.h"
#include "buf.h"
#include "meta.h"
#include "names_fold.h"
#include "queue.h"
#include "tune.h"
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#define BATCH_ITEMS 32
#define BATCH_BYTES (32ull << 20)
/* batches in flight per copy allowed (jobs.c, follow_limit) */
#define BATCHES_PER_COPY 4
#define MAX_OUTSTANDING  4096 /* items handed out but not yet committed */
/* A first-pass batch still running after this many seconds gives back
 * the items it has not started (struct ferry_batch's give_back_ns): the
 * batches are sized to take 50 ms (jobs.c), so the source got slower
 * since, and 32 items at 10 ms each behind one copy would keep the copies
 * that -j auto adds for it idle (bench/jauto's 200 us -> 5 ms case). */
#define GIVE_BACK_SECONDS 0.1
#define LOW_ROWS          4096 /* changed rows the pass went past */
#define MAX_PASSES        4
#define RESUME_CREDITS                                                         \
        64 /* resumed big files in flight whose earlier                        \
              chunks count done (progress.c) */
/* set_phase and assert_run_state check (a bug stops the run at once, as
 * assert would) in testing and debug builds */
#if defined(FERRY_TESTING) || !defined(NDEBUG)
#define COORD_CHECKS 1
#else
#define COORD_CHECKS 0
#endif
/* the manifest note of a run whose barrier failed (note_uncertain) */
#define UNCERTAIN_KEY "dst_uncertain_since"

enum run_phase {
        PH_STARTING,   /* set-up: the run's row, the DST sample; no thread */
        PH_SCANNING,   /* copy: the scan runs; pass 1 hands out behind it */
        PH_FIRST_PASS, /* copy: the scan is over; pass 1 goes on to the end */
        PH_LATER_PASS, /* copy: passes 2 to MAX_PASSES, each from row 1 */
        PH_VERIFYING,  /* verify: each done row handed out once */
        PH_DRAINING,   /* nothing left to hand out: the last results come */
        PH_STOPPING,   /* stop_code is set: nothing more is handed out */
        PH_FINISHING,  /* threads joined, the workers idle: end-of-run tree
                          work (finish.c), which they may do */
        PH_DONE,       /* the result is known */
};

/* The phases in which rows are handed out to the workers. */
static inline bool phase_hands_out(enum run_phase p)
{
        return p == PH_SCANNING || p == PH_FIRST_PASS || p == PH_LATER_PASS ||
               p == PH_VERIFYING;
}

/* The hand-out (handout.c): what goes to the workers next. */
struct handout {
        int work_kind;  /* WORK_COPY, or WORK_VERIFY_* bits */
        bool hand_out;  /* false in a dry run: nothing is handed out */
        int pass;       /* 1 in SCANNING and FIRST_PASS, then 2..MAX_PASSES */
        bool pass_gave; /* this later pass handed something out */
        struct ferry_handout at; /* where the manifest's pass is */
        /* rows that became pending where the first pass went past
         * (changed or resumed rows keep their ids): handed out by id, so that a
         * re-run copies them while it scans, not after */
        int64_t low[LOW_ROWS];
        size_t n_low;
        unsigned in_flight, max_in_flight; /* batches at the workers */
        unsigned batch_items; /* items per batch, 1 to BATCH_ITEMS */
        size_t outstanding;   /* items handed out but not yet committed */
};

struct barrier_job {
        struct ferry_msg msg;
        struct ferry_batch *list;
};

/* Copy results waiting for the barrier, and the barrier thread
 * (barrier.c). */
struct barrier {
        struct ferry_queue q; /* barrier jobs to the barrier thread */
        pthread_t thread;
        bool started;
        struct ferry_batch *head, *tail; /* results waiting */
        size_t items;
        double since;                /* when the first of them came */
        struct barrier_job *running; /* at the barrier thread, or NULL */
        bool failed;                 /* a barrier of this run failed */
};

/* What ingesting the scan's listings keeps (ingest.c). */
struct ingest {
        bool scan_done; /* MSG_SCAN_DONE came (or no scan: verify); read
                           where the phase cannot tell: in STOPPING */
        struct ferry_entry_rec *recs; /* what a listing's entries became */
        size_t recs_cap;
        uint64_t dirs_seen; /* directories the scan listed, SRC not counted */
        char src_id[64];    /* SRC's root now, "dev:ino" */
        char src_was[64];   /* the one recorded, when it differs */
        bool told_devices;  /* "devices need root" was said */
        bool asked_mknod, can_mknod; /* ferry_copy_can_make_devices */
        bool wanted_set; /* set_wanted ran (once: the options and DST's
                            caps do not change during a run) */
};

/* How many copies are in flight (run.c): -j N fixes it, -j auto tunes it
 * (tune.h) from the workers' counts; either way each interval sizes the
 * batches so that one takes about BATCH_TARGET seconds. */
struct jobs_ctl {
        bool autotune;  /* -j auto */
        unsigned limit; /* copies in flight now */
        unsigned cap;   /* the most (-j N, or auto's cap within fds) */
        struct ferry_tune tune;
        double since;                  /* this interval began */
        struct ferry_workers_stats at; /* the counts when it began */
};

/* End-of-run tree work (finish.c), --delete's guard and --max-delete
 * (guard.c). */
struct finish {
        int tree_sync_err;  /* --durability=file: a directory's fsync failed */
        uint64_t to_delete; /* removed rows that --delete would delete */
        bool refused;       /* check_delete said no */
        uint64_t held;      /* entries kept by --max-delete */
        int code;           /* FERRY_EDELETE, or 0 */
        struct ferry_fold *fold; /* SRC's other spellings, NULL until used */
        struct ferry_treework *tree; /* finish_tree's DST work, or NULL */
        uint64_t tree_jobs;          /* DST work done: none, no syncfs owed */
        void *emptied; /* a dry run's DST directories and how many entries
                          its deletions take from each (dryrun.c, tsearch) */
        void *cleared; /* a dry run's DST entries its copies would remove
                          to make way (a directory where SRC has a file) */
};

struct ferry_treework;

/* Live control (control.c): `ferry set`'s file, the window, the bucket. */
struct live_ctl {
        char *path;                /* "<manifest>.control"; NULL: none */
        struct ferry_rate *rate;   /* lent to the copiers */
        struct ferry_control want; /* the file as last read */
        bool paused;               /* nothing handed out, copies wait */
        unsigned jobs;             /* the -j applied (0: auto) */
        double last_poll;
};

/* metafail.c's counts: shortfalls per cause (step, errno) */
#define META_CAUSES 16
struct meta_cause {
        struct ferry_failure f;
        uint64_t n;
};
struct meta_fails {
        struct meta_cause cause[META_CAUSES];
        size_t n;
        uint64_t unnamed; /* of causes beyond META_CAUSES */
        uint64_t too_big; /* files larger than DST holds */
};

struct coord {
        const struct ferry_coord_cfg *cfg;
        const struct ferry_options *opt;
        struct ferry_manifest *m;
        struct ferry_summary *sum;
        struct ferry_error *err;
        enum run_phase phase; /* set only by set_phase (run.c) */
        int stop_code;        /* the first fatal error; 0 but in STOPPING */
        int work_kind;
        int64_t gen, run_id;
        struct ferry_queue inbox, work;
        struct ferry_scan *scan;
        struct ferry_workers *workers; /* joined in coord_release */
        bool workers_idle; /* stop_threads: done with the copy, they wait
                              for the tree work (treework.h) */
        /* the open write transaction: not phase, but what a COMMIT owes */
        bool dirty;   /* scan rows not committed yet */
        bool chunks;  /* chunk rows among them: committed sooner */
        bool fresh;   /* among them, rows that may be handed out */
        mode_t umask; /* the process umask, for --no-perms */
        struct ferry_dst_caps dst_caps; /* what DST holds (dstcaps.h) */
        struct meta_fails mf;           /* metafail.c */
        int64_t written_since;          /* see written_since() */
        int64_t run_started;            /* time(NULL) when this run began */
        struct handout ho;
        struct jobs_ctl jobs;
        struct barrier bar;
        struct ingest in;
        struct finish fin;
        struct live_ctl ctl;
        struct ferry_progress prog;
        /* byte progress inside files (progress, run.c): the copiers add
         * each data write to bytes_live (copy.h); the bytes of recorded
         * results are settled, those of done rows committed (by
         * count_done); prog.bytes_done shows committed + live - settled,
         * never less than it showed before */
        _Atomic uint64_t bytes_live;
        uint64_t bytes_settled, bytes_committed;
        /* big files handed out to resume: their chunks of earlier runs,
         * counted done at once (credit_resumed), not again when done */
        struct resume_credit {
                int64_t id;
                uint64_t bytes;
        } credit[RESUME_CREDITS];
        unsigned n_credit;
        double t0, last_prog, last_commit;
        double chunks_synced;  /* when a commit last synced chunk rows */
        struct ferry_buf path; /* join_path's */
};

typedef void (*row_fn)(struct coord *c, const struct ferry_batch *b,
                       const struct ferry_item *it);
typedef void (*dir_fn)(struct coord *c, const struct ferry_dir_row *d,
                       void *arg);

/* run.c: phase, errors, events, the transaction */
void set_phase(struct coord *c, enum run_phase to);
void assert_run_state(const struct coord *c);
double now(void);
void set_error(struct coord *c, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void manifest_error(struct coord *c);
/* dir/name in a buffer of c's, valid until the next call; NULL: no memory */
const char *join_path(struct coord *c, const char *dir, const char *name,
                      size_t *len);
/* Tells the caller about dir/name; fail: what failed, or NULL (emit). */
void emit_failure(struct coord *c, enum ferry_event ev, const char *dir,
                  const char *name, const char *detail,
                  const struct ferry_failure *fail);
void emit(struct coord *c, enum ferry_event ev, const char *dir,
          const char *name, const char *detail);
void emit_item(struct coord *c, enum ferry_event ev,
               const struct ferry_batch *b, const struct ferry_item *it,
               const char *detail, const struct ferry_failure *fail);
void commit(struct coord *c);
/* progress.c: the snapshot; a batch's resumed big files, whose chunks
 * of earlier runs count done as it is handed out; the bytes so counted
 * of a planned row, when its result comes (0 for none) */
void progress(struct coord *c, bool final);
void credit_resumed(struct coord *c, const struct ferry_batch *b);
uint64_t take_credit(struct coord *c, int64_t id);
void free_list(struct ferry_batch *list);
bool stop_for_dst(struct coord *c, int err);
bool stops_run(struct coord *c, const struct ferry_item *it);
void stop_no_fds(struct coord *c, int err);
bool other_spelling(struct coord *c, const char *dir, const char *name);
int coord_init(struct coord *c, const struct ferry_coord_cfg *cfg,
               struct ferry_summary *sum, struct ferry_error *err,
               int work_kind);
void coord_release(struct coord *c);
int start_threads(struct coord *c, bool scan, bool work);
/* What metadata workers and tree work apply: the options, less what DST
 * cannot hold (c->dst_caps). */
struct ferry_meta_cfg coord_meta_cfg(const struct coord *c);
/* jobs.c: how many copies are in flight (-j N, -j auto) */
void jobs_init(struct coord *c);
void follow_limit(struct coord *c);
void want_workers(struct coord *c);
void tune_tick(struct coord *c, double t);
/* `ferry set -j` (control.c): n copies in flight (at most the cap), or
 * -j auto (0) from the limit now */
void jobs_set(struct coord *c, unsigned n);
/* control.c: live control (`ferry set`, --bwlimit, --window) */
int control_init(struct coord *c);
void control_tick(struct coord *c, double t);
void control_release(struct coord *c);
/* --hard-links as this DST can take it: exFAT holds no second name, so
 * each name is copied apart there (start.c's warning says so). */
static inline bool coord_hard_links(const struct coord *c)
{
        return c->opt->hard_links && c->dst_caps.hard_links;
}
void stop_threads(struct coord *c);
void start_loop(struct coord *c, enum run_phase first);
int result_code(struct coord *c);

/* metafail.c: a shortfall of dir/name (a directory's when is_dir),
 * counted and named when few of its cause were; the rest said at the end
 * (meta_shortfall_end). too_big_seen: one warning for the run. */
void meta_shortfall(struct coord *c, const char *dir, const char *name,
                    bool is_dir, const struct ferry_failure *f);
void meta_shortfall_end(struct coord *c);
void too_big_seen(struct coord *c, const char *why);

/* start.c */
/* mounts.c: syncfs of each other file system mounted below DST's root
 * dstfd (its own is the caller's); 0 or an errno. */
int sync_mounts_below(int dstfd);
int begin_run(struct coord *c);
int written_since(struct coord *c);

/* ingest.c */
void on_listing(struct coord *c, struct ferry_listing *l);
void on_scan_done(struct coord *c);

/* handout.c: the narrow part works on a manifest alone (no thread, no
 * coordinator), so that tests drive it against MF_MEMORY. handout_next
 * sets *out to the next batch (caller owns it) or NULL, and may move
 * *phase on (FIRST_PASS to LATER_PASS, LATER_PASS or VERIFYING to
 * DRAINING); settled says nothing is in flight, at the barrier or waiting
 * for it. It returns 0, FERRY_EMANIFEST (ferry_manifest_errmsg says why)
 * or FERRY_EINTERNAL (out of memory). */
void handout_init(struct handout *h, int work_kind, unsigned max_in_flight);
void handout_note_low(struct handout *h, int64_t id);
int handout_next(struct handout *h, struct ferry_manifest *m, int64_t gen,
                 bool settled, enum run_phase *phase, struct ferry_batch **out);
void note_low(struct coord *c, int64_t id);
void refill(struct coord *c);

/* barrier.c */
void *barrier_main(void *arg);
/* A chunk durable in its temp file (MSG_CHUNK): recorded in the open
 * transaction, and freed. */
void on_chunk(struct coord *c, struct ferry_chunk_msg *m);
bool all_committed(const struct coord *c);
void maybe_barrier(struct coord *c);
void on_batch(struct coord *c, struct ferry_batch *b);
void on_barrier(struct coord *c, struct barrier_job *job);
void reason(const struct ferry_batch *b, const struct ferry_item *it, char *buf,
            size_t size);

/* verify.c */
void record_verify(struct coord *c, const struct ferry_batch *b,
                   const struct ferry_item *it);
/* finish.c: runs fn(c, row, arg) over every directory row of set, deepest
 * first, until the run stops. */
void each_dir(struct coord *c, enum ferry_dir_set set, dir_fn fn, void *arg);
/* verify_dirs.c: the directories' metadata, after the files */
void verify_dirs(struct coord *c);

/* finish.c */
void each_row(struct coord *c, enum ferry_pass p, row_fn fn);
bool protected_path(struct coord *c, const char *dir, const char *name,
                    bool is_dir);
void finish_tree(struct coord *c);

/* guard.c */
bool check_delete(struct coord *c);
void keep_source_rows(struct coord *c);
void record_source(struct coord *c, bool deleted);
bool delete_held(struct coord *c, const char *dir, const char *name,
                 bool is_dir);
void report_held(struct coord *c);

/* dryrun.c */
int dry_run(struct coord *c);

#endif
