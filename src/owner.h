/*
 * owner.h - what in DST is ferry's (DESIGN.md, crash-safety rule 9).
 *
 * ferry replaces or removes a DST entry only when the manifest shows it is
 * still the one ferry put there. The workers decide that for the file at an
 * item's own name (ferry_copy_is_ours, copy.h); what needs the manifest to
 * tell (a directory where SRC now has a file, a file where SRC now has a
 * directory) they hand to the coordinator as R_IN_WAY, and it asks here.
 *
 * Calling sequence (the coordinator, which owns the manifest):
 *   char *what = NULL, why[512];
 *   struct ferry_dst_rec claim;
 *   rc = ferry_owner_clear_way(m, dstfd, names, dir, name, it->err, true,
 *                              &what, &claim, why, sizeof(why));
 *   rc 0: the way is clear (what, if not NULL, was removed): copy again;
 *   rc EEXIST: refused, why says so; else an errno, why says what failed.
 *   free(what);
 */
#ifndef FERRY_OWNER_H
#define FERRY_OWNER_H

#include "manifest.h"
#include "names.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * err is the worker's: EISDIR, a directory at dir/name where SRC has a
 * file; ENOTDIR, a non-directory at a component of dir where SRC has a
 * directory; EEXIST, on a case-insensitive DST (names), an entry at
 * dir/name that may be the copy of a row of another spelling (renamed by
 * case in SRC): when it matches that row's record, *claim gets the record
 * (the caller makes it the item's own, so that its copy replaces it);
 * otherwise claim->type is 0. A directory is ferry's when SRC had it and ferry
 * copied it (the manifest has it), and everything in it is too: subdirectories
 * the same way, files as ferry_copy_matches says, ferry's own temp files. A
 * file is ferry's when it matches its row's record. Removes what is in
 * the way when remove, else only says what it would remove. *what (caller
 * frees) gets the path removed, relative to DST, or stays NULL.
 */
int ferry_owner_clear_way(struct ferry_manifest *m, int dstfd,
                          const struct ferry_names *names, const char *dir,
                          const char *name, int err, bool remove, char **what,
                          struct ferry_dst_rec *claim, char *why, size_t size);

#endif
