/*
 * control.h - a running job's control file, "<manifest>.control"
 * (struct ferry_control in ferry.h): the channel of `ferry set`.
 *
 * The run writes it when it starts (ferry_control_write, its options and
 * pid, serial 0), reads it about twice a second (ferry_control_load: a
 * read of a small file, no lock) and removes it at the end. `ferry set`
 * (ferry_set, control.c) changes it in place under flock(LOCK_EX) and
 * bumps the serial; the run applies a serial it has not seen. The file is
 * one short text of "key value" lines ending with "end"; a read takes a
 * shared flock without waiting, and one that cannot (a write under way) or
 * finds no "end" is EAGAIN and is tried again at the next poll. Not in the
 * manifest: the run holds the manifest's write transaction nearly all the time,
 * so a writer there would starve.
 */
#ifndef FERRY_CONTROL_H
#define FERRY_CONTROL_H

#include "ferry.h"

#define FERRY_CONTROL_SUFFIX ".control"

/* "<manifest>.control" into a new string (caller frees), or NULL. */
char *ferry_control_path(const char *manifest);
/* Writes c to path (made 0644 when missing), under the file's flock.
 * 0 or an errno. */
int ferry_control_write(const char *path, const struct ferry_control *c);
/* Reads path into *c: 0, ENOENT, EAGAIN (being written, torn or foreign:
 * try later) or another errno. */
int ferry_control_load(const char *path, struct ferry_control *c);
/* ferry_status_read's part: info->control when a run holds the job and
 * its control file names it. */
void ferry_control_status(const char *manifest, struct ferry_status_info *info);

#endif
