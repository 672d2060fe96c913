/*
 * pattern.h - --exclude patterns, matched like rsync's simple ones:
 *   "*.tmp"      no '/': matches the name at any depth
 *   "a/b*"       with '/': matches the path relative to SRC (fnmatch with
 *                FNM_PATHNAME, so '*' does not cross '/')
 *   "/top"       a leading '/' anchors the pattern at SRC
 *   "cache/"     a trailing '/' matches directories only
 * An excluded directory is not descended into.
 */
#ifndef FERRY_PATTERN_H
#define FERRY_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

struct ferry_patterns;

/* Compiles the list; *out is NULL for an empty list (matches nothing).
 * Returns 0, ENOMEM or EINVAL (an empty pattern). Caller frees. */
int ferry_patterns_new(const char *const *pats, size_t n,
                       struct ferry_patterns **out);
void ferry_patterns_free(struct ferry_patterns *p);

/* rel is the path relative to SRC (no leading '/'), name its last part. */
bool ferry_patterns_match(const struct ferry_patterns *p, const char *rel,
                          const char *name, bool is_dir);
/* True when some pattern needs the whole relative path. */
bool ferry_patterns_need_path(const struct ferry_patterns *p);

#endif
