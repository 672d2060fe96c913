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

/* How many of the process's groups a cfg keeps (its effective group
 * first); a process in more sets the group of files only to these. */
#define FERRY_META_GROUPS 64

struct ferry_meta_cfg {
        bool perms, owner, times, xattrs, acls, atimes;
        bool root;                  /* the process may chown */
        mode_t umask;               /* --no-perms */
        struct ferry_dst_caps caps; /* what DST can hold */
        /* not root: the groups a file may be given (cp -a and rsync -a
         * set the group when the user is in it); ferry_meta_cfg_groups */
        gid_t groups[FERRY_META_GROUPS];
        unsigned ngroups;
        uid_t euid; /* an entry of another user's is not chgrp-ed */
};

/* Fills mc->groups with the process's effective and supplementary groups
 * (on failure the effective one alone). Once per cfg, not per file. */
void ferry_meta_cfg_groups(struct ferry_meta_cfg *mc);

/* The FERRY_XA_* flags (xattr.h) of what mc keeps: xattrs, ACLs, and
 * when not root only user.* of the xattrs. */
unsigned ferry_meta_xattr_keep(const struct ferry_meta_cfg *mc);

/* The entry: by descriptor when fd >= 0; else name in dirfd, not
 * followed (symlinks, specials). in_place: it may carry xattrs or ACLs
 * of its own (an entry applied in place, a directory, a temp file that
 * inherited an access ACL from its directory's default ACL): those SRC
 * lacks are removed, within the namespaces kept and held. now: the
 * entry's stat as it is (NULL: not known), for an entry that may hold
 * SRC's metadata already (an adopted one): each part is compared first
 * and set only when it differs, so that an equal entry keeps its ctime
 * (an access time alone differing is set only with --atimes). */
struct ferry_meta_target {
        int fd;
        int dirfd;
        const char *name;
        bool in_place;
        const struct ferry_stat *now;
};

/* Applies st (and xa, SRC's kept xattrs and ACLs; NULL: leave the
 * entry's as they are) to t as mc says. The owner: as root uid and gid;
 * otherwise the group alone, when it is one of mc->groups and the entry
 * the process's (MF_AP_OWNER then says the group is SRC's; another group,
 * another user's entry are no failure, as for cp -a). Every part is
 * tried, also after one failed. Returns 0, or the errno of the first part that
 * failed and *step its step (FERRY_STEP_XATTR, _ACL for those); *applied gets
 * the MF_AP_* bits (manifest_types.h) of the parts that worked: MF_AP_XATTRS
 * and MF_AP_ACLS only when every attribute of theirs was applied and DST
 * holds them all (mc->caps; what it cannot hold is skipped, no error). */
int ferry_meta_apply(const struct ferry_meta_cfg *mc,
                     const struct ferry_meta_target *t,
                     const struct ferry_stat *st, const struct ferry_xattrs *xa,
                     uint32_t *applied, enum ferry_step *step);

/* For --verify: whether DST's time dst gives back src as set. A DST that
 * keeps times to the nanosecond gives back what was set; one that keeps
 * less (NTFS's 100 ns, a share's microseconds) truncates within 1 us; a
 * coarse one (exFAT's 10 ms, exfat-fuse's seconds, FAT's 2 s) gives a
 * time of whole hundredths within 2 s. */
bool ferry_meta_times_match(struct ferry_time dst, struct ferry_time src);
/* For --verify: whether DST's owner (uid, gid) differs from SRC's where
 * ferry applies it: root both, else the group alone. */
bool ferry_meta_owner_differs(const struct ferry_meta_cfg *mc, uint32_t uid,
                              uint32_t gid, uint32_t src_uid, uint32_t src_gid);

#endif
