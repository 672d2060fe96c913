/*
 * shared/barrier.c - rule 1 on a host of a shared job: what a batch wrote
 * in DST is durable before its done marks commit, as the SQLite run's
 * barrier makes it (coord/barrier.c): DST's file system synced by
 * ferry_fsio_sync_device (which also finds one gone read-only), and,
 * where that does not make every directory durable (FUSE, NFS, CIFS, ...:
 * ferry_fsio_fs_sync says DIRS), or with --durability=file (no syncfs),
 * an fsync of each directory the batch renamed into.
 *
 * Not done here: a mount below DST (the SQLite barrier syncs each one a
 * file was written to; a shared job's syncfs covers DST's own).
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include <fcntl.h>
#include <string.h>

/* fsync of directory dir of DST ("" its root). */
static int sync_dir(struct shared *s, const char *dir)
{
        int fd = -1;
        int e = dir[0] ? ferry_fsio_open_dir(s->dstfd, dir, &fd)
                       : ferry_fsio_openat(s->dstfd, ".",
                                           O_RDONLY | O_DIRECTORY, 0, &fd);
        if (!e)
                e = ferry_fsio_fsync(fd);
        ferry_fsio_close(&fd);
        return e;
}

int shared_barrier(struct shared *s, const struct ferry_batch *b)
{
        if (s->opt->durability == FERRY_DURABLE_NONE)
                return 0;
        bool covered = false;
        int e = 0;
        if (s->opt->durability == FERRY_DURABLE_BATCH)
                e = ferry_fsio_sync_device(s->dstfd, &covered);
        /* a batch's rows come in id order, a directory's together */
        const char *last = NULL;
        for (size_t i = 0; !e && !covered && i < b->n; i++) {
                const struct ferry_item *it = &b->items[i];
                const char *dir = ferry_batch_at(b, it->dir_off);
                if (it->result != R_DONE || (last && !strcmp(last, dir)))
                        continue;
                last = dir;
                e = sync_dir(s, dir);
        }
        return e;
}

bool shared_dirs_covered(const struct shared *s)
{
        enum ferry_fs_sync k = ferry_fsio_fs_sync(s->dstfd);
        return s->opt->durability == FERRY_DURABLE_BATCH &&
               (k == FERRY_FS_SYNC_COMMITS || k == FERRY_FS_SYNC_WRITES);
}

int shared_sync_dst(struct shared *s)
{
        bool covered = false;
        int e = ferry_fsio_sync_device(s->dstfd, &covered);
        return e ? shared_fail(s, FERRY_EDSTFAIL,
                               "cannot make DST '%s' durable: %s", s->opt->dst,
                               strerror(e))
                 : 0;
}
