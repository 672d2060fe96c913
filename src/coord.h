/*
 * coord.h - the coordinator thread: the only writer of the manifest.
 *
 * It inserts what the scanners find, hands batches of pending rows to the
 * workers, collects their results, runs the durability barrier (in a helper
 * thread, so hand-outs go on meanwhile) and only then marks rows done in one
 * COMMIT per batch of results. After the copy it removes what SRC lost
 * (--delete) and applies directory metadata, deepest first. Its files, one
 * per role, are listed in coord/internal.h. (The documents call the manifest
 * the journal of a job; the thread that keeps it is the coordinator.)
 *
 * Calling sequence (from ferry_job_run / ferry_job_verify):
 *   struct ferry_coord_cfg cfg = {...};
 *   rc = ferry_coord_copy(&cfg, &summary, &err);
 *   rc = ferry_coord_verify(&cfg, mode, &summary, &err);
 */
#ifndef FERRY_COORD_H
#define FERRY_COORD_H

#include "ferry.h"
#include "manifest.h"
#include "names.h"
#include "overlap.h"
#include "select.h"

#include <stdatomic.h>

/* Descriptors a run holds besides its workers and scanners, and besides
 * what is open when the job starts (the manifest, its -wal and -shm, the
 * lock, SRC and DST): the coordinator thread's own directory opens (DST
 * directories made with ferry_copy_make_dst_dir, up to 3 at once), the
 * barrier thread's one directory at a time (sync_dirs), and the temp files
 * SQLite opens for statement journals and sorts (temp_store = FILE). */
#define FERRY_COORD_FDS 8

struct ferry_coord_cfg {
        struct ferry_manifest *m;          /* borrowed, writable */
        int srcfd, dstfd;                  /* borrowed; dstfd -1 in dry run */
        const struct ferry_options *opt;   /* borrowed */
        const struct ferry_select *select; /* borrowed; NULL: everything */
        atomic_bool *stop;                 /* borrowed: set to stop */
        const char *command;               /* for the runs table */
        struct ferry_names *names;   /* borrowed, may be NULL: DST's rules */
        const struct ferry_own *own; /* borrowed, may be NULL: ferry's own */
        /* the most copies in flight (-j auto's cap, or how far `ferry set
         * -j` may raise -j N) that fit the descriptors; 0: -j N, or
         * FERRY_TUNE_MAX for -j auto */
        unsigned jobs_cap;
        /* borrowed: its "<manifest>.control" is the run's live control
         * (coord/control.c); NULL: none */
        const char *manifest_path;
};

int ferry_coord_copy(const struct ferry_coord_cfg *cfg,
                     struct ferry_summary *sum, struct ferry_error *err);
int ferry_coord_verify(const struct ferry_coord_cfg *cfg,
                       enum ferry_verify_mode mode, struct ferry_summary *sum,
                       struct ferry_error *err);

#endif
