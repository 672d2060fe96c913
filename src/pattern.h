/*
 * pattern.h - --include and --exclude rules, matched as rsync's simple
 * patterns are (a subset of rsync's filter rules):
 *   "*.tmp"      no '/' and no "**": matches the name at any depth
 *   "a/b*"       with '/' inside: matches the end of the path relative to
 *                SRC at a '/' boundary ("sub/foo" matches "x/sub/foo")
 *   "/top"       a leading '/' anchors the pattern at SRC's root
 *   "cache/"     a trailing '/' matches directories only
 *   '*' any run of characters but '/', "**" any run including '/', '?'
 *   one character but '/', "[a-z]" / "[!a-z]" a class, '\' quotes the
 *   next character.
 * Rules are tried in order; the first that matches decides (include or
 * exclude); an entry no rule matches is included. An excluded directory
 * is not descended into. Refused (EINVAL, *why says which): an empty
 * pattern, "/" alone, "!" (rsync's list reset) and three stars
 * (rsync's "a directory and everything below it": use two rules).
 */
#ifndef FERRY_PATTERN_H
#define FERRY_PATTERN_H

#include "ferry.h"

#include <stdbool.h>
#include <stddef.h>

struct ferry_patterns;

/* Compiles the rules; *out is NULL for an empty list (matches nothing).
 * Returns 0, ENOMEM or EINVAL (then *why, if why is not NULL, says why
 * in a static string). Caller frees. */
int ferry_patterns_new_rules(const struct ferry_filter_rule *rules, size_t n,
                             struct ferry_patterns **out, const char **why);
/* Exclude rules only, one per pattern. */
int ferry_patterns_new(const char *const *pats, size_t n,
                       struct ferry_patterns **out);
void ferry_patterns_free(struct ferry_patterns *p);

enum ferry_rule_hit {
        FERRY_RULE_NONE = 0, /* no rule matched: included */
        FERRY_RULE_INCLUDE,
        FERRY_RULE_EXCLUDE,
};

/* rel is the path relative to SRC (no leading '/'), name its last part;
 * rel may be NULL when ferry_patterns_need_path is false. */
enum ferry_rule_hit ferry_patterns_decide(const struct ferry_patterns *p,
                                          const char *rel, const char *name,
                                          bool is_dir);
/* ferry_patterns_decide(...) == FERRY_RULE_EXCLUDE */
bool ferry_patterns_match(const struct ferry_patterns *p, const char *rel,
                          const char *name, bool is_dir);
/* True when some pattern needs the whole relative path. */
bool ferry_patterns_need_path(const struct ferry_patterns *p);

/* The glob alone (the syntax above, without the leading and trailing
 * '/' rules) against s: for the unit tests. */
bool ferry_glob_match(const char *glob, const char *s);

#endif
