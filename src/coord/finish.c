/*
 * coord/finish.c - end-of-run work on DST's tree, after the copy.
 *
 * Owns, in this order: temp files of rows the scan no longer sees
 * (remove_temp), --delete (delete_file, deepest directories last with
 * delete_dir; guard.c says whether it may), directory metadata applied
 * deepest first (apply_dir), and the final syncfs or directory fsyncs that
 * make all of it durable, or else forgotten (rolled back) so the next run
 * does it again. Each of those decides what a row needs (protected paths,
 * other spellings, --max-delete) and hands the row's DST work to the tree
 * work (treework.h: the copy's workers, idle, do it once DST is slow);
 * every job comes back in order to tree_done, which records its outcome
 * (deleted_file, deleted_dir, applied_dir: events, counts, the manifest;
 * a directory that is there but whose metadata DST refused is a metadata
 * shortfall, dir_shortfall, not a failed directory).
 * each_row runs a function over a pass's file rows, each_dir over a set of
 * directory rows.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copy.h"
#include "internal.h"

#include "failure.h"
#include "fsio.h"
#include "treework.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool protected_path(struct coord *c, const char *dir, const char *name,
                    bool is_dir)
{
        if (!c->cfg->select)
                return false;
        size_t len;
        const char *path = join_path(c, dir, name, &len);
        /* the selection leaves it out, or a directory above it */
        return !path || ferry_select_protects(c->cfg->select, path, is_dir);
}

/* --durability=file, at the end of a run: a directory changed there is
 * made durable by its own fsync (that mode never calls syncfs); the first
 * error is kept for finish_tree. */
static void note_tree_sync(struct coord *c, int rc)
{
        if (rc && !c->fin.tree_sync_err)
                c->fin.tree_sync_err = rc;
}

/* --max-delete: files_deleted counts what is deleted, so the deletions
 * under way are recorded first once they could reach the limit. */
static void settle_deletions(struct coord *c)
{
        if (c->opt->max_delete >= 0 &&
            c->sum->files_deleted + ferry_treework_pending(c->fin.tree) >=
                    (uint64_t)c->opt->max_delete)
                ferry_treework_drain(c->fin.tree);
}

static void no_memory(struct coord *c, int rc)
{
        if (rc)
                set_error(c, FERRY_EINTERNAL, "out of memory");
}

static void delete_file(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        settle_deletions(c);
        if (delete_held(c, dir, name, false))
                return; /* --max-delete: keep the row */
        /* skip: no DST work, the row is forgotten */
        bool skip = protected_path(c, dir, name, false) ||
                    other_spelling(c, dir, name);
        no_memory(c, ferry_treework_add_file(c->fin.tree, TREE_DEL_FILE, skip,
                                             b, it));
}

/* delete_file's row back from DST (treework.c's delete_file). */
static void deleted_file(struct coord *c, const struct ferry_tree_job *t)
{
        const char *dir = t->dir, *name = t->name;
        bool deleted = false;
        char why[256];
        switch (t->skip ? DD_GONE : t->found) {
        case DD_DELETED:
                c->sum->files_deleted++;
                emit(c, FERRY_EV_DELETED, dir, name, NULL);
                deleted = true;
                break;
        case DD_GONE: break;
        case DD_OWN:
                emit(c, FERRY_EV_WARNING, dir, name,
                     "is ferry's manifest or lock: not deleted");
                break;
        case DD_CHANGED:
                emit(c, FERRY_EV_WARNING, dir, name,
                     t->it.dst.type ? "not deleted: it was changed "
                                      "since ferry copied it"
                                    : "not deleted: ferry did not "
                                      "write it");
                break;
        case DD_ERROR:
                if (stop_for_dst(c, t->rc))
                        return; /* DST failed: keep the row */
                snprintf(why, sizeof(why), "cannot delete: %s",
                         strerror(t->rc));
                emit(c, FERRY_EV_WARNING, dir, name, why);
                return; /* keep the row: try again next time */
        }
        if (ferry_manifest_forget_file(c->m, &t->it, deleted))
                manifest_error(c);
}

/* --durability=file: fsyncs DST's directory path, if it opens (0 when it
 * does not: nothing to make durable through it). */
static int fsync_dst_dir(int dstfd, const char *path)
{
        int dfd = -1, rc = 0;
        if (!ferry_fsio_open_dir(dstfd, path, &dfd))
                rc = ferry_fsio_fsync(dfd);
        ferry_fsio_close(&dfd);
        return rc;
}

static void delete_dir(struct coord *c, const struct ferry_dir_row *d,
                       void *arg)
{
        (void)arg;
        settle_deletions(c);
        if (delete_held(c, "", d->path, true))
                return; /* --max-delete: keep the row */
        bool skip = protected_path(c, "", d->path, true) ||
                    other_spelling(c, "", d->path);
        no_memory(c,
                  ferry_treework_add_dir(c->fin.tree, TREE_DEL_DIR, skip, d));
}

/* delete_dir's row back from DST (treework.c's delete_dir). */
static void deleted_dir(struct coord *c, const struct ferry_tree_job *t)
{
        const char *path = t->dir;
        enum ferry_dir_outcome o = DIR_FORGOTTEN;
        int rc = t->rc;
        if (t->skip) {
                /* protected or another spelling: forgotten */
        } else if (!rc) {
                c->sum->files_deleted++;
                emit(c, FERRY_EV_DELETED, "", path, NULL);
                o = DIR_DELETED;
        } else if (rc != ENOENT && stop_for_dst(c, rc)) {
                return; /* DST failed: keep the row */
        } else if (rc != ENOENT) {
                char why[256];
                snprintf(why, sizeof(why), "directory not deleted: %s",
                         strerror(rc));
                emit(c, FERRY_EV_WARNING, "", path, why);
                /* --durability=file: files deleted in it are made durable
                 * here, as no apply_dir will visit it */
                if (c->opt->durability == FERRY_DURABLE_FILE)
                        note_tree_sync(c, fsync_dst_dir(c->cfg->dstfd, path));
        }
        if (ferry_manifest_dir_outcome(c->m, &t->row, o, NULL, NULL))
                manifest_error(c);
}

/* Runs fn over every file row of pass p, a chunk at a time. */
void each_row(struct coord *c, enum ferry_pass p, row_fn fn)
{
        struct ferry_handout h; /* the copy's hand-out is done with */
        ferry_manifest_handout_start(&h, p, c->gen);
        while (!c->stop_code) {
                struct ferry_batch *b = ferry_batch_new(0, 256);
                if (!b) {
                        set_error(c, FERRY_EINTERNAL, "out of memory");
                        return;
                }
                if (ferry_manifest_handout(c->m, &h, b, 256, UINT64_MAX))
                        manifest_error(c);
                size_t n = b->n;
                for (size_t i = 0; i < n && !c->stop_code; i++)
                        fn(c, b, &b->items[i]);
                ferry_batch_free(b);
                if (!n)
                        return;
        }
}

/* Runs fn over every directory row of set, deepest first. */
void each_dir(struct coord *c, enum ferry_dir_set set, dir_fn fn, void *arg)
{
        struct ferry_dir_walk *w = NULL;
        if (ferry_manifest_dir_walk(c->m, set, c->gen, &w)) {
                manifest_error(c);
                return;
        }
        while (!c->stop_code) {
                const struct ferry_dir_row *rows;
                size_t n = 0;
                if (ferry_manifest_dir_walk_next(c->m, w, &rows, &n))
                        manifest_error(c);
                for (size_t i = 0; i < n && !c->stop_code; i++)
                        fn(c, &rows[i], arg);
                if (!n)
                        break;
        }
        ferry_manifest_dir_walk_end(w);
}

static void apply_dir(struct coord *c, const struct ferry_dir_row *d, void *arg)
{
        (void)arg;
        no_memory(c, ferry_treework_add_dir(c->fin.tree, TREE_APPLY_DIR, false,
                                            d));
}

/* The steps of a directory's metadata once it is there in DST. */
static bool dir_meta_step(enum ferry_step s)
{
        return s == FERRY_STEP_CHOWN || s == FERRY_STEP_CHMOD ||
               s == FERRY_STEP_UTIMES || s == FERRY_STEP_XATTR ||
               s == FERRY_STEP_ACL;
}

/* A directory that is there in DST but whose metadata DST refused: a
 * metadata shortfall, as a file's (metafail.c), not a failed directory;
 * its row stays to apply, so the next run applies it again. */
static bool dir_shortfall(struct coord *c, const struct ferry_tree_job *t)
{
        if (!dir_meta_step(t->step) ||
            !ferry_copy_meta_shortfall(c->cfg->dstfd, t->rc))
                return false;
        struct ferry_failure f =
                ferry_failure_of(FERRY_SIDE_DST, t->step, t->rc);
        /* DST's root as status names it: "." */
        meta_shortfall(c, "", t->row.path[0] ? t->row.path : ".", true, &f);
        struct ferry_dir_row row = t->row;
        row.applied = t->applied;
        if (ferry_manifest_dir_outcome(c->m, &row, DIR_META_FAILED, &f, NULL))
                manifest_error(c);
        return true;
}

/* apply_dir's row back from DST (treework.c's apply_dir). */
static void applied_dir(struct coord *c, const struct ferry_tree_job *t)
{
        const struct ferry_dir_row *it = &t->row;
        char why[sizeof(t->why)];
        snprintf(why, sizeof(why), "%s", t->why);
        note_tree_sync(c, t->sync_rc);
        if (t->rc && !why[0] && stop_for_dst(c, t->rc))
                return; /* nobody's failure: the row stays pending */
        if (t->rc && !why[0] && dir_shortfall(c, t))
                return;
        if (t->rc) {
                /* a refused or colliding name says why itself */
                struct ferry_failure f =
                        why[0] ? ferry_failure_of(FERRY_SIDE_DST,
                                                  FERRY_STEP_NAME, 0)
                               : ferry_failure_of(FERRY_SIDE_DST, t->step,
                                                  t->rc);
                if (!why[0])
                        ferry_failure_message(&f, true, why, sizeof(why));
                c->sum->files_failed++;
                emit_failure(c, FERRY_EV_FAILED, "", it->path, why, &f);
                if (ferry_manifest_dir_outcome(c->m, it, DIR_FAILED, &f, why))
                        manifest_error(c);
                return;
        }
        /* what was applied, for the next scan (--atimes: as files) */
        struct ferry_dir_row row = *it;
        row.applied = t->applied;
        row.has_xdigest = t->has_xdigest;
        row.xdigest = t->xdigest;
        if (c->opt->atimes && (t->applied & MF_AP_TIMES))
                row.applied |= MF_AP_ATIMES;
        if (ferry_manifest_dir_outcome(c->m, &row, DIR_APPLIED, NULL, NULL))
                manifest_error(c);
}

/* A pending row that the scan no longer sees may have left a temp file
 * (treework.c's remove_temp), and a big file's chunks in it: they go
 * with it. The temp files of rows still to copy stay: a next run resumes
 * them (chunks.h). */
static void remove_temp(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        if (ferry_manifest_temp_removed(c->m, it))
                manifest_error(c);
        no_memory(c, ferry_treework_add_file(c->fin.tree, TREE_TEMP, false, b,
                                             it));
}

/* Every tree job back, in the order added: its outcome recorded. False
 * stops the tree work (nothing is recorded once the run stops). */
static bool tree_done(void *ctx, const struct ferry_tree_job *t)
{
        struct coord *c = ctx;
        c->fin.tree_jobs++;
        if (c->stop_code)
                return false;
        if (t->op == TREE_DEL_FILE)
                deleted_file(c, t);
        else if (t->op == TREE_DEL_DIR)
                deleted_dir(c, t);
        else if (t->op == TREE_APPLY_DIR)
                applied_dir(c, t);
        return !c->stop_code;
}

/* One phase of the tree work: fn over every file row of pass p, or over
 * every directory row of set, then every job of it back. */
static void tree_rows(struct coord *c, enum ferry_pass p, row_fn fn)
{
        each_row(c, p, fn);
        ferry_treework_drain(c->fin.tree);
}

static void tree_dirs(struct coord *c, enum ferry_dir_set set, dir_fn fn)
{
        each_dir(c, set, fn, NULL);
        ferry_treework_drain(c->fin.tree);
}

/* The DST work of finish_tree goes to the copy's workers, idle now
 * (stop_threads), whose threads end in coord_release (treework.h). */
static bool start_tree(struct coord *c)
{
        struct ferry_tree_cfg tc = {
                .srcfd = c->cfg->srcfd,
                .dstfd = c->cfg->dstfd,
                .names = c->cfg->names,
                .own = c->cfg->own,
                .meta = coord_meta_cfg(c),
                .fsync_dirs = c->opt->durability == FERRY_DURABLE_FILE,
        };
        if (!ferry_treework_new(&tc, c->workers, tree_done, c, &c->fin.tree))
                return true;
        set_error(c, FERRY_EINTERNAL, "out of memory");
        return false;
}

void finish_tree(struct coord *c)
{
        if (!start_tree(c))
                return;
        tree_rows(c, PASS_STALE_TEMPS, remove_temp);
        bool deleted = false;
        if (c->opt->delete_removed) {
                if (c->sum->scan_errors)
                        emit(c, FERRY_EV_WARNING, "", "",
                             "the scan had errors: nothing deleted");
                else if (check_delete(c)) {
                        tree_rows(c, PASS_REMOVED, delete_file);
                        tree_dirs(c, DIRS_REMOVED, delete_dir);
                        report_held(c);
                        deleted = true;
                } else if (c->fin.refused) {
                        keep_source_rows(c);
                }
        }
        record_source(c, deleted);
        tree_dirs(c, DIRS_TO_APPLY, apply_dir);
        ferry_treework_free(c->fin.tree); /* the workers back */
        c->fin.tree = NULL;
        /* Deletions touch their directory, so apply_dir met every
         * directory changed above: with --durability=file it fsynced each
         * (no syncfs, which that mode is for file systems that lack). */
        enum ferry_durability dur = c->opt->durability;
        bool covered;
        /* a run that did nothing to DST's tree here owes it no syncfs */
        int rc = c->stop_code || !c->fin.tree_jobs ? 0
                 : dur == FERRY_DURABLE_NONE       ? 0
                 : dur == FERRY_DURABLE_FILE
                         ? c->fin.tree_sync_err
                         : ferry_fsio_sync_device(c->cfg->dstfd, &covered);
        /* the directories may lie on file systems mounted below DST too */
        if (!rc && !c->stop_code && c->fin.tree_jobs &&
            dur == FERRY_DURABLE_BATCH)
                rc = sync_mounts_below(c->cfg->dstfd);
        if (!rc && !c->stop_code)
                return;
        /* Nothing above is durable: forget it (the deletions and the
         * directory marks), so that the next run does it again. Found by
         * t23: a power cut lost empty directories marked created. A full
         * or failed DST stops as in a barrier (t21 long); one that
         * failed above (apply_dir) leaves nothing to trust either. */
        if (rc && !stop_for_dst(c, rc))
                set_error(c, FERRY_EPARTIAL,
                          dur == FERRY_DURABLE_FILE
                                  ? "fsync of a destination directory failed"
                                  : "syncfs of the destination failed");
        if (ferry_manifest_rollback(c->m) || ferry_manifest_begin(c->m))
                manifest_error(c);
}
