/*
 * slowfs_rw.c - the operations of `slowfs --writable` (a destination with
 * latency, bench scenario tail): each sleeps the latency, is counted for
 * --stats-file where it is a write or a sync, and passes through to
 * SOURCE_DIR. slowfs_add_rw_ops adds them to the read-only table.
 */
#define _GNU_SOURCE

#include "slowfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int ret(int rc)
{
        return rc < 0 ? -errno : 0;
}

static int sf_mkdir(const char *path, mode_t mode)
{
        slowfs_delay();
        return ret(mkdirat(slowfs_fs()->src, slowfs_rel(path), mode));
}

static int sf_unlink(const char *path)
{
        slowfs_delay();
        return ret(unlinkat(slowfs_fs()->src, slowfs_rel(path), 0));
}

static int sf_rmdir(const char *path)
{
        slowfs_delay();
        return ret(unlinkat(slowfs_fs()->src, slowfs_rel(path), AT_REMOVEDIR));
}

static int sf_symlink(const char *target, const char *path)
{
        slowfs_delay();
        return ret(symlinkat(target, slowfs_fs()->src, slowfs_rel(path)));
}

static int sf_rename(const char *from, const char *to, unsigned int flags)
{
        slowfs_delay();
        int src = slowfs_fs()->src;
        return ret(
                renameat2(src, slowfs_rel(from), src, slowfs_rel(to), flags));
}

static int sf_link(const char *from, const char *to)
{
        slowfs_delay();
        int src = slowfs_fs()->src;
        return ret(linkat(src, slowfs_rel(from), src, slowfs_rel(to), 0));
}

static int sf_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
        slowfs_delay();
        return ret(fi ? fchmod((int)fi->fh, mode)
                      : fchmodat(slowfs_fs()->src, slowfs_rel(path), mode, 0));
}

static int sf_chown(const char *path, uid_t uid, gid_t gid,
                    struct fuse_file_info *fi)
{
        slowfs_delay();
        return ret(fi ? fchown((int)fi->fh, uid, gid)
                      : fchownat(slowfs_fs()->src, slowfs_rel(path), uid, gid,
                                 AT_SYMLINK_NOFOLLOW));
}

static int sf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
        slowfs_delay();
        if (fi)
                return ret(ftruncate((int)fi->fh, size));
        int fd = openat(slowfs_fs()->src, slowfs_rel(path),
                        O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int rc = ret(ftruncate(fd, size));
        close(fd);
        return rc;
}

static int sf_utimens(const char *path, const struct timespec tv[2],
                      struct fuse_file_info *fi)
{
        slowfs_delay();
        return ret(fi ? futimens((int)fi->fh, tv)
                      : utimensat(slowfs_fs()->src, slowfs_rel(path), tv,
                                  AT_SYMLINK_NOFOLLOW));
}

static int sf_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
        slowfs_delay();
        int fd = openat(slowfs_fs()->src, slowfs_rel(path),
                        (fi->flags & ~O_NOFOLLOW) | O_CREAT | O_NOFOLLOW |
                                O_CLOEXEC,
                        mode);
        if (fd < 0)
                return -errno;
        slowfs_count(ST_OPENS, 1);
        fi->fh = (uint64_t)fd;
        return 0;
}

static int sf_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
        size_t done = 0;
        slowfs_delay();
        while (done < size) {
                ssize_t n = pwrite((int)fi->fh, buf + done, size - done,
                                   off + (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                done += (size_t)n;
        }
        slowfs_count(ST_WRITES, 1);
        slowfs_count(ST_WRITE_BYTES, done);
        return (int)done;
}

static int sf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
        slowfs_delay();
        slowfs_count(ST_FSYNCS, 1);
        return ret(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int sf_fsyncdir(const char *path, int datasync,
                       struct fuse_file_info *fi)
{
        slowfs_delay();
        slowfs_count(ST_FSYNCS, 1);
        return ret(fsync(dirfd((DIR *)(uintptr_t)fi->fh)));
}

void slowfs_add_rw_ops(struct fuse_operations *ops)
{
        ops->mkdir = sf_mkdir;
        ops->unlink = sf_unlink;
        ops->rmdir = sf_rmdir;
        ops->symlink = sf_symlink;
        ops->rename = sf_rename;
        ops->link = sf_link;
        ops->chmod = sf_chmod;
        ops->chown = sf_chown;
        ops->truncate = sf_truncate;
        ops->utimens = sf_utimens;
        ops->create = sf_create;
        ops->write = sf_write;
        ops->fsync = sf_fsync;
        ops->fsyncdir = sf_fsyncdir;
}
