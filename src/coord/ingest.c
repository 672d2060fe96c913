/*
 * coord/ingest.c - the scan's results into manifest rows.
 *
 * Owns what the coordinator does with a listing (MSG_LISTING: a chunk of
 * one SRC directory) and with the scan's end (MSG_SCAN_DONE): the
 * listing recorded whole by the manifest (ferry_manifest_record_listing:
 * rows, what a directory that could not be read keeps, rows of a replaced
 * directory removed), what it found handed to the hand-out (rows to copy,
 * rows the first pass went past), SRC's identity, the warnings, the
 * counts of the summary and progress, and, once the scan is complete,
 * the metadata the run wants (set_wanted: a done row lacking some is
 * applied again), rows it did not see marked gone
 * (ferry_manifest_scan_complete) and the DST space check.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "copy.h"
#include "failure.h"
#include "owner.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* What of the special files the run copies: FIFOs and sockets unless
 * --no-specials, devices as root (with CAP_MKNOD) unless --no-devices;
 * none where DST holds none. */
static void specials_allowed(struct coord *c, bool *specials, bool *devices)
{
        if (!c->in.asked_mknod) {
                c->in.asked_mknod = true;
                c->in.can_mknod = ferry_copy_can_make_devices();
        }
        *specials = c->opt->specials && c->dst_caps.specials;
        *devices = c->opt->devices && c->dst_caps.specials && c->in.can_mknod;
}

/* Why a special file is skipped (ferry_entry_rec.skipped); the first
 * device skipped for want of root says so once. */
static const char *skip_reason(struct coord *c, uint32_t mode)
{
        if (!c->dst_caps.specials)
                return "special file skipped: the destination cannot hold "
                       "FIFOs, sockets or devices";
        if (!S_ISCHR(mode) && !S_ISBLK(mode))
                return "FIFO or socket skipped (--no-specials)";
        if (!c->opt->devices)
                return "device skipped (--no-devices)";
        if (!c->in.told_devices) {
                c->in.told_devices = true;
                emit(c, FERRY_EV_WARNING, "", "",
                     geteuid() ? "devices need root: device files are skipped"
                               : "devices need CAP_MKNOD, which this root "
                                 "process lacks: device files are skipped");
        }
        return geteuid() ? "device skipped: devices need root"
                         : "device skipped: devices need root with "
                           "CAP_MKNOD, which this process lacks";
}

static void count_entry(struct coord *c, const struct ferry_listing *l,
                        const struct ferry_entry *e,
                        const struct ferry_entry_rec *o)
{
        enum ferry_upsert res = o->res;
        c->sum->files_seen++;
        if (o->skipped) {
                c->sum->files_skipped++;
                if (res != UP_UNCHANGED)
                        emit(c, FERRY_EV_SKIPPED, l->path,
                             l->arena + e->name_off,
                             skip_reason(c, e->st.mode));
                return;
        }
        if (res == UP_UNCHANGED)
                c->sum->files_unchanged++;
        if (res == UP_UNCHANGED || res == UP_RESUMED)
                return; /* resumed rows were counted at the start */
        c->prog.files_total++;
        if (res == UP_META)
                return; /* metadata alone, or a link: no data moves */
        if (S_ISREG(e->st.mode))
                c->prog.bytes_total += e->st.size;
}

/* A directory the scan could not read: say so (the manifest kept why
 * with it, and what it knew below it as seen, so that nothing there looks
 * deleted). */
static void tell_scan_error(struct coord *c, const struct ferry_listing *l,
                            const struct ferry_failure *f, const char *why)
{
        if (ferry_fsio_out_of_fds(l->open_err)) {
                stop_no_fds(c, l->open_err); /* not the directory's fault */
                return;
        }
        c->sum->scan_errors++;
        c->prog.errors++;
        emit_failure(c, FERRY_EV_WARNING, "", l->path_len ? l->path : ".", why,
                     f);
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

/* The parts of the metadata ferry_meta_apply applies (meta.c). */
#define META_APPLIES                                                           \
        (MF_AP_PERMS | MF_AP_OWNER | MF_AP_TIMES | MF_AP_ATIMES |              \
         MF_AP_XATTRS | MF_AP_ACLS)

/* What the run's options want in DST, less what DST cannot hold: a done
 * row that lacks some of it gets its metadata alone applied (the
 * reconciliation of a run with other options; manifest/scan.c). */
static void set_wanted(struct coord *c)
{
        struct ferry_meta_cfg mc = coord_meta_cfg(c);
        uint32_t w = 0, wl = 0;
        if (mc.perms && mc.caps.perms)
                w |= MF_AP_PERMS;
        if (mc.owner && mc.root && mc.caps.owner) {
                w |= MF_AP_OWNER;
                wl |= MF_AP_OWNER;
        }
        if (mc.xattrs && mc.caps.xattrs_user)
                w |= MF_AP_XATTRS;
        if (mc.acls && mc.caps.acls)
                w |= MF_AP_ACLS;
        if (mc.times)
                w |= MF_AP_TIMES | (mc.atimes ? MF_AP_ATIMES : 0);
        if (mc.times && mc.caps.symlink_times)
                wl |= w & (MF_AP_TIMES | MF_AP_ATIMES);
        /* a special file has a mode, an owner and times as a file has
         * (user.* xattrs it cannot hold) */
        uint32_t ws =
                w & (MF_AP_PERMS | MF_AP_OWNER | MF_AP_TIMES | MF_AP_ATIMES);
        ferry_manifest_set_wanted(c->m, w & META_APPLIES, wl & META_APPLIES,
                                  ws);
}

/* Room for the outcomes of a listing of n entries. */
static struct ferry_entry_rec *entry_recs(struct coord *c, size_t n)
{
        if (n > c->in.recs_cap) {
                struct ferry_entry_rec *r = realloc(c->in.recs, n * sizeof(*r));
                if (!r)
                        return NULL;
                c->in.recs = r;
                c->in.recs_cap = n;
        }
        return c->in.recs;
}

void on_listing(struct coord *c, struct ferry_listing *l)
{
        if (l->first && ferry_own_is_dst(c->cfg->own, &l->dir_st)) {
                nested_dst(c, l);
                ferry_listing_free(l);
                return;
        }
        struct ferry_entry_rec *out = entry_recs(c, l->n ? l->n : 1);
        if (!out) {
                set_error(c, FERRY_EINTERNAL, "out of memory");
                ferry_listing_free(l);
                return;
        }
        c->dirty = true;
        if (!c->in.wanted_set) { /* before the first row is recorded */
                set_wanted(c);
                c->in.wanted_set = true;
        }
        char why[256] = "";
        struct ferry_failure f = {0};
        bool fds = ferry_fsio_out_of_fds(l->open_err);
        if (l->open_err && !fds) { /* kept with the directory */
                f = ferry_failure_of(FERRY_SIDE_SRC, l->open_step, l->open_err);
                ferry_failure_message(&f, true, why, sizeof(why));
        }
        struct ferry_listing_rec how = {
                .gen = c->gen,
                .hard_links = coord_hard_links(c),
                .error = l->open_err && !fds ? why : NULL,
                .fail = l->open_err && !fds ? &f : NULL,
                .stopping = c->stop_code || atomic_load(c->cfg->stop),
        };
        specials_allowed(c, &how.specials, &how.devices);
        int rc = ferry_manifest_record_listing(c->m, l, &how, out);
        if (l->first && l->path_len)
                c->in.dirs_seen++;
        else if (!rc && l->first)
                rc = check_source(c, &l->dir_st);
        for (size_t i = 0; i < l->n; i++) {
                enum ferry_upsert res = out[i].res;
                if (!res)
                        continue; /* not recorded */
                if (res == UP_NEW || res == UP_CHANGED || res == UP_META)
                        c->fresh = true;
                if (out[i].again && c->ho.pass == 1)
                        note_low(c, out[i].id);
                count_entry(c, l, &l->entries[i], &out[i]);
        }
        if (!rc && l->open_err)
                tell_scan_error(c, l, &f, why);
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

/* Warns when what is left to copy cannot fit. Not under --adopt: what
 * DST already holds is to be adopted, not written, and which files those
 * are is known only once both sides are hashed (a full cp -a'd DST would
 * be said to fill up). */
static void check_space(struct coord *c)
{
        uint64_t files, bytes;
        struct statvfs vfs;
        if (c->opt->adopt)
                return;
        if (ferry_manifest_count(c->m, COUNT_TO_COPY, c->gen, &files, &bytes)) {
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
        if (ferry_manifest_scan_complete(c->m, c->gen)) {
                manifest_error(c);
                return;
        }
        c->dirty = c->fresh = true;
        if (!c->opt->dry_run)
                check_space(c);
}
