/*
 * job_move.c - a re-pointed job's manifest follows it (job.h).
 *
 * `ferry --adopt --manifest OLD NEWSRC NEWDST` points a job whose trees
 * moved at the new paths (manifest/meta.c). When OLD is the default
 * manifest of the old paths (the state directory's file of that pair),
 * it is renamed to the default manifest of the new ones, so that later
 * runs, `ferry status NEWSRC NEWDST` and `ferry export` find it without
 * --manifest, as they found it before the move. A manifest the user named
 * elsewhere stays where it is, and so does one when the new pair has a
 * manifest already (another job: never replaced). The rename is made with
 * the manifest closed and both job locks held (job.c), only when SQLite
 * left no -wal or -shm beside it (a reader has it open, or a crash left a
 * log to recover): then the job keeps its file, and --manifest names it.
 */
#define _GNU_SOURCE
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool same_file(const char *a, const char *b)
{
        struct stat x, y;
        return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev &&
               x.st_ino == y.st_ino;
}

bool ferry_job_move_wanted(const char *path, const char *old_src,
                           const char *old_dst, const char *src,
                           const char *dst, char **to)
{
        struct ferry_error err;
        char *was = NULL;
        *to = NULL;
        bool wanted = !ferry_job_default_manifest(old_src, old_dst, false, &was,
                                                  &err) &&
                      same_file(path, was) &&
                      !ferry_job_default_manifest(src, dst, true, to, &err) &&
                      access(*to, F_OK) && errno == ENOENT;
        free(was);
        if (!wanted) {
                free(*to);
                *to = NULL;
        }
        return wanted;
}

/* Whether path + suffix exists (or cannot be told). */
static bool companion(const char *path, const char *suffix)
{
        char *p = NULL;
        if (asprintf(&p, "%s%s", path, suffix) < 0)
                return true;
        bool there = access(p, F_OK) == 0 || errno != ENOENT;
        free(p);
        return there;
}

int ferry_job_move_files(const char *from, const char *to)
{
        if (companion(from, "-wal") || companion(from, "-shm") ||
            companion(from, "-journal"))
                return EBUSY;
        if (rename(from, to))
                return errno;
        /* the new name durable: after a power cut the old one would do
         * too (--adopt --manifest OLD again), but not for long */
        char *dir = strdup(to), *slash = dir ? strrchr(dir, '/') : NULL;
        if (slash) {
                *slash = '\0';
                int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd >= 0) {
                        fsync(fd);
                        close(fd);
                }
        }
        free(dir);
        return 0;
}
