/*
 * job_status.c - reading a job's status (include/ferry.h ferry_status_read):
 * the manifest a job uses, who holds its lock, its live settings, and the
 * manifest's counts and failures read without write access, read again
 * when the manifest changed under the read.
 */
#define _GNU_SOURCE
#include "ferry.h"
#include "job.h"
#include "control.h"
#include "manifest.h"
#include "retry.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ferry_job_manifest_of(const char *manifest, const char *src,
                          const char *dst, char **out, struct ferry_error *err)
{
        if (manifest) {
                *out = strdup(manifest);
                return *out ? 0
                            : ferry_job_errf(err, FERRY_EINTERNAL,
                                             "out of memory");
        }
        char *rs = NULL, *rd = NULL;
        bool exists;
        int rc = ferry_job_resolve_src(src, &rs, err);
        if (!rc)
                rc = ferry_job_resolve_dst(dst, &rd, &exists, err);
        if (!rc)
                rc = ferry_job_default_manifest(rs, rd, false, out, err);
        free(rs);
        free(rd);
        return rc;
}

/* Passes info and failures on to the caller's functions and counts what
 * was handed on: a read is tried again only while that is nothing. */
struct failures_seen {
        const struct ferry_status_req *req;
        uint64_t n;
};

static void pass_info(const struct ferry_status_info *info, void *arg)
{
        struct failures_seen *f = arg;
        f->n++;
        f->req->on_info(info, f->req->arg);
}

static void pass_failure(const struct ferry_failure_row *row, void *arg)
{
        struct failures_seen *f = arg;
        f->n++;
        f->req->on_failure(row, f->req->arg);
}

/* Reads of a manifest that changed under an immutable read (manifest/status.c):
 * read again, unless info or failures were handed on already. */
#define STATUS_TRIES 5

static int status_manifest(const char *path, struct ferry_status_info *info,
                           const struct ferry_status_req *req,
                           struct ferry_error *err)
{
        struct failures_seen seen = {req, 0};
        struct ferry_status_req pass = {req && req->on_info ? pass_info : NULL,
                                        req && req->on_failure ? pass_failure
                                                               : NULL,
                                        &seen, req ? req->per_cause : 0};
        for (int tries = 1;; tries++) {
                struct ferry_manifest *m;
                int rc = ferry_manifest_open(path, MF_READONLY, &m, err);
                if (rc)
                        return rc;
                rc = ferry_manifest_status(m, info, &pass);
                bool again = rc && ferry_manifest_moved(m) && !seen.n &&
                             tries < STATUS_TRIES;
                if (rc && !again)
                        ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                       ferry_manifest_errmsg(m));
                ferry_manifest_close(m);
                if (!again)
                        return rc ? FERRY_EMANIFEST : 0;
                ferry_copy_backoff((unsigned)tries - 1);
        }
}

int ferry_status_read(const char *manifest, const char *src, const char *dst,
                      const struct ferry_status_req *req,
                      struct ferry_status_info *info, struct ferry_error *err)
{
        memset(info, 0, sizeof(*info));
        info->last_result = -1;
        char *path = NULL, *lock = NULL;
        int rc = ferry_job_manifest_of(manifest, src, dst, &path, err);
        if (rc)
                return rc;
        snprintf(info->manifest, sizeof(info->manifest), "%s", path);
        if (asprintf(&lock, "%s.lock", path) < 0) {
                free(path);
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        }
        /* read-only: F_OFD_GETLK needs no write access */
        int fd = open(lock, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                info->running_pid = ferry_job_lock_holder(
                        fd, info->running_host, sizeof(info->running_host));
                close(fd);
        } else if (errno != ENOENT) {
                info->lock_errno = errno;
        }
        ferry_control_status(path, info); /* control.h: live settings */
        rc = status_manifest(path, info, req, err);
        free(lock);
        free(path);
        return rc;
}
