/*
 * names_probe.c - learning which names DST can hold (ferry_names_probe,
 * names.h).
 *
 * A plain probe file is created in DST's root; looking it up in upper case
 * tells whether names are compared without case. Then a name holding every
 * candidate byte (control characters, DEL and " * : < > ? \ |) is tried;
 * when the file system refuses it, each byte is tried alone. Trailing dot
 * and space are refused when the create fails or the file appears without
 * them (Windows servers strip them). The probes go through the plain
 * system calls, not fsio, so that they do not count in the fault injection
 * of the tests. The directory's times are given back afterwards.
 *
 * The probe files are named after the run's pid, so that two runs probing
 * one directory never take each other's files. A run killed between a
 * create and its unlink (kill -9, a power cut) leaves one behind that no
 * later run would know for its own: so a run notes its pid in the
 * manifest before it probes (ferry_probe_begin), and the next run of the
 * job to probe removes the exact names the noted run's probes make, and
 * nothing else (ferry_probe_sweep).
 *
 * A dry run makes no file: ferry_names_probe_case looks up a name DST
 * already holds in the other case instead (an adopting dry run always
 * has some).
 */
#define _GNU_SOURCE
#include "names.h"

#include "manifest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char special[] = "\"*:<>?\\|";

/* The manifest note naming the last run that began probing DST. */
#define PROBE_KEY "dst_probe_pid"

static int probe_create(int dirfd, const char *name)
{
        int fd = openat(dirfd, name,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600);
        if (fd < 0)
                return errno;
        close(fd);
        return 0;
}

static bool probe_exists(int dirfd, const char *name)
{
        struct stat st;
        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

void ferry_probe_name(char *out, size_t size, long pid, const char *middle,
                      const char *tail)
{
        snprintf(out, size, ".ferry-probe.%ld%s.ferry-part%s", pid, middle,
                 tail);
}

static void probe_name(char *out, size_t size, const char *middle,
                       const char *tail)
{
        ferry_probe_name(out, size, (long)getpid(), middle, tail);
}

/* True when a file named with middle can be created (and removes it). */
static bool probe_holds(int dirfd, const char *middle)
{
        char name[NAME_MAX + 1];
        probe_name(name, sizeof(name), middle, "");
        if (probe_create(dirfd, name))
                return false;
        unlinkat(dirfd, name, 0);
        return true;
}

/* Trailing ch: refused, or stored without it. */
static bool probe_trailing_refused(int dirfd, char ch)
{
        char name[NAME_MAX + 1], bare[NAME_MAX + 1];
        char tail[2] = {ch, '\0'};
        probe_name(name, sizeof(name), ".t", tail);
        probe_name(bare, sizeof(bare), ".t", "");
        if (probe_create(dirfd, name))
                return true;
        bool stripped = probe_exists(dirfd, bare);
        unlinkat(dirfd, name, 0);
        unlinkat(dirfd, bare, 0);
        return stripped;
}

/* The candidate bytes, as one NUL-terminated string. */
static void candidate_bytes(char all[64])
{
        size_t n = 0;
        for (int ch = 1; ch < 0x20; ch++)
                all[n++] = (char)ch;
        all[n++] = 0x7f;
        memcpy(all + n, special, sizeof(special)); /* with its NUL */
}

static void probe_bytes(int dirfd, struct ferry_name_rules *r)
{
        char all[64];
        candidate_bytes(all);
        if (probe_holds(dirfd, all))
                return;
        for (size_t i = 0; all[i]; i++) {
                char one[2] = {all[i], '\0'};
                r->refused[(unsigned char)all[i]] = !probe_holds(dirfd, one);
        }
}

static int probe_all(int dirfd, struct ferry_name_rules *r)
{
        char plain[NAME_MAX + 1], upper[NAME_MAX + 1];
        probe_name(plain, sizeof(plain), ".c", "");
        int rc = probe_create(dirfd, plain);
        if (rc == EEXIST) { /* a leftover of a crashed run of this pid */
                unlinkat(dirfd, plain, 0);
                rc = probe_create(dirfd, plain);
        }
        if (rc)
                return rc;
        size_t i;
        for (i = 0; plain[i]; i++)
                upper[i] = plain[i] >= 'a' && plain[i] <= 'z'
                                   ? (char)(plain[i] - 'a' + 'A')
                                   : plain[i];
        upper[i] = '\0';
        r->case_insensitive = probe_exists(dirfd, upper);
        unlinkat(dirfd, plain, 0);
        probe_bytes(dirfd, r);
        r->no_trailing_dot = probe_trailing_refused(dirfd, '.');
        r->no_trailing_space = probe_trailing_refused(dirfd, ' ');
        return 0;
}

int ferry_names_probe(int dirfd, struct ferry_name_rules *r)
{
        memset(r, 0, sizeof(*r));
        struct stat before;
        bool have = fstat(dirfd, &before) == 0;
        int rc = probe_all(dirfd, r);
        if (have)
                ferry_probe_restore_times(dirfd, &before.st_atim,
                                          &before.st_mtim);
        return rc;
}

/* Every name the probes of pid make: this file's middles (".c", ".t"
 * with its tails, the candidate bytes together and one by one) and
 * dstcaps.c's one-letter ones. */
void ferry_probe_sweep(int dirfd, long pid)
{
        static const char *const fixed[][2] = {
                {".c", ""}, {".t", ""}, {".t", "."}, {".t", " "}, {".m", ""},
                {".l", ""}, {".h", ""}, {".p", ""},  {".r", ""}};
        char name[NAME_MAX + 1], all[64];
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
                ferry_probe_name(name, sizeof(name), pid, fixed[i][0],
                                 fixed[i][1]);
                unlinkat(dirfd, name, 0);
        }
        candidate_bytes(all);
        ferry_probe_name(name, sizeof(name), pid, all, "");
        unlinkat(dirfd, name, 0);
        for (size_t i = 0; all[i]; i++) {
                char one[2] = {all[i], '\0'};
                ferry_probe_name(name, sizeof(name), pid, one, "");
                unlinkat(dirfd, name, 0);
        }
}

int ferry_probe_begin(struct ferry_manifest *m, int dirfd)
{
        char text[32], mine[32];
        if (ferry_manifest_note(m, PROBE_KEY, text, sizeof(text)))
                return -1;
        snprintf(mine, sizeof(mine), "%ld", (long)getpid());
        if (!strcmp(text, mine))
                return 0;
        char *end;
        long pid = strtol(text, &end, 10);
        if (pid > 0 && !*end)
                ferry_probe_sweep(dirfd, pid);
        return ferry_manifest_set_note(m, PROBE_KEY, mine);
}

void ferry_probe_restore_times(int dirfd, const struct timespec *atim,
                               const struct timespec *mtim)
{
        struct stat after;
        if (fstat(dirfd, &after) || (after.st_mtim.tv_sec == mtim->tv_sec &&
                                     after.st_mtim.tv_nsec == mtim->tv_nsec))
                return;
        struct timespec ts[2] = {*atim, *mtim};
        futimens(dirfd, ts);
}

/* name with each ASCII letter's case swapped into out; false when it has
 * none (or does not fit). */
static bool swap_case(const char *name, char *out, size_t size)
{
        bool any = false;
        size_t i = 0;
        for (; name[i] && i + 1 < size; i++) {
                char c = name[i];
                bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
                any |= upper || lower;
                out[i] = upper   ? (char)(c - 'A' + 'a')
                         : lower ? (char)(c - 'a' + 'A')
                                 : c;
        }
        out[i] = '\0';
        return any && !name[i];
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first names (up to max) of the directory dirfd, sorted; *n of them
 * in *out (free each and the array). */
static int list_names(int dirfd, size_t max, char ***out, size_t *n)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        char **v = d ? calloc(max, sizeof(*v)) : NULL;
        *out = v;
        *n = 0;
        if (!v) {
                if (d)
                        closedir(d);
                else if (fd >= 0)
                        close(fd);
                return ENOMEM;
        }
        struct dirent *e;
        while (*n < max && (e = readdir(d)) && (v[*n] = strdup(e->d_name)))
                ++*n;
        closedir(d);
        qsort(v, *n, sizeof(*v), cmp_name);
        return 0;
}

int ferry_names_probe_case(int dirfd)
{
        char **v = NULL, other[NAME_MAX + 1];
        size_t n = 0;
        int known = -1;
        if (list_names(dirfd, 4096, &v, &n))
                return -1;
        /* a name whose other spelling is not listed: found by a lookup
         * all the same, it is the same entry (exfat-fuse numbers the two
         * lookups' inodes apart: the listing tells, not st_ino) */
        for (size_t i = 0; i < n && known < 0; i++) {
                char *key = other;
                struct stat st;
                if (!swap_case(v[i], other, sizeof(other)) ||
                    bsearch(&key, v, n, sizeof(*v), cmp_name))
                        continue;
                if (!fstatat(dirfd, other, &st, AT_SYMLINK_NOFOLLOW))
                        known = 1;
                else if (errno == ENOENT)
                        known = 0;
        }
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
        return known;
}
