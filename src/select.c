/*
 * select.c - the selection of a run (select.h): building it from the
 * options (the rules, the --files-from list read and normalized, the
 * sizes), the scan's question about an entry, the question about a row
 * the scan did not see (protected from removal and --delete), the report
 * of listed paths the scan never found.
 */
#define _GNU_SOURCE
#include "select.h"

#include "job.h"
#include "manifest_types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

struct ferry_select {
        struct ferry_patterns *rules; /* NULL: none */
        /* --files-from: listed paths and the directories above them,
         * each sorted and unique; found[i]: files[i] met by the scan */
        bool have_files;
        char **files, **anc;
        size_t n_files, n_anc;
        atomic_bool *found;
        int64_t min_size, max_size; /* -1: none */
};

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool in_set(char *const *set, size_t n, const char *s)
{
        return n && bsearch(&s, set, n, sizeof(*set), cmp_str);
}

/* Sorts and drops duplicates. */
static size_t uniq(char **v, size_t n)
{
        if (!n)
                return 0;
        qsort(v, n, sizeof(*v), cmp_str);
        size_t k = 1;
        for (size_t i = 1; i < n; i++) {
                if (strcmp(v[i], v[k - 1]))
                        v[k++] = v[i];
                else
                        free(v[i]);
        }
        return k;
}

/* A --files-from line into a path relative to SRC, in place: NULL for
 * nothing (an empty line, "." or "/"), *bad for a ".." component. */
static char *normalize(char *p, bool *bad)
{
        char *w = p;
        const char *r = p;
        while (*r) {
                while (*r == '/')
                        r++;
                const char *end = strchrnul(r, '/');
                size_t len = (size_t)(end - r);
                if (len == 2 && r[0] == '.' && r[1] == '.') {
                        *bad = true;
                        return NULL;
                }
                if (len && !(len == 1 && *r == '.')) {
                        if (w != p)
                                *w++ = '/';
                        memmove(w, r, len);
                        w += len;
                }
                r = end;
        }
        *w = '\0';
        return *p ? p : NULL;
}

static int push(char ***v, size_t *n, size_t *cap, char *s)
{
        if (*n == *cap) {
                size_t c = *cap ? 2 * *cap : 64;
                char **nv = realloc(*v, c * sizeof(**v));
                if (!nv)
                        return ENOMEM;
                *v = nv;
                *cap = c;
        }
        (*v)[(*n)++] = s;
        return 0;
}

/* Each proper leading directory of the listed paths into s->anc. */
static int add_ancestors(struct ferry_select *s)
{
        size_t cap = 0;
        for (size_t i = 0; i < s->n_files; i++) {
                const char *f = s->files[i];
                for (const char *sl = strchr(f, '/'); sl;
                     sl = strchr(sl + 1, '/')) {
                        char *a = strndup(f, (size_t)(sl - f));
                        if (!a || push(&s->anc, &s->n_anc, &cap, a)) {
                                free(a);
                                return ENOMEM;
                        }
                }
        }
        s->n_anc = uniq(s->anc, s->n_anc);
        return 0;
}

static int read_list(struct ferry_select *s, const char *path, bool from0,
                     struct ferry_error *err)
{
        bool std = !strcmp(path, "-");
        FILE *f = std ? stdin : fopen(path, "re");
        if (!f)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "cannot read --files-from '%s': %s", path,
                                      strerror(errno));
        char *line = NULL;
        size_t lcap = 0, cap = 0, lineno = 0;
        ssize_t got;
        int rc = 0;
        errno = 0;
        while (!rc &&
               (got = getdelim(&line, &lcap, from0 ? '\0' : '\n', f)) > 0) {
                lineno++;
                if (!from0 && line[got - 1] == '\n')
                        line[--got] = '\0';
                if (!from0 && got && line[got - 1] == '\r')
                        line[--got] = '\0';
                bool bad = false;
                char *p = normalize(line, &bad);
                if (bad)
                        rc = ferry_job_errf(err, FERRY_EUSAGE,
                                            "--files-from '%s', entry %zu: "
                                            "'..' is not allowed",
                                            path, lineno);
                else if (p && push(&s->files, &s->n_files, &cap, strdup(p)))
                        rc = ferry_job_errf(err, FERRY_EINTERNAL,
                                            "out of memory");
                else if (p && !s->files[s->n_files - 1])
                        rc = ferry_job_errf(err, FERRY_EINTERNAL,
                                            "out of memory");
                errno = 0;
        }
        if (!rc && ferror(f))
                rc = ferry_job_errf(err, FERRY_EUSAGE,
                                    "cannot read --files-from '%s': %s", path,
                                    strerror(errno ? errno : EIO));
        free(line);
        if (!std)
                fclose(f);
        if (rc)
                return rc;
        s->have_files = true;
        s->n_files = uniq(s->files, s->n_files);
        if (add_ancestors(s))
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        s->found = calloc(s->n_files ? s->n_files : 1, sizeof(*s->found));
        return s->found ? 0
                        : ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
}

static int make_rules(struct ferry_select *s, const struct ferry_options *opt,
                      struct ferry_error *err)
{
        size_t n = opt->n_filters + opt->n_excludes;
        if (!n)
                return 0;
        struct ferry_filter_rule *r = calloc(n, sizeof(*r));
        if (!r)
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        for (size_t i = 0; i < opt->n_filters; i++)
                r[i] = opt->filters[i];
        for (size_t i = 0; i < opt->n_excludes; i++)
                r[opt->n_filters + i] =
                        (struct ferry_filter_rule){opt->excludes[i], false};
        const char *why = "out of memory";
        int rc = ferry_patterns_new_rules(r, n, &s->rules, &why);
        size_t bad = 0;
        if (rc == EINVAL) /* which one: compile them one at a time */
                while (bad < n &&
                       !ferry_patterns_new_rules(&r[bad], 1, &s->rules, NULL)) {
                        ferry_patterns_free(s->rules);
                        s->rules = NULL;
                        bad++;
                }
        if (rc == EINVAL)
                rc = ferry_job_errf(
                        err, FERRY_EUSAGE, "bad --%s pattern '%s': %s",
                        bad < n && r[bad].include ? "include" : "exclude",
                        bad < n ? r[bad].pattern : "", why);
        else if (rc)
                rc = ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        free(r);
        return rc;
}

int ferry_select_new(const struct ferry_options *opt, struct ferry_select **out,
                     struct ferry_error *err)
{
        *out = NULL;
        if (opt->min_size < -1 || opt->max_size < -1)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "--min-size and --max-size must not "
                                      "be negative");
        if (opt->min_size >= 0 && opt->max_size >= 0 &&
            opt->min_size > opt->max_size)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "--min-size is above --max-size: "
                                      "nothing would be copied");
        if (!opt->n_filters && !opt->n_excludes && !opt->files_from &&
            opt->min_size < 0 && opt->max_size < 0)
                return 0;
        struct ferry_select *s = calloc(1, sizeof(*s));
        if (!s)
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        s->min_size = opt->min_size;
        s->max_size = opt->max_size;
        int rc = make_rules(s, opt, err);
        if (!rc && opt->files_from)
                rc = read_list(s, opt->files_from, opt->from0, err);
        if (rc) {
                ferry_select_free(s);
                return rc;
        }
        *out = s;
        return 0;
}

void ferry_select_free(struct ferry_select *s)
{
        if (!s)
                return;
        ferry_patterns_free(s->rules);
        for (size_t i = 0; i < s->n_files; i++)
                free(s->files[i]);
        for (size_t i = 0; i < s->n_anc; i++)
                free(s->anc[i]);
        free(s->files);
        free(s->anc);
        free(s->found);
        free(s);
}

bool ferry_select_need_path(const struct ferry_select *s)
{
        return s && (s->have_files || ferry_patterns_need_path(s->rules));
}

bool ferry_select_named(const struct ferry_select *s, const char *rel)
{
        if (!s || !s->have_files || !rel)
                return true;
        return in_set(s->files, s->n_files, rel) ||
               in_set(s->anc, s->n_anc, rel);
}

bool ferry_select_sizes(const struct ferry_select *s)
{
        return s && (s->min_size >= 0 || s->max_size >= 0);
}

bool ferry_select_size_out(const struct ferry_select *s, uint64_t size)
{
        return s && ((s->min_size >= 0 && size < (uint64_t)s->min_size) ||
                     (s->max_size >= 0 && size > (uint64_t)s->max_size));
}

bool ferry_select_entry(const struct ferry_select *s, const char *rel,
                        const char *name, bool is_dir, bool is_reg,
                        uint64_t size)
{
        if (!s)
                return true;
        if (s->have_files && rel) {
                char *const *hit = s->n_files
                                           ? bsearch(&rel, s->files, s->n_files,
                                                     sizeof(*s->files), cmp_str)
                                           : NULL;
                if (hit)
                        atomic_store_explicit(&s->found[hit - s->files], true,
                                              memory_order_relaxed);
                else if (!is_dir || !in_set(s->anc, s->n_anc, rel))
                        return false;
        }
        if (ferry_patterns_match(s->rules, rel, name, is_dir))
                return false;
        return !(is_reg && ferry_select_size_out(s, size));
}

bool ferry_select_protects(const struct ferry_select *s, const char *path,
                           bool is_dir)
{
        if (!s)
                return false;
        if (s->have_files && !in_set(s->files, s->n_files, path) &&
            !(is_dir && in_set(s->anc, s->n_anc, path)))
                return true;
        if (!s->rules)
                return false;
        char *copy = strdup(path);
        if (!copy)
                return true; /* out of memory: keep it, the safe side */
        /* an excluded directory above protects everything below it */
        bool hit = false;
        for (char *sl = copy; !hit;) {
                char *next = strchr(sl, '/');
                if (next)
                        *next = '\0';
                const char *base = strrchr(copy, '/');
                base = base ? base + 1 : copy;
                hit = ferry_patterns_match(s->rules, copy, base,
                                           next ? true : is_dir);
                if (!next)
                        break;
                *next = '/';
                sl = next + 1;
        }
        free(copy);
        return hit;
}

char *ferry_select_files_digest(const struct ferry_select *s, bool *oom)
{
        *oom = false;
        if (!s || !s->have_files)
                return NULL;
        XXH3_state_t *h = XXH3_createState();
        char *out = malloc(64);
        if (!h || !out) {
                XXH3_freeState(h);
                free(out);
                *oom = true;
                return NULL;
        }
        XXH3_128bits_reset(h);
        for (size_t i = 0; i < s->n_files; i++) /* sorted and unique */
                XXH3_128bits_update(h, s->files[i], strlen(s->files[i]) + 1);
        XXH128_hash_t d = XXH3_128bits_digest(h);
        XXH3_freeState(h);
        snprintf(out, 64, "%zu path%s, xxh128 %016llx%016llx", s->n_files,
                 s->n_files == 1 ? "" : "s", (unsigned long long)d.high64,
                 (unsigned long long)d.low64);
        return out;
}

const char *ferry_select_next_unfound(const struct ferry_select *s, size_t *i)
{
        for (; s && *i < s->n_files; (*i)++)
                if (!atomic_load_explicit(&s->found[*i], memory_order_relaxed))
                        return s->files[(*i)++];
        return NULL;
}

size_t ferry_select_missing(const struct ferry_select *s,
                            const struct ferry_options *opt)
{
        size_t n = 0, i = 0;
        const char *path;
        while ((path = ferry_select_next_unfound(s, &i))) {
                if (opt->event)
                        opt->event(FERRY_EV_WARNING, path, strlen(path),
                                   FERRY_SELECT_MISSING, NULL, opt->cb_arg);
                n++;
        }
        return n;
}

bool ferry_select_keeps(const struct ferry_select *s, int srcfd,
                        const char *dir, size_t dlen, const char *name,
                        size_t nlen, int type, uint64_t size, bool may_stat)
{
        if (!s)
                return false;
        char *path = malloc(dlen + nlen + 2);
        if (!path)
                return true; /* the safe side: not removed */
        memcpy(path, dir, dlen);
        size_t len = dlen;
        if (name) {
                if (dlen)
                        path[len++] = '/';
                memcpy(path + len, name, nlen);
                len += nlen;
        }
        path[len] = '\0';
        bool keep = ferry_select_protects(s, path, !name);
        if (!keep && name && type == MF_FT_REG && ferry_select_sizes(s)) {
                /* the bounds leave it out now, or left it out when it had
                 * the size recorded; the recorded size may be old (a file
                 * that grew past --max-size): SRC says */
                keep = ferry_select_size_out(s, size);
                struct stat st;
                if (!keep && may_stat)
                        keep = fstatat(srcfd, path, &st, AT_SYMLINK_NOFOLLOW)
                                       ? errno != ENOENT && errno != ENOTDIR
                                       : S_ISREG(st.st_mode);
        }
        free(path);
        return keep;
}
