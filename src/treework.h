/*
 * treework.h - the end-of-run tree work on DST run by the worker pool:
 * removing stale temp files, --delete's deletions of files and of
 * directories, and applying directories' metadata (owner, mode, xattrs
 * and ACLs, times).
 *
 * The coordinator (coord/finish.c) decides what a row needs (rule 9's
 * protected paths, --max-delete, the other-spelling checks stay there) and
 * adds one job per row: a file row's job (TREE_TEMP, TREE_DEL_FILE) from
 * its batch item, a directory row's job (TREE_DEL_DIR, TREE_APPLY_DIR)
 * from the manifest's directory walk. A job owns copies of everything it
 * needs (the batch and the walk's chunk are reused before it runs). A
 * worker does the job's DST operations, which are this file's alone (one
 * function per op, in treework.c, every one through fsio); the coordinator
 * gets every job back, in the order it added them, through the done
 * callback, and records the result (events, counts, the manifest: written
 * by the coordinator thread only).
 *
 * Order on DST: a directory job (TREE_DEL_DIR, TREE_APPLY_DIR) runs only
 * once every directory job added before it for a path below it has
 * finished. Rows come children first (the walks are in id order,
 * descending), so a directory is removed after what was in it, and its
 * metadata is applied after everything below it was made, deleted and
 * given its own metadata: nothing changes its mtime after. Phases (temps,
 * file deletions, directory deletions, metadata) are kept apart by
 * ferry_treework_drain.
 *
 * Calling sequence (the coordinator thread):
 *   ferry_workers_idle(pool);            the copy is over
 *   ferry_treework_new(&cfg, pool, done, ctx, &tw);
 *   for each row: ferry_treework_add_file(tw, op, skip, batch, item)
 *             or  ferry_treework_add_dir(tw, op, skip, dir_row);
 *   ferry_treework_drain(tw);            between phases, and at the end
 *   ferry_treework_free(tw);
 * The jobs run on the calling thread while DST answers fast; once they
 * take long on average (a round trip per operation), the pool's threads
 * (the copy's workers, idle) take them. Without a pool of two or more,
 * they all run on the calling thread. In test builds FERRY_TREE_POOL=1
 * hands every job to the pool.
 */
#ifndef FERRY_TREEWORK_H
#define FERRY_TREEWORK_H

#include "batch.h"
#include "manifest.h"
#include "meta.h"
#include "names.h"
#include "overlap.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

enum ferry_tree_op {
        TREE_TEMP = 1,  /* remove the temp file a pending row may have left */
        TREE_DEL_FILE,  /* --delete a file row ferry put in DST */
        TREE_DEL_DIR,   /* --delete a directory row (rmdir) */
        TREE_APPLY_DIR, /* make a directory, give it its metadata */
};

struct ferry_tree_cfg {
        int srcfd, dstfd;            /* borrowed */
        struct ferry_names *names;   /* borrowed; NULL: any name */
        const struct ferry_own *own; /* borrowed; may be NULL */
        struct ferry_meta_cfg meta;  /* what apply_dir gives a directory */
        bool fsync_dirs;             /* --durability=file */
        /* a shared job's, where a syncfs does not cover directories: the
         * directory a deletion changed is fsynced by it (sync_rc), as its
         * outcome commits before any metadata pass visits it */
        bool fsync_deletes;
        /* a shared job's fence (copy.h; NULL: none): past it nothing is
         * deleted (ECANCELED, DD_ERROR), the claim may be another's */
        const _Atomic int64_t *fence;
};

/* What deleting the copy of a removed file found in DST (TREE_DEL_FILE). */
enum ferry_dst_delete {
        DD_DELETED, /* the copy is gone now */
        DD_GONE,    /* nothing there, or a directory: the row is forgotten */
        DD_OWN,     /* ferry's manifest or lock: kept, the row forgotten */
        DD_CHANGED, /* not what ferry put there (rule 9): kept, row forgotten */
        DD_ERROR,   /* rc says why: the row stays */
};

struct ferry_tree_job {
        enum ferry_tree_op op;
        bool skip; /* no DST work: the row is only recorded */
        /* the row, the job's own copies */
        struct ferry_item it;     /* file jobs (offsets not valid) */
        struct ferry_dir_row row; /* directory jobs; row.path is dir */
        char *dir;  /* a file's directory ("" for SRC's root), or the
                       directory row's path */
        char *name; /* a file's name; NULL for directory jobs */
        /* results, for the done callback */
        int rc; /* errno of the DST operation that failed, or 0 */
        enum ferry_dst_delete found; /* TREE_DEL_FILE */
        enum ferry_step step;        /* TREE_APPLY_DIR: the step that failed */
        uint32_t applied; /* TREE_APPLY_DIR: the MF_AP_* bits applied */
        bool has_xdigest; /* TREE_APPLY_DIR: xdigest is SRC's (xattr.h) */
        uint64_t xdigest;
        int sync_rc;   /* the fsync of fsync_dirs, fsync_deletes */
        char why[384]; /* TREE_APPLY_DIR: a refused or colliding name */
        /* treework's own */
        const struct ferry_tree_cfg *cfg;
        const atomic_bool *cancel; /* set: the worker skips the job */
        int state;
        unsigned blockers;
        size_t len;
};

/* Gets every job back, in order, on the coordinator's thread; false stops
 * the tree work: no job is handed out or reported after that one. */
typedef bool (*ferry_tree_done_fn)(void *ctx, const struct ferry_tree_job *t);

struct ferry_treework;
struct ferry_workers;

/* cfg is copied; pool (idle, see workers.h) is borrowed, may be NULL.
 * ENOMEM or 0. */
int ferry_treework_new(const struct ferry_tree_cfg *cfg,
                       struct ferry_workers *pool, ferry_tree_done_fn done,
                       void *ctx, struct ferry_treework **out);
/* One job for file row it of batch b (TREE_TEMP, TREE_DEL_FILE): the row
 * and its strings are copied. May wait for earlier jobs and call done for
 * them. ENOMEM or 0. */
int ferry_treework_add_file(struct ferry_treework *tw, enum ferry_tree_op op,
                            bool skip, const struct ferry_batch *b,
                            const struct ferry_item *it);
/* The same for directory row d (TREE_DEL_DIR, TREE_APPLY_DIR), copied with
 * its path: the walk's row may be gone once this returns. */
int ferry_treework_add_dir(struct ferry_treework *tw, enum ferry_tree_op op,
                           bool skip, const struct ferry_dir_row *d);
/* Waits for every job added and calls done for each. */
void ferry_treework_drain(struct ferry_treework *tw);
/* Jobs added whose done was not called yet. */
size_t ferry_treework_pending(const struct ferry_treework *tw);
/* Drains, gives the pool's threads back (ferry_workers_end_tree), frees.
 * NULL is fine. */
void ferry_treework_free(struct ferry_treework *tw);

/* A worker's part: the DST operations of job t (not skip), unless the
 * tree work was stopped meanwhile. */
void ferry_treework_run(struct ferry_tree_job *t);

/* The probe's verdict after probed jobs run on the calling thread took
 * probe_ns in all: slow (the pool takes over, at once once their time
 * passes the probe's budget), fast (all of the probe's jobs ran within
 * it: the calling thread goes on, and probes again), or going on. */
enum ferry_tree_probe { PROBE_GOING, PROBE_FAST, PROBE_SLOW };
enum ferry_tree_probe ferry_treework_probe(long long probe_ns, unsigned probed);

#endif
