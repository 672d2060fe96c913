/*
 * select.h - the selection of a run: which SRC entries it copies. Made of
 * the --include/--exclude rules (pattern.h), the --files-from list and
 * the --min-size/--max-size bounds; the scan asks it about each entry
 * (ferry_select_entry), the end of the run and the manifest ask it about
 * rows the scan did not see (ferry_select_protects, ferry_select_keeps):
 * a path the selection leaves out is not a source deletion.
 *
 * --files-from: the paths listed (relative to SRC; a leading "/" or "./"
 * and a trailing "/" are dropped, "//" is one '/', a ".." component is
 * refused) and the directories leading to them are the only entries
 * selected; a listed directory is copied as a directory, not descended
 * into (as rsync without -r). The rules and sizes still apply to them.
 * Sizes apply to regular files only.
 */
#ifndef FERRY_SELECT_H
#define FERRY_SELECT_H

#include "ferry.h"
#include "pattern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ferry_select;

/* Builds the selection of opt (filters, excludes, files_from, from0,
 * sizes); *out is NULL when it selects everything. FERRY_EUSAGE with err
 * set for a bad pattern, an unreadable --files-from or a bad path in it;
 * FERRY_EINTERNAL when memory runs out. */
int ferry_select_new(const struct ferry_options *opt, struct ferry_select **out,
                     struct ferry_error *err);
void ferry_select_free(struct ferry_select *s);

/* True when the scan needs rel (the path relative to SRC) to decide. */
bool ferry_select_need_path(const struct ferry_select *s);
/* Before the stat: false when the entry is left out whatever its type
 * (--files-from lists neither it nor anything below it). */
bool ferry_select_named(const struct ferry_select *s, const char *rel);
/* The scan's question: is the entry copied (a directory: descended)?
 * size counts for regular files only. Marks a listed path as found.
 * Safe from any thread. */
bool ferry_select_entry(const struct ferry_select *s, const char *rel,
                        const char *name, bool is_dir, bool is_reg,
                        uint64_t size);

/* path (relative to SRC) or a directory above it is left out by the
 * rules or by --files-from: a row there is protected from --delete. */
bool ferry_select_protects(const struct ferry_select *s, const char *path,
                           bool is_dir);
/* The manifest's question about a row the scan did not see (manifest.h,
 * ferry_manifest_set_keep): true keeps it, a path the selection leaves
 * out. name NULL: the directory row dir; type a file row's MF_FT_*; size
 * its recorded size. may_stat: a regular file inside the size bounds as
 * recorded is looked up in SRC (srcfd): one there is left out by them
 * now. When unsure (no memory, a failed lookup), keeps. */
bool ferry_select_keeps(const struct ferry_select *s, int srcfd,
                        const char *dir, size_t dlen, const char *name,
                        size_t nlen, int type, uint64_t size, bool may_stat);
/* --min-size or --max-size given. */
bool ferry_select_sizes(const struct ferry_select *s);
/* size outside the bounds. */
bool ferry_select_size_out(const struct ferry_select *s, uint64_t size);

/* The warning of a path --files-from listed that SRC lacks. */
#define FERRY_SELECT_MISSING "listed in --files-from but not in SRC"

/* --files-from's list as two hosts of a shared job compare it: "N paths,
 * xxh128 HEX", the XXH3-128 of the sorted paths, each ended by a NUL;
 * NULL without a list or when memory runs out (*oom set). Free it. */
char *ferry_select_files_digest(const struct ferry_select *s, bool *oom);
/* The first listed path at index *i or after it that this process's scan
 * did not find, *i moved past it; NULL after the last. */
const char *ferry_select_next_unfound(const struct ferry_select *s, size_t *i);

/* Reports (opt->event, a warning) each path --files-from listed that the
 * scan did not find (after a complete scan); returns how many. */
size_t ferry_select_missing(const struct ferry_select *s,
                            const struct ferry_options *opt);

#endif
