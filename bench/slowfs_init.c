/*
 * slowfs_init.c - let the kernel send slowfs lookups and readdirs of one
 * directory in parallel, as a share's client (NFS, CIFS) does.
 *
 * The kernel serializes the lookups of one FUSE directory unless the
 * server's FUSE_INIT reply carries FUSE_PARALLEL_DIROPS. libfuse 3 wants
 * that capability by default but, before 3.17.1 (upstream commit
 * c9905341, "Pass FUSE_PARALLEL_DIROPS to kernel"), never put it in the
 * reply; Debian 12 ships 3.14. A slowfs at 5 ms then answered 40 cold
 * lstat() calls in one directory in 0.21 s from 16 threads, the time one
 * thread takes, and every tool's scan of a large directory was bound by
 * that, not by the latency a share has.
 *
 * On such a libfuse (3.13 to 3.16, which have custom I/O), slowfs reads
 * and writes /dev/fuse through
 * fuse_session_custom_io(): the read hook notes the FUSE_INIT request
 * (its unique id, and whether the kernel offers parallel dirops), and the
 * writev hook adds the flag to that request's reply. Everything else
 * passes through unchanged (splice is not used, which a passthrough of
 * small requests does not miss).
 */
#define _GNU_SOURCE

#include "slowfs.h"

#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unistd.h>

#if FUSE_MAJOR_VERSION == 3 && FUSE_MINOR_VERSION >= 13 &&                     \
        FUSE_MINOR_VERSION < 17

static _Atomic uint64_t init_unique; /* FUSE_INIT's id, 0 once answered */

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
        (void)userdata;
        ssize_t n = read(fd, buf, len);
        const struct fuse_in_header *in = buf;
        /* an older kernel's fuse_init_in ends after flags */
        if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags) +
                           sizeof(uint32_t)) &&
            in->opcode == FUSE_INIT) {
                const struct fuse_init_in *arg = (const void *)(in + 1);
                if (arg->flags & FUSE_PARALLEL_DIROPS)
                        atomic_store(&init_unique, in->unique);
        }
        return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
        (void)userdata;
        uint64_t unique = atomic_load(&init_unique);
        if (unique && count >= 2 &&
            iov[0].iov_len >= sizeof(struct fuse_out_header) &&
            iov[1].iov_len >=
                    offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
                const struct fuse_out_header *out = iov[0].iov_base;
                if (out->unique == unique && out->error == 0) {
                        struct fuse_init_out *arg = iov[1].iov_base;
                        arg->flags |= FUSE_PARALLEL_DIROPS;
                        atomic_store(&init_unique, 0);
                }
        }
        return writev(fd, iov, count);
}

int slowfs_parallel_dirops(struct fuse *f)
{
        static const struct fuse_custom_io io = {.read = io_read,
                                                 .writev = io_writev};
        struct fuse_session *se = fuse_get_session(f);
        return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

#else

/* libfuse 3.17.1 and later send the flag themselves; 3.12 has no custom
 * I/O (lookups of one directory stay serialized there). */
int slowfs_parallel_dirops(struct fuse *f)
{
        (void)f;
        return 0;
}

#endif
