/*
 * manifest_pg/pg_dry.h - what a dry run of a shared job asks of the
 * manifest (src/shared/dryrun.c, src/shared/dry_delete.c), beside pg.h's
 * calls: it reads the job and writes none of it.
 */
#ifndef FERRY_MANIFEST_PG_DRY_H
#define FERRY_MANIFEST_PG_DRY_H

#include "manifest_pg/pg.h"

/* A dry run's ferry_pg_job_new_src, after ferry_pg_job_find refused this
 * SRC: changes nothing; when a run would take src_fp as the job's SRC,
 * finds the job (as ferry_pg_job_find); else FERRY_EPATH, saying why as
 * the run would. */
int ferry_pg_job_find_new_src(struct ferry_pg *pg, const char *name,
                              const char *src_fp, const char *dst_fp,
                              const char *const *names, size_t n);

/* A dry run's verdict on a listed file (ferry_pg_dry_files). */
struct ferry_pg_dry {
        bool copy;     /* a run would copy it (new, changed, not done) */
        bool unmarked; /* a claim of its row ended without a done outcome */
        bool pending;  /* its row is pending, or failed (a join makes
                        * those pending again) */
        int dst_type;  /* its DST record (rule 9), 0: none */
        uint64_t dst_size;
        int64_t dst_mtime_ns;
        int64_t id; /* its row, 0: none */
};
/* Of the n files listed in directory path of the found job: out[i] for
 * files[i] (their dir is not read), one statement per FERRY_PG_BATCH_MAX.
 * Writes nothing. */
int ferry_pg_dry_files(struct ferry_pg *pg, const char *path, size_t path_len,
                       const struct ferry_pg_file *files, size_t n,
                       struct ferry_pg_dry *out);

/* A dry run of a job whose run is under way: as ferry_pg_done_files, its
 * pending and failed file rows (with nlink and unmarked as a claim would find
 * them, no hash), and its directories still to list, and those that
 * failed (a join lists them again), as rows (path, no name). */
int ferry_pg_pending_files(struct ferry_pg *pg, int64_t after, size_t max,
                           struct ferry_pg_page *page);
int ferry_pg_unlisted_dirs(struct ferry_pg *pg, int64_t after, size_t max,
                           struct ferry_pg_page *page);

/* The found job as a run's join would find it: *over, nothing left to do
 * (the run begins a new scan: rerun.c's test, its root listed once and
 * JOB_OVER); and what its run under way was
 * given by its first host (a join is refused when this host's differ):
 * its selection (*selection NULL when none is recorded for its gen yet,
 * else malloc'd) and its --max-delete (*has_limit false when no host with
 * --delete joined it yet; -1: none). */
int ferry_pg_dry_job_state(struct ferry_pg *pg, bool *over, char **selection,
                           bool *has_limit, int64_t *limit);

/* -n --delete (src/shared/dryrun.c): which rows a run would mark removed
 * is known once its whole scan is over, so a dry run keeps the ids of the
 * rows its listing finds in SRC in a temporary table of its own session
 * (nothing of the job is written), and then asks for the rest. */
int ferry_pg_dry_seen_begin(struct ferry_pg *pg);
/* The n rows ids found in SRC by the dry run's listing. */
int ferry_pg_dry_seen(struct ferry_pg *pg, const int64_t *ids, size_t n);
/* Of what the guard of a run's --delete would weigh (struct
 * ferry_pg_delete_check): seen, of the rows (the dry run adds its own
 * listing's), and the files done now; the dry run counts to_delete itself
 * (ferry_pg_dry_removed) and weighs complete by its own listing. over: the
 * job's run is over (a run begins a new scan). */
int ferry_pg_dry_removed_check(struct ferry_pg *pg, bool over,
                               struct ferry_pg_delete_check *out);
/* A page (as ferry_pg_done_files's, no hash, with each row's state) of
 * the file rows a run would mark removed (before its selection keeps
 * some) or its --delete claim. FERRY_EMANIFEST when the connection was made
 * anew since ferry_pg_dry_seen_begin (the table went with it). */
int ferry_pg_dry_removed(struct ferry_pg *pg, bool over, int64_t after,
                         size_t max, struct ferry_pg_page *page);

#endif
