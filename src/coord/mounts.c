/*
 * coord/mounts.c - syncfs of the file systems mounted below DST
 * (sync_mounts_below, internal.h).
 *
 * syncfs of DST's root covers DST's own file system only. The barrier
 * syncs each mount below DST that the files it marks lie on (barrier.c);
 * the finish of a run, whose directory metadata, empty directories and
 * deletions may lie on any of them, syncs them all: every mount point
 * that /proc/self/mountinfo lists below DST's path (the one
 * /proc/self/fd gives DST's descriptor) and that holds another file
 * system than DST's, each file system once. Without /proc nothing more
 * than DST's root is synced, as before.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "fsio.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MOUNTS_MAX 64 /* file systems remembered as synced; past it, again */

/* mountinfo writes space, tab, newline and backslash as \ooo */
static void unescape(char *s)
{
        char *out = s;
        for (; *s; s++) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
                    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
                        *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
                                        (s[3] - '0'));
                        s += 3;
                } else {
                        *out++ = *s;
                }
        }
        *out = '\0';
}

/* The fifth field of a mountinfo line (the mount point), unescaped, or
 * NULL; *ro when its sixth (the mount's own options) says "ro". */
static char *mount_point(char *line, bool *ro)
{
        char *save = NULL, *f = strtok_r(line, " ", &save);
        for (int i = 1; f && i < 5; i++)
                f = strtok_r(NULL, " ", &save);
        char *opts = f ? strtok_r(NULL, " ", &save) : NULL;
        *ro = opts && (!strcmp(opts, "ro") || !strncmp(opts, "ro,", 3));
        if (f)
                unescape(f);
        return f;
}

static bool below(const char *point, const char *dst, size_t len)
{
        if (len == 1) /* DST is / */
                return point[0] == '/' && point[1];
        return !strncmp(point, dst, len) && point[len] == '/';
}

/* syncfs of the mount at point when it is not one of the n file systems
 * in seen (DST's first); 0 or an errno. A mount point that cannot be
 * opened (unmounted meanwhile, not ours to read) holds nothing of ours. */
static int sync_point(const char *point, uint64_t *seen, size_t *n)
{
        int fd = open(point, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        struct ferry_stat st;
        int rc = ferry_fsio_fstat(fd, &st);
        bool known = false;
        for (size_t i = 0; !rc && i < *n; i++)
                known |= seen[i] == st.dev;
        bool covered;
        if (!rc && !known) {
                rc = ferry_fsio_sync_device(fd, &covered);
                if (!rc && *n < MOUNTS_MAX)
                        seen[(*n)++] = st.dev;
        }
        close(fd);
        return rc;
}

int sync_mounts_below(int dstfd)
{
        char link[64], dst[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", dstfd);
        ssize_t len = readlink(link, dst, sizeof(dst) - 1);
        if (len <= 0 || dst[0] != '/')
                return 0;
        dst[len] = '\0';
        uint64_t seen[MOUNTS_MAX];
        size_t n = 0;
        struct ferry_stat root;
        int rc = ferry_fsio_fstat(dstfd, &root);
        if (rc)
                return rc;
        seen[n++] = root.dev;
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return 0;
        char *line = NULL;
        size_t cap = 0;
        while (!rc && getline(&line, &cap, f) > 0) {
                line[strcspn(line, "\n")] = '\0';
                /* a mount that is read-only as mounted holds nothing this
                 * run wrote (one whose file system failed is read-only
                 * in the superblock only: synced, and found failed) */
                bool ro;
                const char *point = mount_point(line, &ro);
                if (point && !ro && below(point, dst, (size_t)len))
                        rc = sync_point(point, seen, &n);
        }
        free(line);
        fclose(f);
        return rc;
}
