/*
 * coord/ingest.c - the scan's results into manifest rows.
 *
 * Owns what the coordinator does with a listing (MSG_LISTING: a chunk of
 * one SRC directory) and with the scan's end (MSG_SCAN_DONE): directory
 * and file rows upserted, the small cache of directory rows, SRC's
 * identity, what a directory that could not be read keeps, rows of a
 * replaced directory removed, the counts of the summary and progress, and,
 * once the scan is complete, rows it did not see marked gone and the DST
 * space check.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "failure.h"
#include "owner.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

static struct dir_slot *dcache_find(struct coord *c, const char *path,
                                    size_t len)
{
        for (unsigned i = 0; i < DIR_CACHE; i++) {
                struct dir_slot *s = &c->in.dcache[i];
                if (s->path && s->len == len && !memcmp(s->path, path, len))
                        return s;
        }
        return NULL;
}

static void dcache_put(struct coord *c, const char *path, size_t len,
                       int64_t id, bool is_new, bool marking)
{
        struct dir_slot *s = &c->in.dcache[c->in.dcache_next++ % DIR_CACHE];
        free(s->path);
        s->path = malloc(len + 1);
        if (!s->path)
                return;
        memcpy(s->path, path, len + 1);
        s->len = len;
        s->id = id;
        s->is_new = is_new;
        s->marking = marking;
}

static int listing_dir(struct coord *c, const struct ferry_listing *l,
                       int64_t *id, bool *is_new, bool *marking)
{
        if (l->first) {
                int rc = ferry_manifest_dir_upsert(c->m, l->path, l->path_len,
                                                   &l->dir_st, c->gen, id,
                                                   is_new, marking);
                if (!rc)
                        dcache_put(c, l->path, l->path_len, *id, *is_new,
                                   *marking);
                return rc;
        }
        struct dir_slot *s = dcache_find(c, l->path, l->path_len);
        if (s) {
                *id = s->id;
                *is_new = s->is_new;
                *marking = s->marking;
                return 0;
        }
        *is_new = false;
        return ferry_manifest_dir_find(c->m, l->path, l->path_len, id, marking);
}

/* A new file in a known directory may have replaced a directory: the rows
 * below that one are gone from SRC (before DST's directory is replaced). */
static int replaced_dir(struct coord *c, const struct ferry_listing *l,
                        const struct ferry_entry *e)
{
        size_t len;
        const char *path = join_path(c, l->path, l->arena + e->name_off, &len);
        if (!path)
                return -1;
        return ferry_manifest_subtree_removed(c->m, path, len, c->gen);
}

static void count_entry(struct coord *c, const struct ferry_listing *l,
                        const struct ferry_entry *e, enum ferry_upsert res)
{
        c->sum->files_seen++;
        bool special = !S_ISREG(e->st.mode) && !S_ISLNK(e->st.mode);
        if (special) {
                c->sum->files_skipped++;
                if (res != UP_UNCHANGED)
                        emit(c, FERRY_EV_SKIPPED, l->path,
                             l->arena + e->name_off,
                             "special file (fifo, socket or device) skipped");
                return;
        }
        if (res == UP_UNCHANGED)
                c->sum->files_unchanged++;
        if (res == UP_UNCHANGED || res == UP_RESUMED)
                return; /* resumed rows were counted at the start */
        c->prog.files_total++;
        if (S_ISREG(e->st.mode))
                c->prog.bytes_total += e->st.size;
}

/* A directory the scan could not read: say so, record why, and keep what
 * the manifest knew below it as seen, so nothing there looks deleted. */
static int scan_error(struct coord *c, const struct ferry_listing *l,
                      int64_t dir)
{
        char why[256];
        struct ferry_failure f =
                ferry_failure_of(FERRY_SIDE_SRC, l->open_step, l->open_err);
        ferry_failure_message(&f, true, why, sizeof(why));
        c->sum->scan_errors++;
        c->prog.errors++;
        emit_failure(c, FERRY_EV_WARNING, "", l->path_len ? l->path : ".", why,
                     &f);
        int rc = ferry_manifest_dir_set_error(c->m, dir, &f, why);
        return rc ? rc
                  : ferry_manifest_keep_subtree(c->m, l->path, l->path_len,
                                                c->gen);
}

/* A directory of SRC is DST's root (a bind mount, which the checks before
 * the run did not see): stop before anything below it is listed, or each
 * run copies the last copy again, one level deeper. */
static void nested_dst(struct coord *c, const struct ferry_listing *l)
{
        emit(c, FERRY_EV_WARNING, "", l->path_len ? l->path : ".",
             "this directory of the source is the destination: not read");
        set_error(c, FERRY_EPATH,
                  "destination '%s' is inside the source '%s' (a directory "
                  "of the source is the destination under another name)",
                  c->opt->dst, c->opt->src);
}

/*
 * SRC's identity, the dev:ino of its root (as the scan found it), as DST's
 * (check_destination). A mount that failed leaves the empty mount point;
 * another file system, or a directory made anew, has another identity:
 * check_delete refuses to delete on their word. The identity alone proves
 * nothing (a device number changes when the same file system is only
 * mounted again), so it is weighed with what the scan finds gone, and the
 * one recorded stays until a run finds it the same tree (record_source).
 */
static int check_source(struct coord *c, const struct ferry_stat *st)
{
        snprintf(c->in.src_id, sizeof(c->in.src_id), "%llu:%llu",
                 (unsigned long long)st->dev, (unsigned long long)st->ino);
        char was[sizeof(c->in.src_was)];
        int rc = ferry_manifest_note(c->m, "src_identity", was, sizeof(was));
        if (rc || !was[0])
                return rc ? rc
                          : ferry_manifest_set_note(c->m, "src_identity",
                                                    c->in.src_id);
        if (strcmp(was, c->in.src_id))
                memcpy(c->in.src_was, was, sizeof(was));
        return 0;
}

void on_listing(struct coord *c, struct ferry_listing *l)
{
        int64_t dir = 0;
        bool is_new = false, marking = true;
        if (l->first && ferry_own_is_dst(c->cfg->own, &l->dir_st)) {
                nested_dst(c, l);
                ferry_listing_free(l);
                return;
        }
        c->dirty = true;
        int rc = listing_dir(c, l, &dir, &is_new, &marking);
        if (l->first && l->path_len)
                c->in.dirs_seen++;
        else if (!rc && l->first)
                rc = check_source(c, &l->dir_st);
        if (!rc && !dir)
                rc = -1; /* a chunk whose directory is unknown: cannot be */
        for (size_t i = 0; i < l->n && !rc; i++) {
                const struct ferry_entry *e = &l->entries[i];
                enum ferry_upsert res = 0;
                rc = ferry_manifest_file_upsert(
                        c->m, dir, is_new, marking, l->arena + e->name_off,
                        e->name_len, &e->st, c->gen, c->opt->hard_links, &res);
                if (res == UP_NEW || res == UP_CHANGED)
                        c->fresh = true;
                if ((res == UP_CHANGED || res == UP_RESUMED) && c->ho.pass == 1)
                        note_low(c, ferry_manifest_upserted(c->m));
                if (!rc && (res == UP_NEW || res == UP_CHANGED) && !is_new)
                        rc = replaced_dir(c, l, e);
                if (!rc)
                        count_entry(c, l, e, res);
        }
        if (!rc && ferry_fsio_out_of_fds(l->open_err)) {
                stop_no_fds(c, l->open_err); /* not the directory's fault */
                rc = ferry_manifest_keep_subtree(c->m, l->path, l->path_len,
                                                 c->gen);
        } else if (!rc && l->open_err)
                rc = scan_error(c, l, dir);
        else if (!rc && l->first)
                rc = ferry_manifest_dir_set_error(c->m, dir, NULL, NULL);
        if (!rc && l->last && !l->open_err && !c->stop_code &&
            !atomic_load(c->cfg->stop))
                rc = ferry_manifest_dir_listed(c->m, dir, c->gen, marking,
                                               l->seen);
        if (rc)
                manifest_error(c);
        ferry_listing_free(l);
}

static void human(uint64_t n, char *buf, size_t size)
{
        const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)n;
        int u = 0;
        while (v >= 1024 && u < 5) {
                v /= 1024;
                u++;
        }
        snprintf(buf, size, "%.1f %s", v, unit[u]);
}

/* Stops at once when what is left to copy cannot fit. */
static void check_space(struct coord *c)
{
        uint64_t files, bytes;
        struct statvfs vfs;
        if (ferry_manifest_pending(c->m, c->gen, &files, &bytes)) {
                manifest_error(c);
                return;
        }
        if (fstatvfs(c->cfg->dstfd, &vfs) || !vfs.f_blocks)
                return;
        uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        if (bytes <= avail)
                return;
        /* sizes are logical: sparse files and compression may still fit,
         * so warn; a real ENOSPC stops the run cleanly (exit 11) */
        char need[32], have[32], why[160];
        human(bytes, need, sizeof(need));
        human(avail, have, sizeof(have));
        snprintf(why, sizeof(why),
                 "the destination has %s free but %s are still to copy: it "
                 "may fill up",
                 have, need);
        emit(c, FERRY_EV_WARNING, "", "", why);
}

void on_scan_done(struct coord *c)
{
        c->in.scan_done = true;
        if (c->work_kind != WORK_COPY || c->stop_code)
                return;
        set_phase(c, c->ho.hand_out ? PH_FIRST_PASS : PH_DRAINING);
        /* The scan is complete: rows of directories it did not see are gone
         * from SRC, and hardlink groups whose first name is gone get another
         * before their other names are handed out (the next pass). */
        if (ferry_manifest_mark_unseen(c->m, c->gen) ||
            ferry_manifest_elect_leaders(c->m)) {
                manifest_error(c);
                return;
        }
        c->dirty = c->fresh = true;
        if (!c->opt->dry_run)
                check_space(c);
}
