/*
 * overlap.h - where SRC, DST and ferry's own files meet.
 *
 * Decided by identity (st_dev and st_ino) and by what the kernel says of
 * its mounts, never by the spelling of a path: a symlink, a bind mount or a
 * second mount of one file system gives a directory many names.
 *
 * DST inside SRC (or the same): each run would copy the last copy again,
 * one level deeper. SRC inside DST: what ferry writes at SRC's place in
 * DST lands in SRC (a copy of SRC's "sub/x", with SRC at DST's "sub",
 * overwrites SRC's own "x"), and --delete of such a row removes a source
 * file; both are refused.
 *
 * Calling sequence:
 *   ferry_overlap_trees(src, dst, dst_exists)   before a run writes
 *   ferry_own_new(manifest, dstfd, &own)         once the manifest is open
 *   ferry_own_is_dst / ferry_own_is_file         the scanner, --delete
 *   ferry_own_free(own)
 */
#ifndef FERRY_OVERLAP_H
#define FERRY_OVERLAP_H

#include "fsio.h"

#include <stdbool.h>

enum ferry_overlap {
        OVERLAP_NONE = 0,
        OVERLAP_SAME,       /* DST is SRC */
        OVERLAP_DST_IN_SRC, /* DST is (or would be) below SRC */
        OVERLAP_SRC_IN_DST, /* SRC is below DST */
};

/*
 * How the trees at the real paths src and dst overlap. When !dst_exists,
 * dst names the directory DST will be made in: at or below SRC means
 * DST_IN_SRC. Looks at the ".." chains of both (identity), then at
 * /proc/self/mountinfo: the place of each in its file system, and the
 * mounts below each (a bind mount of DST inside SRC). What cannot be read
 * tells nothing (NONE); the scanner's check (ferry_own_is_dst) stays.
 */
enum ferry_overlap ferry_overlap_trees(const char *src, const char *dst,
                                       bool dst_exists);

/* ferry's own places: DST's root and the manifest's files. */
struct ferry_own;

/*
 * Records DST's root (dstfd, or -1: none yet) and the manifest at path
 * with its companions: "-wal", "-shm", "-journal" and the lock file
 * ".lock", by dev:ino where they exist now, and by name in the manifest's
 * directory (known by dev:ino) for those SQLite makes later. Returns 0 or
 * ENOMEM; *out is the caller's to free.
 */
int ferry_own_new(const char *manifest, int dstfd, struct ferry_own **out);
void ferry_own_free(struct ferry_own *own);

/* Whether a directory (its stat) is DST's root. own may be NULL. */
bool ferry_own_is_dst(const struct ferry_own *own, const struct ferry_stat *d);
/* Whether the entry name, stat st, of the directory dir (NULL: unknown,
 * then by identity only) is one of ferry's own files. own may be NULL. */
bool ferry_own_is_file(const struct ferry_own *own,
                       const struct ferry_stat *dir, const char *name,
                       const struct ferry_stat *st);

#endif
