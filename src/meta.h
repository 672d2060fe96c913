/*
 * meta.h - SRC's metadata applied to one DST entry, in the order that
 * keeps it: owner first (a chown clears setuid bits and capabilities),
 * then mode, then xattrs and ACLs (an ACL sets the mode's group bits,
 * a capability must follow the chown), times last (every step before
 * may touch them). Used by the copier (a temp file, a symlink, a special
 * file, an entry whose metadata alone changed) and by the end-of-run
 * tree work (directories).
 */
#ifndef FERRY_META_H
#define FERRY_META_H

#include "dstcaps.h"
#include "ferry.h"
#include "fsio.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ferry_xattrs; /* SRC's xattrs and ACLs as read (xattr.h) */

struct ferry_meta_cfg {
        bool perms, owner, times, xattrs, acls, atimes;
        bool root;                  /* the process may chown */
        mode_t umask;               /* --no-perms */
        struct ferry_dst_caps caps; /* what DST can hold */
};

/* The entry: by descriptor when fd >= 0; else name in dirfd, not
 * followed (symlinks, specials). */
struct ferry_meta_target {
        int fd;
        int dirfd;
        const char *name;
};

/* Applies st (and xa, may be NULL) to t as mc says. Returns 0, or the
 * errno of the first part that failed and *step its step; *applied gets
 * the MF_AP_* bits (manifest_types.h) that were applied. */
int ferry_meta_apply(const struct ferry_meta_cfg *mc,
                     const struct ferry_meta_target *t,
                     const struct ferry_stat *st, const struct ferry_xattrs *xa,
                     uint32_t *applied, enum ferry_step *step);

#endif
