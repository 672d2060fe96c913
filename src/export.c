/*
 * export.c - ferry_export_read of include/ferry.h: finds a job's manifest
 * as `ferry status` does (a path, or the default one of SRC and DST),
 * opens it read-only without the job's lock (manifest/reader.c) and hands
 * its file rows on (manifest/export.c); the words for file types and
 * states. The formats of `ferry export` are the command's (cli/export.c).
 */
#define _GNU_SOURCE
#include "ferry.h"
#include "job.h"
#include "manifest.h"
#include "retry.h"

#include <stdlib.h>
#include <string.h>

/* Reads of a manifest that a run changed under a reader without write
 * access, while nothing was handed on yet (as status does, job_status.c). */
#define EXPORT_TRIES 5

int ferry_export_read(const char *manifest, const char *src, const char *dst,
                      const struct ferry_export_req *req,
                      struct ferry_error *err)
{
        char *path = NULL;
        int rc = ferry_job_manifest_of(manifest, src, dst, &path, err);
        for (int tries = 1; !rc; tries++) {
                struct ferry_manifest *m;
                rc = ferry_manifest_open(path, MF_READONLY, &m, err);
                if (rc)
                        break;
                uint64_t handed = 0;
                rc = ferry_manifest_export(m, req, &handed);
                bool again = rc && ferry_manifest_moved(m) && !handed &&
                             tries < EXPORT_TRIES;
                /* a code of the manifest's own, not one on_row stopped
                 * with: say what failed */
                if (rc == FERRY_EMANIFEST && !again)
                        ferry_job_errf(err, rc, "%s", ferry_manifest_errmsg(m));
                ferry_manifest_close(m);
                if (!again)
                        break;
                ferry_copy_backoff((unsigned)tries - 1);
                rc = 0;
        }
        free(path);
        return rc;
}

const char *ferry_file_type_str(int type)
{
        switch (type) {
        case FERRY_FILE_REG: return "file";
        case FERRY_FILE_SYMLINK: return "symlink";
        case FERRY_FILE_SPECIAL: return "special";
        default: return "?";
        }
}

const char *ferry_file_state_str(int state)
{
        switch (state) {
        case FERRY_FILE_PENDING: return "pending";
        case FERRY_FILE_DONE: return "done";
        case FERRY_FILE_FAILED: return "failed";
        case FERRY_FILE_SKIPPED: return "skipped";
        case FERRY_FILE_VANISHED: return "vanished";
        case FERRY_FILE_REMOVED: return "removed";
        default: return "?";
        }
}
