/*
 * pattern.c - --include/--exclude rules (pattern.h): compiling each
 * pattern (anchored, directories only, matched against the name or the
 * path), the glob matcher ('*', "**", '?', classes, '\'), and the
 * first-match decision over the rules.
 */
#define _GNU_SOURCE
#include "pattern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pattern {
        char *glob;
        bool include;
        bool dir_only;
        bool anchored;   /* a leading '/': the whole path from SRC's root */
        bool whole_path; /* matched against the path, not the name */
};

struct ferry_patterns {
        size_t n;
        bool need_path;
        struct pattern p[];
};

/* "[...]" at g against c: the length of the class (past its ']'), 0 when
 * c is not in it, -1 when g is no class (no closing ']': a literal '['). */
static int class_match(const char *g, char c, bool *in)
{
        const char *p = g + 1;
        bool neg = *p == '!' || *p == '^';
        if (neg)
                p++;
        bool hit = false;
        bool first = true;
        for (; *p && (first || *p != ']'); first = false) {
                char lo = *p == '\\' && p[1] ? *++p : *p;
                p++;
                char hi = lo;
                if (*p == '-' && p[1] && p[1] != ']') {
                        p++;
                        hi = *p == '\\' && p[1] ? *++p : *p;
                        p++;
                }
                if ((unsigned char)c >= (unsigned char)lo &&
                    (unsigned char)c <= (unsigned char)hi)
                        hit = true;
        }
        if (*p != ']')
                return -1;
        *in = c != '/' && hit != neg;
        return (int)(p + 1 - g);
}

/* What glob() found: as rsync's wildmatch, a failure can say that no
 * later start of a '*' can match either (G_ABORT_ALL: the text ran out),
 * or none short of an outer "**" (G_ABORT_STAR: a '*' met a '/'), which
 * keeps patterns of many stars from taking exponential time. */
enum glob_res { G_MATCH, G_NO, G_ABORT_ALL, G_ABORT_STAR };

static enum glob_res glob(const char *g, const char *s)
{
        for (; *g; g++, s++) {
                if (!*s && *g != '*')
                        return G_ABORT_ALL;
                switch (*g) {
                case '\\':
                        if (g[1])
                                g++;
                        if (*s != *g)
                                return G_NO;
                        continue;
                case '?':
                        if (*s == '/')
                                return G_NO;
                        continue;
                case '*': {
                        bool any = g[1] == '*';
                        while (*g == '*')
                                g++;
                        if (!*g) /* "**" takes the rest, '*' up to a '/' */
                                return any || !strchr(s, '/') ? G_MATCH : G_NO;
                        for (; *s; s++) {
                                enum glob_res r = glob(g, s);
                                if (r != G_NO) {
                                        if (!any || r != G_ABORT_STAR)
                                                return r;
                                } else if (!any && *s == '/') {
                                        return G_ABORT_STAR;
                                }
                        }
                        return G_ABORT_ALL;
                }
                case '[': {
                        bool in = false;
                        int len = class_match(g, *s, &in);
                        if (len < 0)
                                break; /* no class: a literal '[' */
                        if (!in)
                                return G_NO;
                        g += len - 1;
                        continue;
                }
                default: break;
                }
                if (*g != *s)
                        return G_NO;
        }
        return *s ? G_NO : G_MATCH;
}

bool ferry_glob_match(const char *g, const char *s)
{
        return glob(g, s) == G_MATCH;
}

static int compile(const char *src, bool include, struct pattern *p,
                   const char **why)
{
        size_t len = strlen(src);
        *p = (struct pattern){.include = include};
        if (!len || !strcmp(src, "/") || !strcmp(src, "//")) {
                *why = "an empty pattern";
                return EINVAL;
        }
        if (!strcmp(src, "!")) {
                *why = "'!' (rsync's rule-list reset) is not supported";
                return EINVAL;
        }
        if (strstr(src, "***")) {
                *why = "'***' is not supported (write 'dir/' and 'dir/**')";
                return EINVAL;
        }
        p->dir_only = len > 1 && src[len - 1] == '/';
        if (p->dir_only)
                len--;
        const char *start = src;
        if (*start == '/') {
                start++;
                len--;
                p->anchored = p->whole_path = true;
        }
        if (!len || *start == '/' || start[len - 1] == '/') {
                *why = "an empty pattern";
                return EINVAL;
        }
        p->glob = strndup(start, len);
        if (!p->glob)
                return ENOMEM;
        if (strchr(p->glob, '/') || strstr(p->glob, "**"))
                p->whole_path = true;
        return 0;
}

int ferry_patterns_new_rules(const struct ferry_filter_rule *rules, size_t n,
                             struct ferry_patterns **out, const char **why)
{
        const char *dummy;
        if (!why)
                why = &dummy;
        *out = NULL;
        if (!n)
                return 0;
        struct ferry_patterns *ps =
                calloc(1, sizeof(*ps) + n * sizeof(struct pattern));
        if (!ps)
                return ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int rc = compile(rules[i].pattern, rules[i].include, &ps->p[i],
                                 why);
                if (rc) {
                        free(ps->p[i].glob);
                        ferry_patterns_free(ps);
                        return rc;
                }
                ps->n++;
                ps->need_path |= ps->p[i].whole_path;
        }
        *out = ps;
        return 0;
}

int ferry_patterns_new(const char *const *pats, size_t n,
                       struct ferry_patterns **out)
{
        *out = NULL;
        if (!n)
                return 0;
        struct ferry_filter_rule *r = calloc(n, sizeof(*r));
        if (!r)
                return ENOMEM;
        for (size_t i = 0; i < n; i++)
                r[i] = (struct ferry_filter_rule){pats[i], false};
        int rc = ferry_patterns_new_rules(r, n, out, NULL);
        free(r);
        return rc;
}

void ferry_patterns_free(struct ferry_patterns *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                free(p->p[i].glob);
        free(p);
}

/* An unanchored path pattern matches the path or any end of it that
 * starts after a '/'. */
static bool path_match(const struct pattern *pt, const char *rel)
{
        if (ferry_glob_match(pt->glob, rel))
                return true;
        if (pt->anchored)
                return false;
        for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/'))
                if (ferry_glob_match(pt->glob, s + 1))
                        return true;
        return false;
}

enum ferry_rule_hit ferry_patterns_decide(const struct ferry_patterns *p,
                                          const char *rel, const char *name,
                                          bool is_dir)
{
        if (!p)
                return FERRY_RULE_NONE;
        for (size_t i = 0; i < p->n; i++) {
                const struct pattern *pt = &p->p[i];
                if (pt->dir_only && !is_dir)
                        continue;
                bool hit = pt->whole_path
                                   ? rel && path_match(pt, rel)
                                   : name && ferry_glob_match(pt->glob, name);
                if (hit)
                        return pt->include ? FERRY_RULE_INCLUDE
                                           : FERRY_RULE_EXCLUDE;
        }
        return FERRY_RULE_NONE;
}

bool ferry_patterns_match(const struct ferry_patterns *p, const char *rel,
                          const char *name, bool is_dir)
{
        return ferry_patterns_decide(p, rel, name, is_dir) ==
               FERRY_RULE_EXCLUDE;
}

bool ferry_patterns_need_path(const struct ferry_patterns *p)
{
        return p && p->need_path;
}
