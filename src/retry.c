/*
 * retry.c - the retry policy of a run (retry.h): which errors are worth
 * another try, which may be DST's own failure, and how long to wait.
 */
#define _GNU_SOURCE
#include "retry.h"

#include "fsio.h"

#include <errno.h>
#include <time.h>

bool ferry_copy_transient(int err)
{
        switch (err) {
        case EIO:
        case EAGAIN:
        case ETIMEDOUT:
        case ESTALE:
        case EHOSTDOWN:
        case EHOSTUNREACH:
        case ECONNRESET:
        case ECONNABORTED:
        case ENOTCONN:
        case EBUSY: return true;
        default: return false;
        }
}

bool ferry_copy_dst_suspect(int err)
{
        switch (err) {
        case EIO:
        case ENODEV:
        case ENXIO:
        case ESHUTDOWN:
        case EROFS:
        case ENOTCONN:
        case ESTALE:
        case ENOENT: /* DST's root removed: nothing can be made in it */
        case ETIMEDOUT:
        case EHOSTDOWN:
        case EHOSTUNREACH:
        case ECONNRESET:
        case ECONNABORTED: return true;
        default: return false;
        }
}

int ferry_copy_dst_failed(int dstfd)
{
        if (dstfd < 0)
                return 0;
        /* what the probe may also meet on a live DST (no O_TMPFILE, no
         * room, no permission) tells nothing */
        int err = ferry_fsio_probe_dir(dstfd);
        return ferry_copy_dst_suspect(err) ? err : 0;
}

void ferry_copy_backoff(unsigned attempt)
{
        long ms = 50L << (attempt < 6 ? attempt : 6);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}
