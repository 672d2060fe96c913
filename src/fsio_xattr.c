/*
 * fsio_xattr.c - the extended-attribute wrappers of fsio (fsio.h): by
 * descriptor, and by name in a directory without following the name.
 *
 * By name goes through "/proc/self/fd/<dirfd>/<name>" with the l*xattr
 * calls: the kernel resolves the directory by its descriptor (a rename of
 * the directory above cannot redirect it) and leaves the last component
 * unfollowed, as fchownat(AT_SYMLINK_NOFOLLOW) does. An O_PATH descriptor
 * would be neater but f*xattr refuses those (EBADF) before Linux 6.x, and
 * a FIFO, socket or device must not be opened for real. Without /proc the
 * calls fail with ENOENT.
 */
#define _GNU_SOURCE
#include "fsio.h"
#include "fsio_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/xattr.h>

static int len_of(ssize_t r, size_t *len)
{
        if (r < 0)
                return errno;
        *len = (size_t)r;
        return 0;
}

/* "/proc/self/fd/<dirfd>/<entry>" into out; ENAMETOOLONG when it does not
 * fit (an entry is one component: NAME_MAX at most). */
static int proc_path(int dirfd, const char *entry, char out[PATH_MAX])
{
        int n = snprintf(out, PATH_MAX, "/proc/self/fd/%d/%s", dirfd, entry);
        return n < 0 || n >= PATH_MAX ? ENAMETOOLONG : 0;
}

int ferry_fsio_flistxattr(int fd, char *buf, size_t size, size_t *len)
{
        FAULT(FSIO_XATTR);
        ssize_t r;
        do
                r = flistxattr(fd, buf, size);
        while (r < 0 && errno == EINTR);
        return len_of(r, len);
}

int ferry_fsio_fgetxattr(int fd, const char *name, void *buf, size_t size,
                         size_t *len)
{
        FAULT(FSIO_XATTR);
        ssize_t r;
        do
                r = fgetxattr(fd, name, buf, size);
        while (r < 0 && errno == EINTR);
        return len_of(r, len);
}

int ferry_fsio_fsetxattr(int fd, const char *name, const void *value,
                         size_t size)
{
        FAULT(FSIO_XATTR);
        return fsetxattr(fd, name, value, size, 0) ? errno : 0;
}

int ferry_fsio_fremovexattr(int fd, const char *name)
{
        FAULT(FSIO_XATTR);
        return fremovexattr(fd, name) ? errno : 0;
}

int ferry_fsio_llistxattrat(int dirfd, const char *entry, char *buf,
                            size_t size, size_t *len)
{
        FAULT(FSIO_XATTR);
        char p[PATH_MAX];
        int rc = proc_path(dirfd, entry, p);
        if (rc)
                return rc;
        ssize_t r;
        do
                r = llistxattr(p, buf, size);
        while (r < 0 && errno == EINTR);
        return len_of(r, len);
}

int ferry_fsio_lgetxattrat(int dirfd, const char *entry, const char *name,
                           void *buf, size_t size, size_t *len)
{
        FAULT(FSIO_XATTR);
        char p[PATH_MAX];
        int rc = proc_path(dirfd, entry, p);
        if (rc)
                return rc;
        ssize_t r;
        do
                r = lgetxattr(p, name, buf, size);
        while (r < 0 && errno == EINTR);
        return len_of(r, len);
}

int ferry_fsio_lsetxattrat(int dirfd, const char *entry, const char *name,
                           const void *value, size_t size)
{
        FAULT(FSIO_XATTR);
        char p[PATH_MAX];
        int rc = proc_path(dirfd, entry, p);
        if (rc)
                return rc;
        return lsetxattr(p, name, value, size, 0) ? errno : 0;
}

int ferry_fsio_lremovexattrat(int dirfd, const char *entry, const char *name)
{
        FAULT(FSIO_XATTR);
        char p[PATH_MAX];
        int rc = proc_path(dirfd, entry, p);
        if (rc)
                return rc;
        return lremovexattr(p, name) ? errno : 0;
}
