/*
 * coord/guard.c - --delete's guard and --max-delete.
 *
 * Owns the decision whether a --delete run may delete at all: not when SRC
 * looks replaced or emptied (check_delete; then the rows found gone get
 * their state back, keep_source_rows), when SRC's recorded identity is
 * renewed (record_source), --max-delete's count of entries kept
 * (delete_held, report_held), and which removed rows are protected from
 * deletion because SRC holds them under another spelling (other_spelling).
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "fsio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More entries than this gone at once, and more than stay, look like a
 * SRC replaced or emptied, not like a user's clean-up. */
#define DELETE_HANDFUL 100

/* SRC holds another spelling of dir/name (names_fold.h): not deleted. */
bool other_spelling(struct coord *c, const char *dir, const char *name)
{
        return ferry_fold_other_spelling(&c->fin.fold, c->cfg->srcfd,
                                         c->cfg->names, dir, name);
}

static void count_deletable(struct coord *c, const struct ferry_batch *b,
                            const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        if (!protected_path(c, dir, name, false) &&
            !other_spelling(c, dir, name))
                c->fin.to_delete++;
}

/* Says in why how SRC looks replaced or emptied; false when it does not. */
static bool source_suspect(struct coord *c, char *why, size_t size)
{
        unsigned long long n = c->fin.to_delete;
        const char *src = c->opt->src;
        if (!c->sum->files_seen) {
                snprintf(why, size,
                         "the source '%s' %s but the manifest records %llu "
                         "files copied from it (a mount that failed?)",
                         src, c->in.dirs_seen ? "holds no files" : "is empty",
                         n);
                return true;
        }
        if (c->in.src_was[0]) {
                snprintf(why, size,
                         "the source '%s' is another directory than the one "
                         "copied (device:inode %s, was %s: another file "
                         "system mounted there, or a directory made anew?) "
                         "and %llu files copied before are not in it",
                         src, c->in.src_id, c->in.src_was, n);
                return true;
        }
        uint64_t done = 0;
        if (n <= DELETE_HANDFUL)
                return false;
        if (ferry_manifest_count(c->m, COUNT_DONE, 0, &done, NULL)) {
                manifest_error(c);
                return false;
        }
        /* a run weighs this after its copies (finish_tree): a dry run
         * counts the rows they would make done */
        if (c->opt->dry_run)
                done += c->sum->files_copied + c->sum->files_linked +
                        c->sum->files_adopted + c->sum->meta_applied;
        if (n <= done)
                return false;
        snprintf(why, size,
                 "%llu of the %llu files copied from the source '%s' are "
                 "gone from it (a source replaced, or a mount below it that "
                 "failed?)",
                 n, n + (unsigned long long)done, src);
        return true;
}

/*
 * Before the first deletion of a --delete run: may it delete? Not when SRC
 * looks replaced or emptied while rows would be deleted: it holds nothing,
 * or its root is another directory than the one recorded, or most of what
 * ferry copied, and more than a handful, is gone at once. Then nothing is
 * deleted and the run says why and how to insist (--delete-anyway).
 */
bool check_delete(struct coord *c)
{
        char why[768];
        c->fin.to_delete = 0;
        each_row(c, PASS_REMOVED, count_deletable);
        if (c->stop_code || !c->fin.to_delete || c->opt->delete_anyway ||
            !source_suspect(c, why, sizeof(why)))
                return !c->stop_code;
        c->fin.refused = true;
        c->fin.code = FERRY_EDELETE;
        if (!c->err->msg[0])
                snprintf(c->err->msg, sizeof(c->err->msg),
                         "--delete refused: %s; %s; use --delete-anyway to "
                         "delete them",
                         why,
                         c->opt->dry_run ? "nothing would be deleted (listed "
                                           "as not deleting)"
                                         : "nothing deleted");
        return false;
}

/* --delete refused: the rows the scan found gone get their state back, so
 * that SRC, back as it was, is neither deleted nor copied again; and SRC's
 * root, perhaps a mount point, does not give its metadata to DST's. */
void keep_source_rows(struct coord *c)
{
        if (ferry_manifest_delete_refused(c->m, c->gen))
                manifest_error(c);
        commit(c); /* whatever becomes of DST's barrier below */
}

/* SRC's identity becomes the recorded one once a run finds the same tree
 * there: the scan (complete) found nothing gone, or --delete went ahead. */
void record_source(struct coord *c, bool deleted)
{
        uint64_t gone = 0;
        if (!c->in.src_was[0] || c->stop_code || c->sum->scan_errors ||
            c->fin.refused)
                return;
        if (!deleted &&
            ferry_manifest_count(c->m, COUNT_GONE, c->gen, &gone, NULL)) {
                manifest_error(c);
                return;
        }
        if (!gone &&
            ferry_manifest_set_note(c->m, "src_identity", c->in.src_id))
                manifest_error(c);
}

/* Is the entry dir/name still in DST? (An error other than ENOENT: yes.) */
static bool dst_has(struct coord *c, const char *dir, const char *name)
{
        int dfd = -1, rc = ferry_fsio_open_dir(c->cfg->dstfd, dir, &dfd);
        struct ferry_stat st;
        if (!rc)
                rc = ferry_fsio_statat(dfd, name, &st);
        ferry_fsio_close(&dfd);
        return rc != ENOENT && rc != ENOTDIR;
}

/* --max-delete N, as rsync's: once N entries are deleted, every other one
 * that --delete would delete stays, listed under -v, and its row stays for
 * a later run. True when dir/name is kept so. */
bool delete_held(struct coord *c, const char *dir, const char *name,
                 bool is_dir)
{
        if (c->opt->max_delete < 0 ||
            c->sum->files_deleted < (uint64_t)c->opt->max_delete ||
            protected_path(c, dir, name, is_dir) ||
            other_spelling(c, dir, name) ||
            (c->cfg->dstfd >= 0 && !dst_has(c, dir, name)))
                return false;
        char why[64];
        snprintf(why, sizeof(why), "--max-delete %lld reached",
                 (long long)c->opt->max_delete);
        c->fin.held++;
        emit(c, FERRY_EV_WOULD_DELETE, dir, name, why);
        return true;
}

/* The one message of --max-delete, once the deletions are done. */
void report_held(struct coord *c)
{
        if (!c->fin.held)
                return;
        c->fin.code = FERRY_EDELETE;
        if (!c->err->msg[0])
                snprintf(c->err->msg, sizeof(c->err->msg),
                         "--max-delete %lld reached: %llu entries %s, %llu "
                         "kept (%s); the next run with --delete goes on",
                         (long long)c->opt->max_delete,
                         (unsigned long long)c->sum->files_deleted,
                         c->opt->dry_run ? "would be deleted" : "deleted",
                         (unsigned long long)c->fin.held,
                         c->opt->dry_run ? "listed as not deleting"
                                         : "-v lists them");
}
