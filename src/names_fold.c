/*
 * names_fold.c - other spellings in SRC (names_fold.h).
 *
 * Owns the cache of SRC directories read for the check: a directory's
 * names sorted without case (ferry_names_casecmp), the last FOLD_DIRS of
 * them kept, as removed rows come in id order and so mostly directory by
 * directory; a directory bigger than FOLD_MAX is read through per row.
 * Moved here from the coordinator (src/coord/), which asks it before
 * --delete removes a row's entry.
 */
#define _GNU_SOURCE
#include "config.h"
#include "names_fold.h"

#include "fsio.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A directory of SRC read once: its names sorted without case, for
 * the check below; a few are kept, as removed rows come in id order and so
 * mostly directory by directory. Bigger directories are not kept. */
#define FOLD_DIRS 4
#define FOLD_MAX  65536

struct fold_dir {
        char *path;   /* relative to SRC, "" for SRC */
        char **names; /* n, sorted by ferry_names_casecmp */
        size_t n;
        bool unknown; /* could not be read */
        bool big;     /* more than FOLD_MAX names: read again per row */
};

struct ferry_fold {
        struct fold_dir dirs[FOLD_DIRS];
        unsigned next; /* the slot to read the next directory into */
};

static int cmp_fold(const void *a, const void *b)
{
        return ferry_names_casecmp(*(char *const *)a, *(char *const *)b);
}

static void fold_free(struct fold_dir *f)
{
        for (size_t i = 0; i < f->n; i++)
                free(f->names[i]);
        free(f->names);
        free(f->path);
        memset(f, 0, sizeof(*f));
}

static void fold_read(int srcfd, struct fold_dir *f)
{
        int fd = -1;
        DIR *d = NULL;
        if (ferry_fsio_open_dir(srcfd, f->path, &fd) || !(d = fdopendir(fd))) {
                ferry_fsio_close(&fd);
                f->unknown = true;
                return;
        }
        size_t cap = 0, max = FOLD_MAX;
#ifdef FERRY_TESTING
        const char *env = getenv("FERRY_FOLD_MAX"); /* t28: the other path */
        if (env)
                max = (size_t)strtoul(env, NULL, 10);
#endif
        struct dirent *de;
        while ((de = readdir(d))) {
                if (f->n == max) {
                        f->big = true;
                        break;
                }
                if (f->n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        char **p = realloc(f->names, ncap * sizeof(*p));
                        if (!p)
                                break;
                        f->names = p;
                        cap = ncap;
                }
                if (!(f->names[f->n] = strdup(de->d_name)))
                        break;
                f->n++;
        }
        f->unknown = de != NULL && !f->big; /* no memory */
        closedir(d);
        qsort(f->names, f->n, sizeof(*f->names), cmp_fold);
}

/* fold_lookup for a directory too big to keep: read it through. */
static int fold_scan(int srcfd, const char *dir, const char *name, bool *exact)
{
        int fd = -1;
        DIR *d = NULL;
        if (ferry_fsio_open_dir(srcfd, dir, &fd) || !(d = fdopendir(fd))) {
                ferry_fsio_close(&fd);
                return 1;
        }
        int other = 0;
        struct dirent *de;
        while (!other && (de = readdir(d)))
                if (!ferry_names_casecmp(de->d_name, name)) {
                        other = strcmp(de->d_name, name) != 0;
                        *exact |= !other;
                }
        closedir(d);
        return other;
}

/* In SRC's directory dir: 1 when it holds another spelling of name (or
 * cannot tell), else 0 with *exact saying whether it holds name itself. */
static int fold_lookup(struct ferry_fold *cache, int srcfd, const char *dir,
                       const char *name, bool *exact)
{
        struct fold_dir *f = NULL;
        for (unsigned i = 0; i < FOLD_DIRS && !f; i++)
                if (cache->dirs[i].path && !strcmp(cache->dirs[i].path, dir))
                        f = &cache->dirs[i];
        if (!f) {
                f = &cache->dirs[cache->next++ % FOLD_DIRS];
                fold_free(f);
                if (!(f->path = strdup(dir)))
                        return 1;
                fold_read(srcfd, f);
        }
        if (f->unknown)
                return 1;
        *exact = false;
        if (f->big)
                return fold_scan(srcfd, dir, name, exact);
        char **hit =
                bsearch(&name, f->names, f->n, sizeof(*f->names), cmp_fold);
        if (!hit)
                return 0;
        char **lo = hit, **hi = hit;
        while (lo > f->names && !ferry_names_casecmp(lo[-1], name))
                lo--;
        while (hi + 1 < f->names + f->n && !ferry_names_casecmp(hi[1], name))
                hi++;
        for (char **p = lo; p <= hi; p++) {
                if (strcmp(*p, name))
                        return 1;
                *exact = true;
        }
        return 0;
}

/* On a case-insensitive DST, the DST path of a removed row may now hold the
 * copy of another SRC file whose path differs only by case (a file or a
 * directory renamed by case): deleting it would delete that copy. Each
 * component of the row's path is looked up under the spelling of the ones
 * before it. */
bool ferry_fold_other_spelling(struct ferry_fold **cache, int srcfd,
                               const struct ferry_names *names, const char *dir,
                               const char *name)
{
        if (!ferry_names_case_insensitive(names))
                return false;
        if (!*cache && !(*cache = calloc(1, sizeof(**cache))))
                return true;
        size_t dl = strlen(dir), nl = strlen(name);
        char *path = malloc(dl + nl + 2);
        if (!path)
                return true;
        if (dl)
                snprintf(path, dl + nl + 2, "%s/%s", dir, name);
        else
                memcpy(path, name, nl + 1);
        bool other = false;
        for (char *c = path;;) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                if (c > path)
                        c[-1] = '\0'; /* path is now the parent of c */
                bool exact = false;
                other = fold_lookup(*cache, srcfd, c > path ? path : "", c,
                                    &exact) != 0;
                if (c > path)
                        c[-1] = '/';
                if (other || !exact || !slash)
                        break;
                *slash = '/';
                c = slash + 1;
        }
        free(path);
        return other;
}

void ferry_fold_free(struct ferry_fold *cache)
{
        for (unsigned i = 0; cache && i < FOLD_DIRS; i++)
                fold_free(&cache->dirs[i]);
        free(cache);
}
