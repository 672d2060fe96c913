/*
 * shared/dry_delete.c - what a shared job's run with --delete would delete
 * (ferry -n --delete, internal.h), after the dry run's listing
 * (dryrun.c) has recorded the rows it found in SRC.
 *
 * The run's own rules, applied to what the dry run sees, in the order a
 * run applies them (finish.c, delete.c):
 *  - the rows a run would mark removed are its older rows not seen, less
 *    those the selection leaves out (shared_select_keep: their gen moves
 *    on, they are neither counted nor deleted), and the removed rows not
 *    tried in the run's gen; one pass counts them (each_removed);
 *  - nothing when a directory could not be listed; nothing, and exit 25,
 *    when SRC looks emptied or replaced (shared_delete_suspect, unless
 *    --delete-anyway: each entry is then listed as "--delete refused"),
 *    weighed with what stays done once the run's copies are done too (the
 *    run's guard comes after them: new_done, the listing's copies of rows
 *    not done);
 *  - a second pass lists: rows a run keeps are not listed
 *    (shared_delete_keeps: a path the selection leaves out, another
 *    spelling on a DST that does not tell them apart; the job's mark is
 *    said as a run says it); past --max-delete N, any entry DST holds is
 *    listed as kept (delete.c's held(), before rule 9), and the dry run
 *    exits 25; a DST entry that is not the row's copy any more is said and
 *    kept (rule 9); the rest is listed as deleted.
 * A directory that would be removed is not listed, nor counted against
 * --max-delete (a run counts it: with as many files to delete as the
 * limit, the run may exit 25 where the dry run exits 0); a single host's
 * dry run lists and counts it (coord/dryrun.c). A dry run reads no file:
 * a run's deletions happen at its end, so what DST holds then may differ.
 */
#define _GNU_SOURCE
#include "shared/internal.h"
#include "manifest_pg/pg_dry.h"

#include "copy.h"
#include "fsio.h"
#include "manifest_types.h"
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct dry_del {
        struct shared *s;
        struct shared_keep keep;
        bool listing; /* the second pass (the first counts) */
        bool refused;
        uint64_t held;
        uint64_t to_delete, done_gone; /* the first pass's */
        /* DST's directory of the last row listed (rows come in id order:
         * a directory's together), derr why it is not open */
        char *at;
        int dfd, derr;
};

static void say(struct shared *s, enum ferry_event ev, const char *dir,
                const char *name, const char *what)
{
        shared_event(s, ev, dir, strlen(dir), name, strlen(name), what, NULL);
}

/* DST's entry dir/name into *st: 0 or why not (ENOENT, ENOTDIR: none),
 * the directory opened once for its rows. */
static int dst_stat(struct dry_del *dd, const char *dir, const char *name,
                    struct ferry_stat *st)
{
        if (!dd->at || strcmp(dd->at, dir)) {
                ferry_fsio_close(&dd->dfd);
                free(dd->at);
                if (!(dd->at = strdup(dir)))
                        return ENOMEM;
                dd->derr = ferry_fsio_open_dir(dd->s->dstfd, dir, &dd->dfd);
        }
        return dd->derr ? dd->derr : ferry_fsio_statat(dd->dfd, name, st);
}

/* Whether the run would find its copy at dir/name (true), an entry ferry
 * did not put there or changed since (said, false), or nothing to delete
 * (no entry, a directory: false). */
static bool ours(struct dry_del *dd, const char *dir, const char *name,
                 const struct ferry_pg_row *r)
{
        struct shared *s = dd->s;
        struct ferry_stat st;
        if (dst_stat(dd, dir, name, &st) || S_ISDIR(st.mode))
                return false;
        struct ferry_dst_rec rec = {
                .type = (enum ferry_ftype)r->dst_type,
                .size = r->dst_size,
                .mtime = shared_time(r->dst_mtime_ns),
        };
        if (ferry_copy_matches(&rec, &st))
                return true;
        say(s, FERRY_EV_WARNING, dir, name,
            rec.type ? "not deleted: it was changed since ferry copied it"
                     : "not deleted: ferry did not write it");
        return false;
}

/* Row r, not removed yet, is one the selection leaves out: a run keeps it
 * (shared_select_keep), neither counted nor deleted. */
static bool select_keeps(struct shared *s, const struct ferry_pg_row *r)
{
        return r->state != MF_ST_REMOVED && s->select &&
               ferry_select_keeps(s->select, s->srcfd, r->path, r->path_len,
                                  r->name, r->name_len, r->type, r->size, true);
}

/* Row r as the first pass counts it (the guard's counts). */
static void count(struct dry_del *dd, const struct ferry_pg_row *r)
{
        if (select_keeps(dd->s, r))
                return;
        dd->to_delete++;
        dd->done_gone += r->state == MF_ST_DONE;
}

/* Removed row r as a run's --delete would take it. */
static void would_delete(struct dry_del *dd, const char *dir, const char *name,
                         const struct ferry_pg_row *r)
{
        struct shared *s = dd->s;
        if (!dir[0] && !strcmp(name, SHARED_MARK)) {
                say(s, FERRY_EV_WARNING, dir, name,
                    "is ferry's job mark: not deleted");
                return;
        }
        if (shared_delete_keeps(s, &dd->keep, dir, name, false))
                return;
        if (dd->refused) {
                if (ours(dd, dir, name, r))
                        say(s, FERRY_EV_WOULD_DELETE, dir, name,
                            "--delete refused");
                return;
        }
        /* past the limit, any entry DST holds is kept (delete.c, held) */
        struct ferry_stat st;
        int err = 0;
        if (s->opt->max_delete >= 0 &&
            s->sum->files_deleted >= (uint64_t)s->opt->max_delete &&
            (err = dst_stat(dd, dir, name, &st)) != ENOENT && err != ENOTDIR) {
                char why[64];
                snprintf(why, sizeof(why), "--max-delete %lld reached",
                         (long long)s->opt->max_delete);
                say(s, FERRY_EV_WOULD_DELETE, dir, name, why);
                dd->held++;
                return;
        }
        if (!ours(dd, dir, name, r))
                return;
        s->sum->files_deleted++;
        say(s, FERRY_EV_WOULD_DELETE, dir, name, NULL);
}

/* Each row a run's --delete would claim, in id order (as its claims). */
static int each_removed(struct dry_del *dd, bool over)
{
        struct shared *s = dd->s;
        struct ferry_pg_page page = {0};
        int rc = 0;
        for (int64_t after = 0; !rc && !atomic_load(s->stop);) {
                if ((rc = ferry_pg_dry_removed(s->pg, over, after,
                                               FERRY_PG_BATCH_MAX, &page)))
                        rc = shared_pg_fail(s, rc);
                for (size_t i = 0; !rc && i < page.n; i++) {
                        const struct ferry_pg_row *r = &page.rows[i];
                        if (!dd->listing) {
                                count(dd, r);
                                continue;
                        }
                        /* a NUL in a name: no listing makes one, no name
                         * in DST */
                        if (select_keeps(s, r) ||
                            (r->path && memchr(r->path, '\0', r->path_len)) ||
                            (r->name && memchr(r->name, '\0', r->name_len)))
                                continue;
                        char *dir =
                                strndup(r->path ? r->path : "", r->path_len);
                        char *name =
                                strndup(r->name ? r->name : "", r->name_len);
                        if (dir && name)
                                would_delete(dd, dir, name, r);
                        else
                                rc = shared_fail(s, FERRY_EINTERNAL,
                                                 "out of memory");
                        free(dir);
                        free(name);
                }
                if (rc || !page.n)
                        break;
                after = page.rows[page.n - 1].id;
                ferry_pg_page_release(&page);
        }
        ferry_pg_page_release(&page);
        if (!rc && atomic_load(s->stop))
                rc = shared_fail(s, FERRY_EINTR, "%s", "");
        return rc;
}

int shared_dry_delete(struct shared *s, bool over, uint64_t new_done)
{
        if (s->sum->scan_errors) {
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "--delete: the scan had errors: nothing would "
                             "be deleted",
                             NULL);
                return 0;
        }
        struct ferry_pg_delete_check k;
        int rc = ferry_pg_dry_removed_check(s->pg, over, &k);
        if (rc)
                return shared_pg_fail(s, rc);
        struct dry_del dd = {.s = s, .dfd = -1};
        if ((rc = each_removed(&dd, over)))
                return rc;
        k.seen = k.seen || s->sum->files_seen;
        k.to_delete = dd.to_delete;
        k.done = k.done - (dd.done_gone < k.done ? dd.done_gone : k.done) +
                 new_done;
        char why[700];
        if (k.to_delete && !s->opt->delete_anyway &&
            shared_delete_suspect(s, &k, why, sizeof(why))) {
                dd.refused = s->delete_refused = true;
                if (!s->err->msg[0])
                        snprintf(s->err->msg, sizeof(s->err->msg),
                                 "--delete refused: %s; nothing would be "
                                 "deleted (listed as not deleting); use "
                                 "--delete-anyway to delete them",
                                 why);
        }
        if (shared_keep_init(s, &dd.keep))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        dd.listing = true;
        rc = each_removed(&dd, over);
        shared_keep_release(&dd.keep);
        ferry_fsio_close(&dd.dfd);
        free(dd.at);
        if (rc || !dd.held)
                return rc;
        s->delete_held = true;
        if (!s->err->msg[0])
                snprintf(s->err->msg, sizeof(s->err->msg),
                         "--max-delete %lld reached: %llu entries would be "
                         "deleted, %llu kept (listed as not deleting); the "
                         "next run with --delete goes on",
                         (long long)s->opt->max_delete,
                         (unsigned long long)s->sum->files_deleted,
                         (unsigned long long)dd.held);
        return 0;
}
