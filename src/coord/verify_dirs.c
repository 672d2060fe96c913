/*
 * coord/verify_dirs.c - the directories' part of --verify (verify_dirs):
 * every directory row of the latest scan whose metadata ferry applied is
 * compared with its copy in DST, as far as the row says what was applied
 * (the MF_AP_* bits of its `applied`): mode, owner, mtime, and the digest
 * of its xattrs and ACLs. A difference is printed as "metadata differs:
 * DIR/: PARTS", counted in meta_differs, and the row is set to apply
 * again: the next run applies the directory's metadata in place. DST is
 * only read (a directory that cannot be opened proves nothing).
 */
#define _GNU_SOURCE
#include "internal.h"

#include "fsio.h"
#include "manifest_types.h"
#include "meta.h"
#include "xattr.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Whether the digest of DST's directory fd (st its stat) differs from
 * the row's, read with the filter SRC's was read with (this run's
 * options, when the row applied what they keep); false when it cannot be
 * read or the row's digest was taken otherwise (no proof). */
static bool xattrs_differ(const struct ferry_meta_cfg *mc,
                          const struct ferry_dir_row *d, int fd,
                          const struct ferry_stat *st, struct ferry_xattrs *xa)
{
        unsigned keep = ferry_meta_xattr_keep(mc);
        uint32_t want = (keep & FERRY_XA_XATTRS ? MF_AP_XATTRS : 0u) |
                        (keep & FERRY_XA_ACLS ? MF_AP_ACLS : 0u);
        if (!d->has_xdigest || !want || (d->applied & want) != want)
                return false;
        if (ferry_xattrs_read_fd(xa, fd, st->dev, keep))
                return false;
        return ferry_xattrs_digest(xa) != d->xdigest;
}

/* The parts of DST's directory that differ from row d, named in parts
 * ("" when none); false when DST's directory cannot be looked at. */
static bool dir_differs(const struct coord *c, const struct ferry_meta_cfg *mc,
                        const struct ferry_dir_row *d, struct ferry_xattrs *xa,
                        char *parts, size_t size)
{
        int fd = -1;
        struct ferry_stat st;
        parts[0] = '\0';
        bool seen = !ferry_fsio_open_dir(c->cfg->dstfd, d->path, &fd) &&
                    !ferry_fsio_fstat(fd, &st) && S_ISDIR(st.mode);
        if (seen) {
                bool mode = (d->applied & MF_AP_PERMS) &&
                            (st.mode & 07777) != (d->mode & 07777);
                bool owner = (d->applied & MF_AP_OWNER) &&
                             ferry_meta_owner_differs(mc, st.uid, st.gid,
                                                      d->uid, d->gid);
                bool mtime = (d->applied & MF_AP_TIMES) &&
                             !ferry_meta_times_match(st.mtime, d->mtime);
                bool xattrs = xattrs_differ(mc, d, fd, &st, xa);
                snprintf(parts, size, "%s%s%s%s", mode ? ", mode" : "",
                         owner ? ", owner" : "", mtime ? ", mtime" : "",
                         xattrs ? ", xattrs" : "");
        }
        ferry_fsio_close(&fd);
        if (parts[0]) /* drop the leading ", " */
                memmove(parts, parts + 2, strlen(parts + 2) + 1);
        return seen;
}

/* What the walk over the directories carries (each_dir's arg). */
struct dirs_check {
        struct ferry_meta_cfg mc;
        struct ferry_xattrs xa;
};

/* Directory d is compared; when it differs in DST: said, counted, and
 * to apply again. */
static void check_dir(struct coord *c, const struct ferry_dir_row *d, void *arg)
{
        struct dirs_check *k = arg;
        char parts[128];
        if (!dir_differs(c, &k->mc, d, &k->xa, parts, sizeof(parts)) ||
            !parts[0])
                return;
        c->sum->meta_differs++;
        /* DIR/ (the root: ./): join_path puts the slash before "" */
        emit(c, FERRY_EV_META_DIFFERS, d->path[0] ? d->path : ".", "", parts);
        if (ferry_manifest_dir_outcome(c->m, d, DIR_TO_APPLY, NULL, NULL))
                manifest_error(c);
}

void verify_dirs(struct coord *c)
{
        struct dirs_check k = {.mc = coord_meta_cfg(c)};
        ferry_xattrs_init(&k.xa);
        each_dir(c, DIRS_APPLIED, check_dir, &k);
        ferry_xattrs_release(&k.xa);
}
