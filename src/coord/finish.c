/*
 * coord/finish.c - end-of-run work on DST's tree, after the copy.
 *
 * Owns, in this order: temp files of rows the scan no longer sees
 * (remove_temp), --delete (delete_file, deepest directories last with
 * delete_dir; guard.c says whether it may), directory metadata applied
 * deepest first (apply_dir), and the final syncfs or directory fsyncs that
 * make all of it durable, or else forgotten (rolled back) so the next run
 * does it again. Each row's work on DST is a function of its own
 * (delete_file_dst, delete_dir_dst, apply_dir_dst, remove_temp) that
 * touches neither the coordinator nor the manifest, apart from the one
 * that records its outcome (delete_file, delete_dir, apply_dir): the DST
 * part could run on a worker. each_row runs one over a pass's file rows,
 * each_dir over a set of directory rows.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "copy.h"
#include "failure.h"
#include "fsio.h"
#include "owner.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool protected_path(struct coord *c, const char *dir, const char *name,
                    bool is_dir)
{
        if (!c->cfg->excludes)
                return false;
        size_t len;
        const char *path = join_path(c, dir, name, &len);
        if (!path)
                return true;
        /* an excluded ancestor protects everything below it */
        char *copy = strdup(path);
        if (!copy)
                return true;
        bool hit = false;
        for (char *slash = copy; !hit;) {
                char *next = strchr(slash, '/');
                if (next)
                        *next = '\0';
                const char *base = strrchr(copy, '/');
                base = base ? base + 1 : copy;
                hit = ferry_patterns_match(c->cfg->excludes, copy, base,
                                           next ? true : is_dir);
                if (!next)
                        break;
                *next = '/';
                slash = next + 1;
        }
        free(copy);
        return hit;
}

/* --durability=file, at the end of a run: a directory changed there is
 * made durable by its own fsync (that mode never calls syncfs); the first
 * error is kept for finish_tree. */
static void note_tree_sync(struct coord *c, int rc)
{
        if (rc && !c->fin.tree_sync_err)
                c->fin.tree_sync_err = rc;
}

/* What deleting the copy of a removed file found in DST. */
enum dst_delete {
        DD_DELETED, /* the copy is gone now */
        DD_GONE,    /* nothing there, or a directory: the row is forgotten */
        DD_OWN,     /* ferry's manifest or lock: kept, the row forgotten */
        DD_CHANGED, /* not what ferry put there (rule 9): kept, row forgotten */
        DD_ERROR,   /* *err says why: the row stays */
};

/* Deletes the copy of the removed file it, dir/name in DST, when it is
 * what ferry put there (rule 9). Acts on DST only, and touches neither c
 * nor the manifest: delete_file records what it found. */
static enum dst_delete delete_file_dst(int dstfd, const struct ferry_own *own,
                                       const char *dir, const char *name,
                                       const struct ferry_item *it, int *err)
{
        struct ferry_stat st;
        enum dst_delete out = DD_DELETED;
        int dfd = -1, rc = ferry_fsio_open_dir(dstfd, dir, &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, name, &st);
        /* ferry's own file (the manifest kept in DST) is not the copy the
         * row describes; a directory at the name is SRC's new one, or not
         * ferry's to remove */
        if (rc)
                out = DD_ERROR;
        else if (ferry_own_is_file(own, NULL, name, &st))
                out = DD_OWN;
        else if (S_ISDIR(st.mode))
                out = DD_GONE;
        else if (!ferry_copy_matches(&it->dst, &st))
                out = DD_CHANGED;
        else if ((rc = ferry_fsio_unlinkat(dfd, name, 0)))
                out = DD_ERROR;
        ferry_fsio_close(&dfd);
        if (out == DD_ERROR && rc == ENOENT)
                out = DD_GONE;
        *err = rc;
        return out;
}

static void delete_file(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        if (delete_held(c, dir, name, false))
                return; /* --max-delete: keep the row */
        int err = 0;
        bool deleted = false;
        char why[256];
        if (protected_path(c, dir, name, false) || other_spelling(c, dir, name))
                goto forget;
        switch (delete_file_dst(c->cfg->dstfd, c->cfg->own, dir, name, it,
                                &err)) {
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
                     it->dst.type ? "not deleted: it was changed "
                                    "since ferry copied it"
                                  : "not deleted: ferry did not "
                                    "write it");
                break;
        case DD_ERROR:
                if (stop_for_dst(c, err))
                        return; /* DST failed: keep the row */
                snprintf(why, sizeof(why), "cannot delete: %s", strerror(err));
                emit(c, FERRY_EV_WARNING, dir, name, why);
                return; /* keep the row: try again next time */
        }
forget:
        if (ferry_manifest_forget_file(c->m, it, deleted))
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

/* Removes the removed directory path from DST, when it is empty; its
 * error, or 0. Acts on DST only (delete_dir records). */
static int delete_dir_dst(int dstfd, const char *path)
{
        return ferry_fsio_rmdirat(dstfd, path);
}

static void delete_dir(struct coord *c, const struct ferry_dir_row *d)
{
        const char *path = d->path;
        enum ferry_dir_outcome o = DIR_FORGOTTEN;
        if (delete_held(c, "", path, true))
                return; /* --max-delete: keep the row */
        if (!protected_path(c, "", path, true) &&
            !other_spelling(c, "", path)) {
                int rc = delete_dir_dst(c->cfg->dstfd, path);
                if (!rc) {
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
                        /* --durability=file: files deleted in it are made
                         * durable here, as no apply_dir will visit it */
                        if (c->opt->durability == FERRY_DURABLE_FILE)
                                note_tree_sync(
                                        c, fsync_dst_dir(c->cfg->dstfd, path));
                }
        }
        if (ferry_manifest_dir_outcome(c->m, d, o, NULL, NULL))
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
static void each_dir(struct coord *c, enum ferry_dir_set set, dir_fn fn)
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
                        fn(c, &rows[i]);
                if (!n)
                        break;
        }
        ferry_manifest_dir_walk_end(w);
}

/* What apply_dir_dst did to a directory of DST. */
struct dir_outcome {
        int rc;               /* 0, or the error of the step that failed */
        enum ferry_step step; /* that step */
        int sync_err;         /* --durability=file: the directory's fsync */
        char why[384];        /* a refused or colliding name, else "" */
};

/* Makes the directory row it in DST (and its parents), and gives it SRC's
 * owner, mode and times as the options say. Acts on DST only, and touches
 * neither the coordinator nor the manifest: apply_dir records. */
static void apply_dir_dst(const struct ferry_copy_dirs *d,
                          const struct ferry_options *opt, mode_t umask,
                          const struct ferry_dir_row *it, struct dir_outcome *o)
{
        const char *path = it->path;
        int fd = -1;
        o->step = FERRY_STEP_MKDIR;
        o->sync_err = 0;
        o->rc = ferry_copy_make_dst_dir(d, path, &fd, o->why, sizeof(o->why));
        if (!o->rc && opt->owner && geteuid() == 0 &&
            (o->rc = ferry_fsio_fchown(fd, it->uid, it->gid)))
                o->step = FERRY_STEP_CHOWN;
        mode_t mode = opt->perms ? it->mode & 07777 : 0777 & ~umask;
        if (!o->rc && (o->rc = ferry_fsio_fchmod(fd, mode)))
                o->step = FERRY_STEP_CHMOD;
        if (!o->rc && opt->times &&
            (o->rc = ferry_fsio_futimens(fd, it->mtime, it->mtime)))
                o->step = FERRY_STEP_UTIMES;
        /* --durability=file: the directory's entries (made, deleted) and
         * its metadata, made durable here instead of by a syncfs */
        if (fd >= 0 && opt->durability == FERRY_DURABLE_FILE)
                o->sync_err = ferry_fsio_fsync(fd);
        ferry_fsio_close(&fd);
}

static void apply_dir(struct coord *c, const struct ferry_dir_row *it)
{
        const char *path = it->path;
        struct ferry_copy_dirs d = {c->cfg->srcfd, c->cfg->dstfd,
                                    c->cfg->names};
        struct dir_outcome o;
        apply_dir_dst(&d, c->opt, c->umask, it, &o);
        note_tree_sync(c, o.sync_err);
        if (o.rc && !o.why[0] && stop_for_dst(c, o.rc))
                return; /* nobody's failure: the row stays pending */
        if (o.rc) {
                /* a refused or colliding name says why itself */
                struct ferry_failure f =
                        o.why[0] ? ferry_failure_of(FERRY_SIDE_DST,
                                                    FERRY_STEP_NAME, 0)
                                 : ferry_failure_of(FERRY_SIDE_DST, o.step,
                                                    o.rc);
                if (!o.why[0])
                        ferry_failure_message(&f, true, o.why, sizeof(o.why));
                c->sum->files_failed++;
                emit_failure(c, FERRY_EV_FAILED, "", path, o.why, &f);
                if (ferry_manifest_dir_outcome(c->m, it, DIR_FAILED, &f, o.why))
                        manifest_error(c);
                return;
        }
        if (ferry_manifest_dir_outcome(c->m, it, DIR_APPLIED, NULL, NULL))
                manifest_error(c);
}

/* A pending row that the scan no longer sees may have left a temp file. */
static void remove_temp(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it)
{
        char tmp[NAME_MAX + 1];
        int dfd = -1;
        ferry_copy_temp_name(ferry_batch_at(b, it->name_off), it->id, tmp);
        if (!ferry_fsio_open_dir(c->cfg->dstfd, ferry_batch_at(b, it->dir_off),
                                 &dfd))
                ferry_fsio_unlinkat(dfd, tmp, 0);
        ferry_fsio_close(&dfd);
}

void finish_tree(struct coord *c)
{
        each_row(c, PASS_STALE_TEMPS, remove_temp);
        bool deleted = false;
        if (c->opt->delete_removed) {
                if (c->sum->scan_errors)
                        emit(c, FERRY_EV_WARNING, "", "",
                             "the scan had errors: nothing deleted");
                else if (check_delete(c)) {
                        each_row(c, PASS_REMOVED, delete_file);
                        each_dir(c, DIRS_REMOVED, delete_dir);
                        report_held(c);
                        deleted = true;
                } else if (c->fin.refused) {
                        keep_source_rows(c);
                }
        }
        record_source(c, deleted);
        each_dir(c, DIRS_TO_APPLY, apply_dir);
        /* Deletions touch their directory, so apply_dir met every
         * directory changed above: with --durability=file it fsynced each
         * (no syncfs, which that mode is for file systems that lack). */
        enum ferry_durability dur = c->opt->durability;
        int rc = c->stop_code                ? 0
                 : dur == FERRY_DURABLE_NONE ? 0
                 : dur == FERRY_DURABLE_FILE ? c->fin.tree_sync_err
                                             : ferry_fsio_syncfs(c->cfg->dstfd);
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
