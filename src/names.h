/*
 * names.h - which names the destination can hold, and names that would
 * collide there only by case.
 *
 * exFAT, FAT, NTFS and CIFS shares refuse some characters in a name and
 * compare names without case. The file system type says little (exfat-fuse
 * is "fuseblk", a CIFS share depends on its server), so the rules are
 * probed: at job start, a few probe files are created and removed in the
 * destination's root.
 *
 * Calling sequence:
 *   struct ferry_name_rules r;
 *   ferry_names_probe(dstfd, &r);          // job start, not in a dry run
 *   ferry_names_new(&r, &names);           // shared by all workers
 *   worker, per file:
 *     ferry_names_refused(names, name, why, size)  before reading anything
 *     ferry_names_lock(names, dir_id, name);
 *     ferry_names_clash(names, dstdir, srcdir, name, &src_st, &clash, ...)
 *     rename the temp file into place unless clash
 *     ferry_names_unlock(names, dir_id, name);
 *   worker, per directory it makes or enters for copying (and the end of
 *   the run, per directory whose metadata it applies):
 *     ferry_names_dir_clash(names, dstfd, srcfd, dir, &clash, why, size)
 *   ferry_names_free(names);
 */
#ifndef FERRY_NAMES_H
#define FERRY_NAMES_H

#include "fsio.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ferry_name_rules {
        bool refused[256];      /* bytes the destination cannot hold */
        bool no_trailing_dot;   /* "a." is refused or stored as "a" */
        bool no_trailing_space; /* likewise "a " */
        bool case_insensitive;  /* "A" and "a" are one name */
};

/* Probes the directory dirfd with files named ".ferry-probe.<pid>...
 * .ferry-part" (removed again) and fills rules. When even a plain probe
 * file cannot be created (read-only, no space), rules stay empty: the copy
 * then reports its own errors. The directory's times are given back.
 * Returns 0, or the errno that kept the plain probe file from being made:
 * then the rules say nothing and must not be kept for later runs. */
int ferry_names_probe(int dirfd, struct ferry_name_rules *rules);
/* A dry run's probe, which writes nothing: whether a name of DST's root
 * dirfd (among its first 4096) that has an ASCII letter is found by a
 * lookup with each letter's case swapped, when the listing does not hold
 * that spelling. 1: names are compared without case; 0: with case; -1:
 * not known (no such name, or a failure). */
int ferry_names_probe_case(int dirfd);
/* Before the probes of this run (this file's, dstcaps.c's) in DST's root
 * dirfd: removes what the probes of the run named in m's note left (it
 * was killed in the middle of them) and names this run there instead.
 * Nonzero when m fails (ferry_manifest_errmsg). */
struct ferry_manifest;
int ferry_probe_begin(struct ferry_manifest *m, int dirfd);
/* ".ferry-probe.<pid><middle>.ferry-part<tail>", a probe file's name. */
void ferry_probe_name(char *out, size_t size, long pid, const char *middle,
                      const char *tail);
/* Unlinks from dirfd every name the probes of pid make. */
void ferry_probe_sweep(int dirfd, long pid);
/* After probes in DST's root dirfd (this one, dstcaps.c's): gives back
 * the directory's times as atim and mtim had them, when the
 * probes moved them (a run with nothing to do would not set them again). */
struct timespec;
void ferry_probe_restore_times(int dirfd, const struct timespec *atim,
                               const struct timespec *mtim);

struct ferry_names;

/* Caller frees *out with ferry_names_free. ENOMEM or 0. */
int ferry_names_new(const struct ferry_name_rules *rules,
                    struct ferry_names **out);
void ferry_names_free(struct ferry_names *n);
/* The rules n was made from; n may be NULL (no rules). */
bool ferry_names_case_insensitive(const struct ferry_names *n);

/* True when the destination cannot hold name (one path component); why
 * gets "name not allowed on the destination file system (contains ':')"
 * or the like. n may be NULL (nothing is refused). */
bool ferry_names_refused(const struct ferry_names *n, const char *name,
                         char *why, size_t size);
/* Like ferry_names_refused for each component of the relative directory
 * path dir; why names the component. */
bool ferry_names_dir_refused(const struct ferry_names *n, const char *dir,
                             char *why, size_t size);

/* Compares two names as a case-insensitive destination does: each UTF-8
 * character by its simple upper case ("café" and "CAFÉ" are equal), bytes
 * that are not UTF-8 as themselves. A total order, for sorting too. */
int ferry_names_casecmp(const char *a, const char *b);

/* Serialize the check and rename of name in directory dir_id against
 * other workers installing a name that may differ from it only by case
 * (a striped lock keyed by the name folded as ferry_names_casecmp
 * folds it). Nothing to do for a case-sensitive destination or n NULL. */
void ferry_names_lock(struct ferry_names *n, int64_t dir_id, const char *name);
void ferry_names_unlock(struct ferry_names *n, int64_t dir_id,
                        const char *name);

/* On a case-insensitive destination: *clash when installing name in
 * dstdir would replace the copy of another source file whose name differs
 * only by case, that is when dstdir holds the name under another spelling
 * V and srcdir holds V as a file other than src (dev and ino). why tells.
 * An entry under V that the source no longer has (renamed by case, or not
 * ferry's) is no clash: it is replaced. Returns 0 or the errno of reading
 * the destination directory. Call it under ferry_names_lock. */
int ferry_names_clash(const struct ferry_names *n, int dstdir, int srcdir,
                      const char *name, const struct ferry_stat *src,
                      bool *clash, char *why, size_t size);

/* On a case-insensitive destination, before the directory dir (relative,
 * the same under SRC and DST) is made or entered for copying: makes each
 * missing component (mode 0700) and checks each existing one. *clash when
 * DST holds a component under another spelling V that SRC's parent holds
 * as another directory or file: what belongs below dir would land in V's
 * copy, so dir must not be made or entered; why says "directory 'DOCS'
 * collides with 'Docs' on the case-insensitive destination ...". A V that
 * SRC no longer has (renamed by case) is no clash: a directory is used as
 * it is, anything else is replaced by the directory. Nothing else in DST
 * is removed. Components found fine are remembered in n, so that one costs
 * at most one read of its parent per run. A component that cannot be made
 * ends the walk quietly (the caller's make_dirs reports the error). Returns
 * 0 or the errno of reading DST or SRC. Nothing to do for n NULL or a
 * case-sensitive destination. */
int ferry_names_dir_clash(struct ferry_names *n, int dstfd, int srcfd,
                          const char *dir, bool *clash, char *why, size_t size);

/* On a case-insensitive DST, the spelling (size bytes at most) under which
 * dstdir stores name when it is another one; "" when it stores name
 * exactly, not at all, or DST tells case apart. */
int ferry_names_other_spelling(const struct ferry_names *n, int dstdir,
                               const char *name, char *other, size_t size);

#endif
