/*
 * fsio_open.c - fsio's descriptors: opening, and waiting for one.
 *
 * Owns the openat family (component-wise opening of paths longer than
 * PATH_MAX, never following a symlink, making missing directories), the
 * removal of a tree (which opens the directories it empties), and waiting
 * for a descriptor when the process or the system has none left (EMFILE,
 * ENFILE: back-pressure, see below). Every function returns 0 or a
 * positive errno.
 */
#define _GNU_SOURCE
#include "config.h"
#include "fsio.h"
#include "fsio_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(HAVE_LINUX_OPENAT2_H) && defined(HAVE_SYS_OPENAT2)
#include <linux/openat2.h>
#include <sys/syscall.h>
#define USE_OPENAT2 1
#endif

/* ---- descriptor back-pressure ----------------------------------------- */

/*
 * EMFILE (this process holds its limit of descriptors) and ENFILE (the
 * system's file table is full) say nothing about the file being opened:
 * other threads close theirs within moments. So every wrapper here that
 * makes a descriptor first waits for one, briefly (FD_HOLD_MS): it may
 * hold descriptors of its caller meanwhile, so a longer wait could leave
 * every thread holding some and waiting for more. After that it returns
 * the errno, and a caller that holds descriptors lets them go and waits
 * with ferry_fsio_fd_wait, which bounds the whole wait: FD_WAIT_MS
 * without a descriptor means none is coming back (a leak, or another
 * process holding the system's table). Then the state is latched: every
 * later wait gives up at once, so the run stops soon rather than waiting
 * once per file. Steps: 1 ms, after 20 ms 10 ms, after 2 s 100 ms.
 */
#define FD_HOLD_MS 100
#define FD_WAIT_MS 60000

static atomic_bool fd_starved;
static atomic_ulong fd_waits;

bool ferry_fsio_out_of_fds(int err)
{
        return err == EMFILE || err == ENFILE;
}

void ferry_fsio_fd_reset(void)
{
        atomic_store(&fd_starved, false);
        atomic_store(&fd_waits, 0);
}

unsigned long ferry_fsio_fd_waits(void)
{
        return atomic_load(&fd_waits);
}

static int64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t fd_wait_limit(void)
{
        long ms = ferry_fsio_fd_wait_test_ms(); /* t34: a short wait */
        return ms >= 0 ? ms : FD_WAIT_MS;
}

/* One wait of at most limit ms in all (-1: the run's, latched at the end)
 * since *since (0: this is the first). */
static bool wait_step(int64_t *since, int err, int64_t limit)
{
        if (!ferry_fsio_out_of_fds(err) || atomic_load(&fd_starved))
                return false;
        int64_t now = mono_ms();
        if (!*since) {
                *since = now;
                unsigned long n = atomic_fetch_add(&fd_waits, 1) + 1;
                ferry_fsio_log("fdwait", (long)n, err);
        }
        int64_t waited = now - *since;
        if (waited >= (limit < 0 ? fd_wait_limit() : limit)) {
                if (limit < 0)
                        atomic_store(&fd_starved, true);
                return false;
        }
        long ms = waited < 20 ? 1 : waited < 2000 ? 10 : 100;
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        return true;
}

bool ferry_fsio_fd_wait(int64_t *since, int err)
{
        return wait_step(since, err, -1);
}

/* ---- opening ------------------------------------------------------------ */

/* openat(2) with EINTR retried and EMFILE/ENFILE held out for a moment: a
 * descriptor, or -1 with errno set. */
static int open_waiting(int dirfd, const char *name, int flags, mode_t mode)
{
        int64_t since = 0;
        int fd;
        do {
                do
                        fd = openat(dirfd, name, flags, mode);
                while (fd < 0 && errno == EINTR);
        } while (fd < 0 && wait_step(&since, errno, FD_HOLD_MS));
        return fd;
}

/* Walks rel one component at a time from rootfd (for paths > PATH_MAX). */
static int open_by_components(int rootfd, const char *rel, int flags,
                              mode_t mode, bool create_dirs, int *out)
{
        int cur = rootfd, rc = 0;
        const char *p = rel;
        char name[NAME_MAX + 1];
        while (*p) {
                size_t len = strcspn(p, "/");
                bool last = p[len] == '\0';
                if (len > NAME_MAX) {
                        rc = ENAMETOOLONG;
                        break;
                }
                memcpy(name, p, len);
                name[len] = '\0';
                if (!strcmp(name, "..")) { /* out of rootfd: as openat2's
                                              RESOLVE_BENEATH refuses it */
                        rc = EXDEV;
                        break;
                }
                int fl = last ? flags
                              : (O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                 O_CLOEXEC);
                int next = open_waiting(cur, name, fl, mode);
                /* a symlink on the way: ELOOP, as openat2 says it */
                struct stat ls;
                if (next < 0 && errno == ENOTDIR && !last &&
                    !fstatat(cur, name, &ls, AT_SYMLINK_NOFOLLOW) &&
                    S_ISLNK(ls.st_mode))
                        errno = ELOOP;
                /* a file or symlink where the source has a directory:
                 * ENOTDIR; whether it may go is the coordinator's to say
                 * (rule 9), it knows what ferry put there */
                if (next < 0 && errno == ELOOP && create_dirs)
                        errno = ENOTDIR;
                if (next < 0 && errno == ENOENT && create_dirs) {
                        if (mkdirat(cur, name, 0700) && errno != EEXIST) {
                                rc = errno;
                                break;
                        }
                        next = open_waiting(cur, name, fl, mode);
                }
                if (next < 0) {
                        rc = errno;
                        break;
                }
                if (cur != rootfd)
                        close(cur);
                cur = next;
                p += len;
                while (*p == '/')
                        p++;
        }
        if (rc) {
                if (cur != rootfd)
                        close(cur);
                return rc;
        }
        if (cur == rootfd) {
                /* empty path: a new descriptor for rootfd itself */
                cur = open_waiting(rootfd, ".", flags, mode);
                if (cur < 0)
                        return errno;
        }
        *out = cur;
        return 0;
}

/*
 * ferry never follows a symlink, not even in the middle of a path: a
 * directory replaced by a symlink between scan and copy must not lead the
 * copy outside SRC or DST. openat2(RESOLVE_NO_SYMLINKS) says so for every
 * component; without it (Linux before 5.6), a path is walked a component
 * at a time, each directory on the way opened with O_NOFOLLOW, and the
 * last one as flags say (O_NOFOLLOW where the caller asks it).
 */
static int open_nofollow(int dirfd, const char *name, int flags, mode_t mode)
{
#ifdef USE_OPENAT2
        static atomic_bool no_openat2;
#ifdef FERRY_TESTING
        /* tests: as on a kernel before Linux 5.6, which has no openat2 */
        if (getenv("FERRY_NO_OPENAT2"))
                atomic_store(&no_openat2, true);
#endif
        if (!atomic_load(&no_openat2)) {
                struct open_how how = {
                        .flags = (uint64_t)(flags | O_CLOEXEC),
                        .mode = (flags & O_CREAT) ? mode : 0,
                        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH,
                };
                int r = (int)syscall(SYS_openat2, dirfd, name, &how,
                                     sizeof(how));
                if (r >= 0 || errno != ENOSYS)
                        return r;
                atomic_store(&no_openat2, true);
        }
#endif
        if (!strchr(name, '/'))
                return openat(dirfd, name, flags | O_CLOEXEC, mode);
        /* each directory on the way opened with O_NOFOLLOW */
        int fd = -1;
        int rc = open_by_components(dirfd, name, flags | O_CLOEXEC, mode, false,
                                    &fd);
        if (rc) {
                errno = rc;
                return -1;
        }
        return fd;
}

int ferry_fsio_openat(int dirfd, const char *name, int flags, mode_t mode,
                      int *fd)
{
        int64_t since = 0;
        int r = -1, err;
        do {
                /* an injected EMFILE is waited out like a real one */
                if ((err = ferry_fsio_fault(FSIO_OPEN)))
                        continue;
                do
                        r = open_nofollow(dirfd, name, flags, mode);
                while (r < 0 && (errno == EINTR || errno == EAGAIN));
                err = r < 0 ? errno : 0;
        } while (err && wait_step(&since, err, FD_HOLD_MS));
        if (!err) {
                *fd = r;
                return 0;
        }
        if (err != ENAMETOOLONG || strlen(name) <= NAME_MAX)
                return err;
        return open_by_components(dirfd, name, flags | O_CLOEXEC, mode, false,
                                  fd);
}

int ferry_fsio_open_dir(int rootfd, const char *rel, int *fd)
{
        return ferry_fsio_openat(rootfd, rel[0] ? rel : ".",
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, fd);
}

int ferry_fsio_make_dirs(int rootfd, const char *rel, int *fd)
{
        int rc = ferry_fsio_open_dir(rootfd, rel, fd);
        if (rc != ENOENT && rc != ENOTDIR && rc != ELOOP)
                return rc;
        FAULT(FSIO_MKDIR);
        return open_by_components(
                rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0,
                true, fd);
}

/* ---- removing a tree ------------------------------------------------------
 */

static int remove_children(int dfd)
{
        DIR *d = fdopendir(dfd);
        if (!d) {
                int e = errno;
                close(dfd);
                return e;
        }
        int rc = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int r = ferry_fsio_remove_tree(dirfd(d), de->d_name);
                if (r && !rc)
                        rc = r;
        }
        closedir(d);
        return rc;
}

int ferry_fsio_remove_tree(int dirfd, const char *name)
{
        FAULT(FSIO_UNLINK);
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return errno;
        int fd = open_waiting(dirfd, name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                              0);
        if (fd < 0)
                return errno;
        int rc = remove_children(fd);
        if (rc)
                return rc;
        rc = ferry_fsio_rmdirat(dirfd, name);
        return rc == ENOENT ? 0 : rc;
}

int ferry_fsio_opendir(int dirfd, DIR **d)
{
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        *d = fd < 0 ? NULL : fdopendir(fd);
        if (*d)
                return 0;
        int e = errno;
        if (fd >= 0)
                close(fd);
        return e;
}

int ferry_fsio_count_entries(int dirfd, uint64_t *n)
{
        *n = 0;
        DIR *d;
        int rc = ferry_fsio_opendir(dirfd, &d);
        if (rc)
                return rc;
        errno = 0;
        for (struct dirent *de; (de = readdir(d)); errno = 0)
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        (*n)++;
        rc = errno;
        closedir(d);
        return rc;
}
