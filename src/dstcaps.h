/*
 * dstcaps.h - what metadata DST can hold, learned once at the start of a
 * run by a probe in DST's root (beside the name probe, names.h).
 *
 * The copier applies only what DST can hold and counts a part it could
 * hold but refused as a metadata shortfall (struct ferry_item.meta_fail),
 * never as a data failure; what DST cannot hold at all is said once at
 * the start and not counted per file.
 */
#ifndef FERRY_DSTCAPS_H
#define FERRY_DSTCAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ferry_dst_caps {
        bool owner;         /* a chown to another owner sticks (root) */
        bool perms;         /* a chmod sticks */
        bool xattrs_user;   /* user.* xattrs */
        bool xattrs_other;  /* security.* and trusted.* (as root) */
        bool acls;          /* system.posix_acl_* */
        bool symlink_times; /* utimensat of a symlink itself */
        bool specials;      /* FIFOs, sockets (and devices as root) */
        /* a file's times stay as set when it is renamed (fusefat gives it
         * a new mtime): else the copier sets them again after the rename */
        bool times_survive_rename;
        bool hard_links;   /* a second name of a file (exFAT: none) */
        uint64_t max_size; /* largest file DST holds; UINT64_MAX: no limit */
};

/* Everything: what the copier assumes before (or without) a probe. */
static inline void ferry_dst_caps_all(struct ferry_dst_caps *c)
{
        *c = (struct ferry_dst_caps){true, true, true, true, true,
                                     true, true, true, true, UINT64_MAX};
}

/* The options a run was given, of those the probe can tell about. */
struct ferry_dst_wants {
        bool owner, perms, xattrs, acls, times, specials, hard_links;
};

/* Probes DST's root (dirfd) with files of its own, removed again, and
 * gives the root its times back. Returns 0, or the errno that kept the
 * probe file from being made: *c is then all but max_size. */
int ferry_dst_caps_probe(int dirfd, struct ferry_dst_caps *c);

/* The largest file a file system of this statfs f_type and mount type
 * (/proc/self/mountinfo's, may be NULL) holds; UINT64_MAX: no limit. */
uint64_t ferry_dst_caps_max_size(long fs_type, const char *mount_type);

/* What w asks for and c cannot hold, as the run's warning says it ("the
 * destination keeps no owners or modes: copying data and times") in buf;
 * false (buf "") when nothing is missing. */
bool ferry_dst_caps_missing(const struct ferry_dst_caps *c,
                            const struct ferry_dst_wants *w, char *buf,
                            size_t size);

#endif
