/*
 * fsio.c - the one place where the copy path meets the kernel: the calls
 * on open descriptors and names.
 *
 * Owns: EINTR retries, short read/write loops, statx/fstat translation,
 * sync, rename, link, unlink and rmdir, the sparse-file seeks, times,
 * modes and owners, and the probe of DST's root. Opening (and waiting for
 * a descriptor) is fsio_open.c's; the fault table of the test builds is
 * fsio_fault.c's. Every function returns 0 or a positive errno.
 */
#define _GNU_SOURCE
#include "config.h"
#include "ferry.h"
#include "fsio.h"
#include "fsio_impl.h"

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
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

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

#ifdef FERRY_TESTING
void (*ferry_fsio_pread_hook)(int fd, size_t len, off_t off);
#endif

int ferry_fsio_pread(int fd, void *buf, size_t len, off_t off, size_t *got)
{
        FAULT(FSIO_READ);
#ifdef FERRY_TESTING
        if (ferry_fsio_pread_hook)
                ferry_fsio_pread_hook(fd, len, off);
#endif
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

void ferry_fsio_uncache(int fd, off_t off, size_t len)
{
#ifdef HAVE_POSIX_FADVISE
        (void)posix_fadvise(fd, off, (off_t)len, POSIX_FADV_DONTNEED);
#else
        (void)fd, (void)off, (void)len;
#endif
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
        st->rdev = (uint64_t)s->st_rdev;
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
                st->rdev =
                        (uint64_t)makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
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

int ferry_fsio_fdatasync(int fd)
{
        FAULT(FSIO_FSYNC);
        return fdatasync(fd) ? errno : 0;
}

int ferry_fsio_room(int fd, uint64_t len)
{
        FAULT(FSIO_WRITE);
        struct statvfs vfs;
        if (fstatvfs(fd, &vfs))
                return 0; /* cannot tell: the writes will */
        uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
        return avail < len ? ENOSPC : 0;
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

#define EXT4_MAGIC  0xEF53UL /* ext2, ext3 and ext4 */
#define XFS_MAGIC   0x58465342UL
#define BTRFS_MAGIC 0x9123683EUL

/* The file system type of fd's mount as the kernel's mount table names
 * it (the driver's name, not the f_type a network file system such as 9p
 * passes on from its server), found by the mount's id (statx), else by
 * its device number; false when /proc/self/mountinfo does not say. */
static bool mount_type(int fd, const struct stat *st, char *type, size_t size)
{
        unsigned long long want_id = 0;
#if defined(HAVE_STATX) && defined(STATX_MNT_ID)
        struct statx sx;
        if (!statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) &&
            (sx.stx_mask & STATX_MNT_ID))
                want_id = sx.stx_mnt_id;
#endif
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return false;
        char *line = NULL;
        size_t cap = 0;
        bool found = false;
        while (!found && getline(&line, &cap, f) > 0) {
                unsigned long long id;
                unsigned maj, min;
                const char *dash = strstr(line, " - ");
                char t[64];
                if (!dash ||
                    sscanf(line, "%llu %*u %u:%u", &id, &maj, &min) != 3 ||
                    sscanf(dash + 3, "%63s", t) != 1)
                        continue;
                found = want_id ? id == want_id
                                : maj == major(st->st_dev) &&
                                          min == minor(st->st_dev);
                if (found)
                        snprintf(type, size, "%s", t);
        }
        free(line);
        fclose(f);
        return found;
}

/* Whether the ext4 file system on block device dev has a journal: jbd2
 * lists each journal it runs as /proc/fs/jbd2/NAME-INO, NAME the block
 * device's kernel name (/sys/dev/block/MAJ:MIN links to it). An external
 * journal is listed under its own device's name: not found, no. */
static bool ext4_journaled(dev_t dev)
{
        char path[64], link[PATH_MAX];
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev),
                 minor(dev));
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
                return false;
        link[n] = '\0';
        const char *name = strrchr(link, '/');
        name = name ? name + 1 : link;
        size_t len = strlen(name);
        DIR *d = opendir("/proc/fs/jbd2");
        if (!d)
                return false;
        bool found = false;
        for (struct dirent *e; !found && (e = readdir(d));) {
                const char *ino = e->d_name + len + 1;
                found = !strncmp(e->d_name, name, len) &&
                        e->d_name[len] == '-' && *ino &&
                        strspn(ino, "0123456789") == strlen(ino);
        }
        closedir(d);
        return found;
}

enum ferry_fs_sync ferry_fsio_fs_sync(int fd)
{
#ifdef HAVE_SYNCFS
        struct statfs sf;
        struct stat st;
        char type[64];
        if (fstatfs(fd, &sf) || fstat(fd, &st) ||
            !mount_type(fd, &st, type, sizeof(type)))
                return FERRY_FS_SYNC_DIRS;
        unsigned long magic = (unsigned long)sf.f_type;
        if ((!strcmp(type, "xfs") && magic == XFS_MAGIC) ||
            (!strcmp(type, "btrfs") && magic == BTRFS_MAGIC))
                return FERRY_FS_SYNC_COMMITS;
        if ((!strcmp(type, "ext4") || !strcmp(type, "ext3") ||
             !strcmp(type, "ext2")) &&
            magic == EXT4_MAGIC)
                return ext4_journaled(st.st_dev) ? FERRY_FS_SYNC_COMMITS
                                                 : FERRY_FS_SYNC_WRITES;
#else
        (void)fd;
#endif
        return FERRY_FS_SYNC_DIRS; /* without syncfs, sync() in its stead */
}

/* EROFS when fd's file system is read only (one that failed and was set
 * read-only: its syncfs returns 0 and writes nothing), else 0 (also when
 * fstatvfs cannot tell: a FUSE server without statfs). */
static int writable(int fd)
{
        struct statvfs vfs;
        if (fstatvfs(fd, &vfs))
                return 0;
        return vfs.f_flag & ST_RDONLY ? EROFS : 0;
}

int ferry_fsio_sync_device(int fd, bool *covered)
{
        *covered = false;
        int rc = ferry_fsio_syncfs(fd);
        if (!rc)
                rc = writable(fd);
        enum ferry_fs_sync kind =
                rc ? FERRY_FS_SYNC_DIRS : ferry_fsio_fs_sync(fd);
        /* WRITES: the first syncfs's last writes came after its flush; a
         * second one flushes after them (a directory's fsync does not on
         * ext4 without a journal before Linux 6.5, when the inode is
         * clean) */
        if (kind == FERRY_FS_SYNC_WRITES)
                rc = ferry_fsio_syncfs(fd);
        if (!rc && kind != FERRY_FS_SYNC_DIRS) {
                rc = ferry_fsio_fsync(fd);
                *covered = !rc;
        }
        return rc;
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

int ferry_fsio_punch_hole(int fd, off_t off, off_t len)
{
        int r;
        do
                r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                              off, len);
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

int ferry_fsio_rmdirat(int dirfd, const char *name)
{
        FAULT(FSIO_RMDIR);
        return unlinkat(dirfd, name, AT_REMOVEDIR) ? errno : 0;
}

/* lseek(2) with whence SEEK_DATA or SEEK_HOLE. */
static int seek(int fd, off_t from, int whence, off_t *at)
{
        FAULT(FSIO_SEEK);
        off_t r = lseek(fd, from, whence);
        if (r < 0)
                return errno;
        *at = r;
        return 0;
}

int ferry_fsio_seek_data(int fd, off_t from, off_t *at)
{
        return seek(fd, from, SEEK_DATA, at);
}

int ferry_fsio_seek_hole(int fd, off_t from, off_t *at)
{
        return seek(fd, from, SEEK_HOLE, at);
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

int ferry_fsio_mknodat(int dirfd, const char *name, mode_t mode, uint64_t rdev)
{
        FAULT(FSIO_SYMLINK);
        return mknodat(dirfd, name, mode, (dev_t)rdev) ? errno : 0;
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
