/*
 * coord/dryrun.c - the dry run's report (--dry-run).
 *
 * Owns what a dry run does after its scan (phase FINISHING, with no worker
 * and nothing handed out): each pending row reported as a would-be copy,
 * or a would-be failure where DST holds what the copy would refuse to
 * replace (rule 9), or, with --adopt, a would-be adoption where the run
 * would hash DST's entry to adopt it (would_adopt: by the run's own test,
 * ferry_adopt_would_hash, and a symlink's target; the run hashes both
 * sides, a dry run reads no file), and each removed row as a would-be
 * deletion; then each removed directory as a would-be deletion when the
 * run's rmdir would find it empty: every entry in it one that the dry run
 * deletes (a removed row, a removed directory below) or a stale temp the
 * run removes first (its rows' counts, emptied), as the run lists and
 * counts it, --max-delete included. Its one transaction is rolled back:
 * the manifest stays as it was.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "chunks.h"
#include "copy.h"
#include "fsio.h"
#include "owner.h"

#include <errno.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A DST directory and how many of its entries the run would remove. */
struct emptied {
        uint64_t n;
        char *path;
};

static int cmp_emptied(const void *a, const void *b)
{
        return strcmp(((const struct emptied *)a)->path,
                      ((const struct emptied *)b)->path);
}

static void free_emptied(void *p)
{
        struct emptied *e = p;
        free(e->path);
        free(e);
}

/* How many entries of DST's directory path the run would remove. */
static uint64_t emptied(struct coord *c, const char *path)
{
        struct emptied key = {.path = (char *)path};
        struct emptied **e = tfind(&key, &c->fin.emptied, cmp_emptied);
        return e ? (*e)->n : 0;
}

/* The node of path (len bytes) in tree, made with a count of 0 when new;
 * NULL when out of memory (said: the run stops). */
static struct emptied *node_of(struct coord *c, void **tree, const char *path,
                               size_t len)
{
        struct emptied *e = calloc(1, sizeof(*e)), **at = NULL;
        if (e && (e->path = strndup(path, len)))
                at = tsearch(e, tree, cmp_emptied);
        if (!at || *at != e) { /* out of memory, or known already */
                if (e)
                        free(e->path);
                free(e);
        }
        if (!at)
                set_error(c, FERRY_EINTERNAL, "out of memory");
        return at ? *at : NULL;
}

/* One more entry of DST's directory path (len bytes) that the run would
 * remove. */
static void empties(struct coord *c, const char *path, size_t len)
{
        struct emptied *e = node_of(c, &c->fin.emptied, path, len);
        if (e)
                e->n++;
}

/* DST's entry path would go to make way for a copy, with all below it. */
static void clears(struct coord *c, const char *path)
{
        node_of(c, &c->fin.cleared, path, strlen(path));
}

/* Whether dir/name (name NULL: dir), or a directory above it, would go to
 * make way for a copy: the run's deletion would find nothing there. */
static bool under_cleared(struct coord *c, const char *dir, const char *name)
{
        if (!c->fin.cleared)
                return false;
        size_t dl = strlen(dir), nl = name ? strlen(name) : 0;
        char *full = malloc(dl + nl + 2);
        if (!full)
                return false;
        memcpy(full, dir, dl);
        size_t len = dl;
        if (name) {
                if (dl)
                        full[len++] = '/';
                memcpy(full + len, name, nl);
                len += nl;
        }
        full[len] = '\0';
        bool found = false;
        for (size_t i = 1; i <= len && !found; i++) {
                if (i < len && full[i] != '/')
                        continue;
                char keep = full[i];
                full[i] = '\0';
                struct emptied key = {.path = full};
                found = tfind(&key, &c->fin.cleared, cmp_emptied) != NULL;
                full[i] = keep;
        }
        free(full);
        return found;
}

/* --adopt: the run would hash this item's DST entry st to adopt it: the
 * run's own test (copy.h: ferry_adopt_would_hash), and for a symlink the
 * same target (the dry run reads no file: a file's content is left to
 * the run's hash). */
static bool would_adopt(struct coord *c, const struct ferry_copy_cfg *cc,
                        const struct ferry_batch *b,
                        const struct ferry_item *it, int sfd, int dfd,
                        const char *name, const struct ferry_stat *st)
{
        return c->opt->adopt && it->need == MF_NEED_DATA && sfd >= 0 &&
               ferry_adopt_would_hash(cc, it, ferry_item_plan(b, it), &it->st,
                                      dfd, sfd, name, st) &&
               (it->type != FT_LINK || ferry_adopt_same_target(sfd, dfd, name));
}

/* Dry run: what copying it would remove or refuse to replace in DST, by
 * the rules the copy follows (rule 9): a refusal is a would-be failure.
 * *adopt: --adopt would hash DST's entry and keep it when equal. */
static bool would_place(struct coord *c, const struct ferry_batch *b,
                        const struct ferry_item *it, bool *adopt)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        struct ferry_copy_cfg cc = {.meta = {.times = c->opt->times},
                                    .adopt = c->opt->adopt,
                                    .names = c->cfg->names,
                                    .written_since = c->written_since};
        struct ferry_stat st;
        int dfd = -1, sfd = -1, err = 0;
        char why[512], *what = NULL;
        if (c->cfg->dstfd < 0)
                return true;
        int rc = ferry_fsio_open_dir(c->cfg->dstfd, dir, &dfd);
        if (rc == ENOTDIR || rc == ELOOP)
                err = ENOTDIR;
        else if (!rc && !ferry_fsio_statat(dfd, name, &st)) {
                if (ferry_fsio_open_dir(c->cfg->srcfd, dir, &sfd))
                        sfd = -1;
                *adopt = would_adopt(c, &cc, b, it, sfd, dfd, name, &st);
                /* the copy refuses another spelling's copy (copy_dst.c) */
                bool clash = !*adopt && sfd >= 0 &&
                             ferry_copy_other_spelling(&cc, it, dfd, sfd, name,
                                                       why, sizeof(why));
                err = clash ? EXDEV
                      : *adopt || ferry_copy_is_ours(&cc, it, &it->st, &st) ? 0
                      : S_ISDIR(st.mode) ? EISDIR
                                         : EEXIST;
        }
        ferry_fsio_close(&sfd);
        ferry_fsio_close(&dfd);
        if (!err)
                return true;
        if (err == EXDEV) {
                c->sum->files_failed++;
                emit(c, FERRY_EV_WARNING, dir, name, why);
                return false;
        }
        struct ferry_dst_rec claim;
        if (err == EEXIST && !ferry_names_case_insensitive(c->cfg->names)) {
                ferry_copy_refusal(it, &st, why, sizeof(why));
                rc = EEXIST;
        } else
                rc = ferry_owner_clear_way(c->m, c->cfg->dstfd, c->cfg->names,
                                           dir, name, err, false, &what, &claim,
                                           why, sizeof(why));
        /* once: the run clears it for the first copy below it, the next
         * ones find the way clear */
        if (!rc && what && !under_cleared(c, what, NULL)) {
                c->sum->files_deleted++;
                emit(c, FERRY_EV_WOULD_DELETE, "", what, NULL);
                clears(c, what);
        }
        free(what);
        if (!rc)
                return true;
        c->sum->files_failed++;
        emit(c, FERRY_EV_WARNING, dir, name, why);
        return false;
}

static void would_copy(struct coord *c, const struct ferry_batch *b,
                       const struct ferry_item *it)
{
        bool adopt = false;
        if (!would_place(c, b, it, &adopt))
                return;
        if (adopt) {
                c->sum->files_adopted++;
                emit_item(c, FERRY_EV_WOULD_ADOPT, b, it, NULL, NULL);
                return;
        }
        if (it->need == MF_NEED_META) { /* in place: no data would move */
                c->sum->meta_applied++;
                emit_item(c, FERRY_EV_WOULD_META, b, it, NULL, NULL);
                return;
        }
        if (it->follower) { /* a later name of a link group: linked */
                c->sum->files_linked++;
                emit_item(c, FERRY_EV_WOULD_COPY, b, it, NULL, NULL);
                return;
        }
        c->sum->files_copied++;
        c->sum->bytes_copied += it->type == FT_REG ? it->st.size : 0;
        emit_item(c, FERRY_EV_WOULD_COPY, b, it, NULL, NULL);
}

/* A stale temp of a row (an earlier run's, killed): the run removes it
 * before its deletions (finish.c), so it leaves its directory. */
static void would_remove_temp(struct coord *c, const struct ferry_batch *b,
                              const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        char tmp[NAME_MAX + 1];
        struct ferry_stat st;
        int dfd = -1;
        ferry_copy_temp_name(ferry_batch_at(b, it->name_off), it->id, tmp);
        if (c->cfg->dstfd >= 0 &&
            !ferry_fsio_open_dir(c->cfg->dstfd, dir, &dfd) &&
            !ferry_fsio_statat(dfd, tmp, &st))
                empties(c, dir, strlen(dir));
        ferry_fsio_close(&dfd);
}

static void would_delete(struct coord *c, const struct ferry_batch *b,
                         const struct ferry_item *it)
{
        const char *dir = ferry_batch_at(b, it->dir_off);
        const char *name = ferry_batch_at(b, it->name_off);
        if (protected_path(c, dir, name, false) ||
            other_spelling(c, dir, name) || under_cleared(c, dir, name))
                return;
        struct ferry_stat st;
        int dfd = -1, rc = ENOENT;
        if (c->cfg->dstfd >= 0 &&
            !(rc = ferry_fsio_open_dir(c->cfg->dstfd, dir, &dfd)))
                rc = ferry_fsio_statat(dfd, name, &st);
        ferry_fsio_close(&dfd);
        if (rc == ENOENT || rc == ENOTDIR || (!rc && S_ISDIR(st.mode)))
                return; /* nothing there that a deletion would remove */
        if (rc) {       /* as the run's deleted_file says it */
                char why[256];
                snprintf(why, sizeof(why), "cannot delete: %s", strerror(rc));
                emit(c, FERRY_EV_WARNING, dir, name, why);
                return;
        }
        if (!ferry_copy_matches(&it->dst, &st)) { /* as delete_file */
                emit(c, FERRY_EV_WARNING, dir, name,
                     it->dst.type ? "not deleted: it was changed since "
                                    "ferry copied it"
                                  : "not deleted: ferry did not write it");
                return;
        }
        if (c->fin.refused) {
                emit(c, FERRY_EV_WOULD_DELETE, dir, name, "--delete refused");
                return;
        }
        if (delete_held(c, dir, name, false))
                return;
        c->sum->files_deleted++;
        emit(c, FERRY_EV_WOULD_DELETE, dir, name, NULL);
        empties(c, dir, strlen(dir));
}

/* A removed directory, deepest first, as the run's delete_dir (finish.c)
 * and its rmdir would treat it: deleted when every entry in it goes. */
static void would_delete_dir(struct coord *c, const struct ferry_dir_row *d,
                             void *arg)
{
        (void)arg;
        const char *path = d->path;
        if (protected_path(c, "", path, true) || other_spelling(c, "", path) ||
            under_cleared(c, path, NULL))
                return;
        /* as the run's rmdir gets there: its parent opened first (no
         * symbolic link on the way), then the directory itself */
        const char *slash = strrchr(path, '/');
        char *parent = strndup(path, slash ? (size_t)(slash - path) : 0);
        int pfd = -1, dfd = -1;
        int rc = !parent ? ENOMEM
                 : c->cfg->dstfd < 0
                         ? ENOENT
                         : ferry_fsio_open_dir(c->cfg->dstfd, parent, &pfd);
        free(parent);
        uint64_t n = 0;
        if (!rc)
                rc = ferry_fsio_open_dir(pfd, slash ? slash + 1 : path, &dfd);
        if (rc == ELOOP && pfd >= 0)
                rc = ENOTDIR; /* a symbolic link in its place: rmdir's */
        if (!rc)
                rc = ferry_fsio_count_entries(dfd, &n);
        ferry_fsio_close(&dfd);
        ferry_fsio_close(&pfd);
        if (rc == ENOENT || rc == ENOTDIR)
                return; /* no directory there: the run finds it gone */
        if (c->fin.refused) {
                emit(c, FERRY_EV_WOULD_DELETE, "", path, "--delete refused");
                return;
        }
        if (delete_held(c, "", path, true))
                return;
        if (!rc && n != emptied(c, path))
                rc = ENOTEMPTY;
        if (rc) {
                char why[256];
                snprintf(why, sizeof(why), "directory not deleted: %s",
                         strerror(rc));
                emit(c, FERRY_EV_WARNING, "", path, why);
                return;
        }
        c->sum->files_deleted++;
        emit(c, FERRY_EV_WOULD_DELETE, "", path, NULL);
        empties(c, path, slash ? (size_t)(slash - path) : 0);
}

int dry_run(struct coord *c)
{
        if (!start_threads(c, true, false))
                start_loop(c, PH_SCANNING); /* no workers, no hand-out */
        stop_threads(c);
        if (!c->stop_code) {
                set_phase(c, PH_FINISHING);
                each_row(c, PASS_DRY_RUN, would_copy);
                if (c->opt->delete_removed && !c->sum->scan_errors) {
                        check_delete(c);
                        each_row(c, PASS_STALE_TEMPS, would_remove_temp);
                        each_row(c, PASS_REMOVED, would_delete);
                        each_dir(c, DIRS_REMOVED, would_delete_dir, NULL);
                        report_held(c);
                }
        }
        tdestroy(c->fin.emptied, free_emptied);
        tdestroy(c->fin.cleared, free_emptied);
        c->fin.emptied = c->fin.cleared = NULL;
        int code = result_code(c);
        ferry_manifest_rollback(c->m);
        return code;
}
