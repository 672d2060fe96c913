/*
 * fsio.c - the one place where the copy path meets the kernel.
 *
 * Owns: EINTR retries, short read/write loops, statx/fstat translation,
 * component-wise opening of paths longer than PATH_MAX, waiting for a
 * descriptor when the process or the system has none left (EMFILE, ENFILE:
 * back-pressure, see below), and (in test builds) the fault table
 * described in src/fsio.h. Every function returns 0 or a positive
 * errno.
 */
#define _GNU_SOURCE
#include "config.h"
#include "ferry.h"
#include "fsio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#if defined(HAVE_LINUX_OPENAT2_H) && defined(HAVE_SYS_OPENAT2)
#include <linux/openat2.h>
#include <sys/syscall.h>
#define USE_OPENAT2 1
#endif

#ifdef FERRY_TESTING
#define MAX_FAULTS 16

struct fault {
        int op;
        long nth; /* 0 = every call */
        int err;
};

static const char *const op_names[FSIO_NOPS] = {
        "open",  "read",    "write",  "fsync", "syncfs",  "rename",
        "mkdir", "utimens", "chmod",  "chown", "link",    "symlink",
        "stat",  "unlink",  "mwrite", "msync", "readdir", "probe",
};

static struct fault faults[MAX_FAULTS];
static int n_faults;
static atomic_long op_calls[FSIO_NOPS];
static char crash_point[64];
static long crash_nth;
static atomic_long crash_calls;
static pthread_once_t faults_once = PTHREAD_ONCE_INIT;
static long fd_wait_test_ms = -1; /* FERRY_FD_WAIT_MS, -1: not set */

static int op_by_name(const char *name, size_t len)
{
        for (int i = 0; i < FSIO_NOPS; i++)
                if (strlen(op_names[i]) == len &&
                    !memcmp(op_names[i], name, len))
                        return i;
        return -1;
}

static void parse_fault(const char *spec, size_t len)
{
        char buf[128];
        if (len >= sizeof(buf) || n_faults == MAX_FAULTS)
                return;
        memcpy(buf, spec, len);
        buf[len] = '\0';
        char *c1 = strchr(buf, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
                return;
        int op = op_by_name(buf, (size_t)(c1 - buf));
        if (op < 0)
                return;
        faults[n_faults].op = op;
        faults[n_faults].nth = strtol(c1 + 1, NULL, 10);
        faults[n_faults].err = (int)strtol(c2 + 1, NULL, 10);
        n_faults++;
}

static void load_faults(void)
{
        const char *spec = getenv("FERRY_FAULT");
        while (spec && *spec) {
                size_t len = strcspn(spec, ",");
                parse_fault(spec, len);
                spec += len + (spec[len] == ',');
        }
        const char *crash = getenv("FERRY_CRASH");
        if (crash) {
                const char *colon = strchr(crash, ':');
                size_t len = colon ? (size_t)(colon - crash) : strlen(crash);
                if (len < sizeof(crash_point)) {
                        memcpy(crash_point, crash, len);
                        crash_point[len] = '\0';
                        crash_nth = colon ? strtol(colon + 1, NULL, 10) : 1;
                }
        }
        const char *wait = getenv("FERRY_FD_WAIT_MS"); /* t34: a short wait */
        if (wait)
                fd_wait_test_ms = strtol(wait, NULL, 10);
}

/* FERRY_FAULT_LOG=FILE: each injected fault appends "op call errno" to
 * FILE, so a test tells a fault that fired from one never reached; a call
 * that waits for a descriptor appends "fdwait N errno" (N: the waits so
 * far), so a test sees whether the descriptor budget held. */
static void log_line(const char *what, long call, int err)
{
        const char *path = getenv("FERRY_FAULT_LOG");
        if (!path)
                return;
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        char line[64];
        int n = snprintf(line, sizeof(line), "%s %ld %d\n", what, call, err);
        if (n > 0 && write(fd, line, (size_t)n) < 0) {
                /* a test that reads the log will find the line missing */
        }
        close(fd);
}

/* Returns the errno to inject for this call of op, or 0. */
static int injected(enum ferry_fsio_op op)
{
        pthread_once(&faults_once, load_faults);
        if (!n_faults)
                return 0;
        long call = atomic_fetch_add(&op_calls[op], 1) + 1;
        for (int i = 0; i < n_faults; i++)
                if (faults[i].op == (int)op &&
                    (faults[i].nth == 0 || faults[i].nth == call)) {
                        log_line(op_names[op], call, faults[i].err);
                        return faults[i].err;
                }
        return 0;
}

bool ferry_fsio_faults_on(enum ferry_fsio_op op)
{
        pthread_once(&faults_once, load_faults);
        for (int i = 0; i < n_faults; i++)
                if (faults[i].op == (int)op)
                        return true;
        return false;
}

void ferry_fsio_crashpoint(const char *point)
{
        pthread_once(&faults_once, load_faults);
        if (!crash_point[0] || strcmp(point, crash_point) != 0)
                return;
        if (atomic_fetch_add(&crash_calls, 1) + 1 == crash_nth)
                _exit(86);
}
#else
static int injected(enum ferry_fsio_op op)
{
        (void)op;
        return 0;
}

void ferry_fsio_crashpoint(const char *point)
{
        (void)point;
}

bool ferry_fsio_faults_on(enum ferry_fsio_op op)
{
        (void)op;
        return false;
}
#endif

bool ferry_test_hooks_built(void)
{
#ifdef FERRY_TESTING
        return true;
#else
        return false;
#endif
}

int ferry_fsio_fault(enum ferry_fsio_op op)
{
        return injected(op);
}

#define FAULT(op)                                                              \
        do {                                                                   \
                int fault_ = injected(op);                                     \
                if (fault_)                                                    \
                        return fault_;                                         \
        } while (0)

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
#ifdef FERRY_TESTING
        pthread_once(&faults_once, load_faults);
        if (fd_wait_test_ms >= 0)
                return fd_wait_test_ms;
#endif
        return FD_WAIT_MS;
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
#ifdef FERRY_TESTING
                log_line("fdwait", (long)n, err);
#else
                (void)n;
#endif
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
                int fl = last ? flags
                              : (O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                 O_CLOEXEC);
                int next = open_waiting(cur, name, fl, mode);
                /* a file or symlink where the source has a directory:
                 * ENOTDIR; whether it may go is the journal's to say
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
 * component; without it, only the last one is protected by O_NOFOLLOW.
 */
static int open_nofollow(int dirfd, const char *name, int flags, mode_t mode)
{
#ifdef USE_OPENAT2
        static atomic_bool no_openat2;
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
        return openat(dirfd, name, flags | O_CLOEXEC, mode);
}

int ferry_fsio_openat(int dirfd, const char *name, int flags, mode_t mode,
                      int *fd)
{
        int64_t since = 0;
        int r = -1, err;
        do {
                /* an injected EMFILE is waited out like a real one */
                if ((err = injected(FSIO_OPEN)))
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

int ferry_fsio_read(int fd, void *buf, size_t len, size_t *got)
{
        FAULT(FSIO_READ);
        size_t done = 0;
        while (done < len) {
                ssize_t n = read(fd, (char *)buf + done, len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno;
                }
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        *got = done;
        return 0;
}

int ferry_fsio_pread(int fd, void *buf, size_t len, off_t off, size_t *got)
{
        FAULT(FSIO_READ);
        size_t done = 0;
        while (done < len) {
                ssize_t n = pread(fd, (char *)buf + done, len - done,
                                  off + (off_t)done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno;
                }
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        *got = done;
        return 0;
}

int ferry_fsio_write(int fd, const void *buf, size_t len)
{
        FAULT(FSIO_WRITE);
        size_t done = 0;
        while (done < len) {
                ssize_t n = write(fd, (const char *)buf + done, len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno;
                }
                done += (size_t)n;
        }
        return 0;
}

int ferry_fsio_pwrite(int fd, const void *buf, size_t len, off_t off)
{
        FAULT(FSIO_WRITE);
        size_t done = 0;
        while (done < len) {
                ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
                                   off + (off_t)done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno;
                }
                done += (size_t)n;
        }
        return 0;
}

static struct ferry_time from_timespec(struct timespec ts)
{
        return (struct ferry_time){(int64_t)ts.tv_sec, (uint32_t)ts.tv_nsec};
}

static void from_stat(const struct stat *s, struct ferry_stat *st)
{
        st->size = (uint64_t)s->st_size;
        st->blocks = (uint64_t)s->st_blocks;
        st->mtime = from_timespec(s->st_mtim);
        st->ctime = from_timespec(s->st_ctim);
        st->atime = from_timespec(s->st_atim);
        st->dev = (uint64_t)s->st_dev;
        st->ino = (uint64_t)s->st_ino;
        st->mode = (uint32_t)s->st_mode;
        st->nlink = (uint32_t)s->st_nlink;
        st->uid = (uint32_t)s->st_uid;
        st->gid = (uint32_t)s->st_gid;
}

int ferry_fsio_fstat(int fd, struct ferry_stat *st)
{
        FAULT(FSIO_STAT);
        struct stat s;
        if (fstat(fd, &s))
                return errno;
        from_stat(&s, st);
        return 0;
}

int ferry_fsio_statat(int dirfd, const char *name, struct ferry_stat *st)
{
        FAULT(FSIO_STAT);
#ifdef HAVE_STATX
        struct statx sx;
        unsigned mask = STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_UID |
                        STATX_GID | STATX_MTIME | STATX_CTIME | STATX_ATIME |
                        STATX_INO | STATX_SIZE | STATX_BLOCKS;
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, mask,
                  &sx) == 0) {
                st->size = sx.stx_size;
                st->blocks = sx.stx_blocks;
                st->mtime = (struct ferry_time){sx.stx_mtime.tv_sec,
                                                sx.stx_mtime.tv_nsec};
                st->ctime = (struct ferry_time){sx.stx_ctime.tv_sec,
                                                sx.stx_ctime.tv_nsec};
                st->atime = (struct ferry_time){sx.stx_atime.tv_sec,
                                                sx.stx_atime.tv_nsec};
                /* the same encoding as fstat's st_dev: rows compare both */
                st->dev = (uint64_t)makedev(sx.stx_dev_major, sx.stx_dev_minor);
                st->ino = sx.stx_ino;
                st->mode = sx.stx_mode;
                st->nlink = sx.stx_nlink;
                st->uid = sx.stx_uid;
                st->gid = sx.stx_gid;
                return 0;
        }
        if (errno != ENOSYS)
                return errno;
#endif
        struct stat s;
        if (fstatat(dirfd, name, &s, AT_SYMLINK_NOFOLLOW))
                return errno;
        from_stat(&s, st);
        return 0;
}

int ferry_fsio_fsync(int fd)
{
        FAULT(FSIO_FSYNC);
        return fsync(fd) ? errno : 0;
}

int ferry_fsio_syncfs(int fd)
{
        FAULT(FSIO_SYNCFS);
#ifdef HAVE_SYNCFS
        return syncfs(fd) ? errno : 0;
#else
        sync();
        return 0;
#endif
}

/* The directory's link count, asked of the file system itself. */
static int probe_stat(int dirfd, uint64_t *nlink)
{
#ifdef HAVE_STATX
        struct statx sx;
        if (statx(dirfd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_NLINK,
                  &sx) == 0) {
                *nlink = sx.stx_nlink;
                return 0;
        }
        if (errno != ENOSYS && errno != EINVAL)
                return errno;
#endif
        struct stat s;
        if (fstat(dirfd, &s))
                return errno;
        *nlink = (uint64_t)s.st_nlink;
        return 0;
}

int ferry_fsio_probe_dir(int dirfd)
{
        FAULT(FSIO_PROBE);
        uint64_t nlink = 1;
        int rc = probe_stat(dirfd, &nlink);
        if (rc)
                return rc;
        if (nlink == 0)
                return ENOENT;
        struct statvfs vfs;
        if (fstatvfs(dirfd, &vfs))
                return errno;
        if (vfs.f_flag & ST_RDONLY)
                return EROFS;
#ifdef O_TMPFILE
        int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0)
                return errno;
        rc = write(fd, "", 1) == 1 ? 0 : errno ? errno : EIO;
        if (!rc && fsync(fd))
                rc = errno;
        close(fd);
#endif
        return rc;
}

int ferry_fsio_ftruncate(int fd, off_t len)
{
        FAULT(FSIO_WRITE);
        int r;
        do
                r = ftruncate(fd, len);
        while (r && errno == EINTR);
        return r ? errno : 0;
}

int ferry_fsio_renameat(int dirfd, const char *from, const char *to)
{
        FAULT(FSIO_RENAME);
        return renameat(dirfd, from, dirfd, to) ? errno : 0;
}

int ferry_fsio_rename_noreplace(int dirfd, const char *from, const char *to)
{
        FAULT(FSIO_RENAME);
#ifdef HAVE_RENAMEAT2
        /* a file system without it (some FUSE ones) says so once */
        static atomic_bool no_flag;
        if (!atomic_load(&no_flag)) {
                if (renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0)
                        return 0;
                if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
                        return errno;
                atomic_store(&no_flag, true);
        }
#endif
        struct stat st;
        if (fstatat(dirfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return EEXIST;
        if (errno != ENOENT)
                return errno;
        return renameat(dirfd, from, dirfd, to) ? errno : 0;
}

int ferry_fsio_unlinkat(int dirfd, const char *name, int flags)
{
        FAULT(FSIO_UNLINK);
        return unlinkat(dirfd, name, flags) ? errno : 0;
}

int ferry_fsio_mkdirat(int dirfd, const char *name, mode_t mode)
{
        FAULT(FSIO_MKDIR);
        return mkdirat(dirfd, name, mode) ? errno : 0;
}

int ferry_fsio_symlinkat(const char *target, int dirfd, const char *name)
{
        FAULT(FSIO_SYMLINK);
        return symlinkat(target, dirfd, name) ? errno : 0;
}

int ferry_fsio_linkat(int fromfd, const char *from, int dirfd, const char *name)
{
        FAULT(FSIO_LINK);
        return linkat(fromfd, from, dirfd, name, 0) ? errno : 0;
}

int ferry_fsio_readlinkat(int dirfd, const char *name, char **target,
                          size_t *len)
{
        FAULT(FSIO_READ);
        size_t cap = 256;
        for (;;) {
                char *buf = malloc(cap);
                if (!buf)
                        return ENOMEM;
                ssize_t n = readlinkat(dirfd, name, buf, cap);
                if (n < 0) {
                        int e = errno;
                        free(buf);
                        return e;
                }
                if ((size_t)n < cap) {
                        buf[n] = '\0';
                        *target = buf;
                        *len = (size_t)n;
                        return 0;
                }
                free(buf);
                cap *= 4;
                if (cap > (1u << 20))
                        return ENAMETOOLONG;
        }
}

/* 0, or EOVERFLOW when t does not fit time_t (a 32-bit one). */
static int to_timespec(struct ferry_time t, struct timespec *ts)
{
        ts->tv_sec = (time_t)t.sec;
        ts->tv_nsec = (long)t.nsec;
        return (int64_t)ts->tv_sec == t.sec && t.nsec < 1000000000 ? 0
                                                                   : EOVERFLOW;
}

int ferry_fsio_futimens(int fd, struct ferry_time atime,
                        struct ferry_time mtime)
{
        FAULT(FSIO_UTIMENS);
        struct timespec ts[2];
        int rc = to_timespec(atime, &ts[0]);
        if (!rc)
                rc = to_timespec(mtime, &ts[1]);
        return rc ? rc : futimens(fd, ts) ? errno : 0;
}

int ferry_fsio_utimensat(int dirfd, const char *name, struct ferry_time atime,
                         struct ferry_time mtime, int flags)
{
        FAULT(FSIO_UTIMENS);
        struct timespec ts[2];
        int rc = to_timespec(atime, &ts[0]);
        if (!rc)
                rc = to_timespec(mtime, &ts[1]);
        return rc ? rc : utimensat(dirfd, name, ts, flags) ? errno : 0;
}

int ferry_fsio_fchmod(int fd, mode_t mode)
{
        FAULT(FSIO_CHMOD);
        return fchmod(fd, mode) ? errno : 0;
}

int ferry_fsio_fchmodat(int dirfd, const char *name, mode_t mode)
{
        FAULT(FSIO_CHMOD);
        return fchmodat(dirfd, name, mode, 0) ? errno : 0;
}

int ferry_fsio_fchown(int fd, uid_t uid, gid_t gid)
{
        FAULT(FSIO_CHOWN);
        return fchown(fd, uid, gid) ? errno : 0;
}

int ferry_fsio_lchownat(int dirfd, const char *name, uid_t uid, gid_t gid)
{
        FAULT(FSIO_CHOWN);
        return fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) ? errno : 0;
}

int ferry_fsio_close(int *fd)
{
        if (*fd < 0)
                return 0;
        int r = close(*fd);
        *fd = -1;
        return r && errno != EINTR ? errno : 0;
}

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
        return unlinkat(dirfd, name, AT_REMOVEDIR) && errno != ENOENT ? errno
                                                                      : 0;
}
