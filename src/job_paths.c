/*
 * job_paths.c - where a job's trees and manifest are (job.h).
 *
 * Owns the resolving of SRC and DST to real paths (DST may not exist yet:
 * then its parent must), the default manifest location, one file per
 * SRC/DST pair named by the hash of their real paths, in the state
 * directory, and the list of the jobs there (ferry_status_list, ferry.h).
 */
#define _GNU_SOURCE
#include "job.h"

#include "buf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <xxhash.h>

int ferry_job_resolve_src(const char *src, char **out, struct ferry_error *err)
{
        struct stat st;
        if (stat(src, &st))
                return ferry_job_errf(err, FERRY_EPATH, "source '%s': %s", src,
                                      strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return ferry_job_errf(err, FERRY_EPATH,
                                      "source '%s' is not a directory", src);
        *out = realpath(src, NULL);
        if (!*out)
                return ferry_job_errf(err, FERRY_EPATH, "source '%s': %s", src,
                                      strerror(errno));
        return 0;
}

int ferry_job_resolve_dst(const char *dst, char **out, bool *exists,
                          struct ferry_error *err)
{
        struct stat st;
        *exists = stat(dst, &st) == 0;
        if (*exists) {
                if (!S_ISDIR(st.st_mode))
                        return ferry_job_errf(
                                err, FERRY_EPATH,
                                "destination '%s' is not a directory", dst);
                *out = realpath(dst, NULL);
                return *out ? 0
                            : ferry_job_errf(err, FERRY_EPATH,
                                             "destination '%s': %s", dst,
                                             strerror(errno));
        }
        if (errno != ENOENT)
                return ferry_job_errf(err, FERRY_EPATH, "destination '%s': %s",
                                      dst, strerror(errno));
        char *copy = strdup(dst), *slash;
        if (!copy)
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        size_t len = strlen(copy);
        while (len > 1 && copy[len - 1] == '/')
                copy[--len] = '\0';
        slash = strrchr(copy, '/');
        const char *name = slash ? slash + 1 : copy;
        char *parent = NULL;
        if (slash == copy)
                parent = realpath("/", NULL);
        else if (slash) {
                *slash = '\0';
                parent = realpath(copy, NULL);
        } else
                parent = realpath(".", NULL);
        int rc = 0;
        if (!parent)
                rc = ferry_job_errf(err, FERRY_EPATH,
                                    "destination '%s': parent directory: %s",
                                    dst, strerror(errno));
        else if (!(*out = ferry_buf_join(parent, name)))
                rc = ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        free(parent);
        free(copy);
        return rc;
}

static int make_state_dir(char *path)
{
        for (char *p = path + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                int rc = mkdir(path, 0700) && errno != EEXIST ? errno : 0;
                *p = '/';
                if (rc)
                        return rc;
        }
        return mkdir(path, 0700) && errno != EEXIST ? errno : 0;
}

/* $XDG_STATE_HOME/ferry, else ~/.local/state/ferry, into *dir (caller
 * frees). */
static int state_dir(char **dir, struct ferry_error *err)
{
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");
        int n;
        *dir = NULL;
        if (xdg && xdg[0] == '/')
                n = asprintf(dir, "%s/ferry", xdg);
        else if (home && home[0])
                n = asprintf(dir, "%s/.local/state/ferry", home);
        else
                return ferry_job_errf(
                        err, FERRY_EMANIFEST,
                        "no HOME or XDG_STATE_HOME: use --manifest FILE");
        if (n < 0) {
                *dir = NULL;
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        }
        return 0;
}

int ferry_job_default_manifest(const char *src, const char *dst, bool create,
                               char **out, struct ferry_error *err)
{
        char *dir = NULL;
        int n = state_dir(&dir, err);
        if (n)
                return n;
        int rc = create ? make_state_dir(dir) : 0;
        if (rc) {
                ferry_job_errf(err, FERRY_EMANIFEST, "cannot create '%s': %s",
                               dir, strerror(rc));
                free(dir);
                return FERRY_EMANIFEST;
        }
        XXH64_state_t *h = XXH64_createState();
        if (!h) {
                free(dir);
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        }
        XXH64_reset(h, 0);
        XXH64_update(h, src, strlen(src) + 1);
        XXH64_update(h, dst, strlen(dst) + 1);
        unsigned long long key = XXH64_digest(h);
        XXH64_freeState(h);
        n = asprintf(out, "%s/%016llx.db", dir, key);
        free(dir);
        return n < 0 ? ferry_job_errf(err, FERRY_EINTERNAL, "out of memory")
                     : 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The manifests of dir ("*.db"), sorted by name, into *names (caller
 * frees each and the array). */
static int list_manifests(const char *dir, char ***names, size_t *n,
                          struct ferry_error *err)
{
        *names = NULL;
        *n = 0;
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 /* no job yet */
                                       : ferry_job_errf(err, FERRY_EMANIFEST,
                                                        "cannot list '%s': %s",
                                                        dir, strerror(errno));
        size_t cap = 0;
        int rc = 0;
        struct dirent *e;
        while (!rc && (e = readdir(d))) {
                size_t len = strlen(e->d_name);
                if (len < 4 || strcmp(e->d_name + len - 3, ".db"))
                        continue;
                if (*n == cap) {
                        cap = cap ? 2 * cap : 16;
                        char **p = realloc(*names, cap * sizeof(*p));
                        if (!p)
                                break;
                        *names = p;
                }
                if (!((*names)[*n] = ferry_buf_join(dir, e->d_name)))
                        break;
                (*n)++;
        }
        if (e) /* stopped early: out of memory */
                rc = ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        closedir(d);
        if (*n > 1)
                qsort(*names, *n, sizeof(**names), by_name);
        return rc;
}

int ferry_status_list(ferry_job_list_fn fn, void *arg, char **dir_out,
                      struct ferry_error *err)
{
        char *dir = NULL, **names = NULL;
        size_t n = 0;
        *dir_out = NULL;
        int rc = state_dir(&dir, err);
        if (!rc)
                rc = list_manifests(dir, &names, &n, err);
        struct ferry_status_info *info = rc ? NULL : malloc(sizeof(*info));
        if (!rc && !info)
                rc = ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        for (size_t i = 0; !rc && i < n; i++) {
                struct ferry_error why = {""};
                struct ferry_job_entry e = {names[i], 0, why.msg, info};
                /* a manifest that cannot be read is listed, with why */
                e.code = ferry_status_read(names[i], NULL, NULL, NULL, info,
                                           &why);
                fn(&e, arg);
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        free(info);
        if (rc)
                free(dir);
        else
                *dir_out = dir;
        return rc;
}
