/*
 * pattern.c - exclude patterns (pattern.h). fnmatch does the
 * matching; this module only decides what each pattern is matched against.
 */
#define _GNU_SOURCE
#include "pattern.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

struct pattern {
        char *glob;
        bool dir_only;
        bool whole_path;
};

struct ferry_patterns {
        size_t n;
        bool need_path;
        struct pattern p[];
};

static int compile(const char *src, struct pattern *p)
{
        size_t len = strlen(src);
        p->dir_only = len > 1 && src[len - 1] == '/';
        if (p->dir_only)
                len--;
        const char *start = src;
        if (*start == '/') {
                start++;
                len--;
                p->whole_path = true;
        }
        if (!len)
                return EINVAL;
        if (memchr(start, '/', len))
                p->whole_path = true;
        p->glob = strndup(start, len);
        return p->glob ? 0 : ENOMEM;
}

int ferry_patterns_new(const char *const *pats, size_t n,
                       struct ferry_patterns **out)
{
        *out = NULL;
        if (!n)
                return 0;
        struct ferry_patterns *ps =
                calloc(1, sizeof(*ps) + n * sizeof(struct pattern));
        if (!ps)
                return ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int rc = compile(pats[i], &ps->p[i]);
                if (rc) {
                        ferry_patterns_free(ps);
                        return rc;
                }
                ps->n++;
                ps->need_path |= ps->p[i].whole_path;
        }
        *out = ps;
        return 0;
}

void ferry_patterns_free(struct ferry_patterns *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->n; i++)
                free(p->p[i].glob);
        free(p);
}

bool ferry_patterns_match(const struct ferry_patterns *p, const char *rel,
                          const char *name, bool is_dir)
{
        if (!p)
                return false;
        for (size_t i = 0; i < p->n; i++) {
                const struct pattern *pt = &p->p[i];
                if (pt->dir_only && !is_dir)
                        continue;
                const char *subject = pt->whole_path ? rel : name;
                if (subject && fnmatch(pt->glob, subject,
                                       pt->whole_path ? FNM_PATHNAME : 0) == 0)
                        return true;
        }
        return false;
}

bool ferry_patterns_need_path(const struct ferry_patterns *p)
{
        return p && p->need_path;
}
