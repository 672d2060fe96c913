/*
 * copy.h - copies, links or verifies one manifest row.
 *
 * A copier is one worker's private state: its buffer, hash state and the
 * directory descriptors of the last directory it worked in (rows arrive
 * grouped by directory). Nothing in it is shared between threads.
 *
 * Calling sequence (one thread):
 *   ferry_copier_new(&cfg, &c);
 *   for each item: ferry_copier_copy(c, batch, item)   or  _verify
 *   ferry_copier_free(c);
 *
 * Copying a regular file: open source, fstat, create ".NAME.<id>.ferry-part"
 * with O_EXCL in the destination directory, read + XXH3-128 + write (holes
 * kept with SEEK_DATA/SEEK_HOLE), fstat again (a changed source is retried,
 * then reported), set owner/mode/times, optionally fsync, rename into place.
 * The item's result fields say what happened; durability of the rename is
 * the journal's barrier, not the copier's business. A step on DST that fails
 * with an error DST itself may have (ferry_copy_dst_suspect) asks whether
 * DST's root still answers before it retries: when not, the item is
 * R_DSTFAIL at once, and so is every later one of the run.
 */
#ifndef FERRY_COPY_H
#define FERRY_COPY_H

#include "ferry.h"
#include "ferry/batch.h"
#include "ferry/names.h"

#include <stdatomic.h>

struct ferry_copy_cfg {
        int srcfd; /* borrowed */
        int dstfd; /* borrowed */
        bool perms, owner, times;
        bool fsync_each; /* --durability=file */
        unsigned retries;
        mode_t umask;      /* for --no-perms */
        atomic_bool *stop; /* borrowed */
        /* borrowed, shared by the workers; NULL: DST holds any name */
        struct ferry_names *names;
};

struct ferry_copier;

int ferry_copier_new(const struct ferry_copy_cfg *cfg,
                     struct ferry_copier **out);
void ferry_copier_free(struct ferry_copier *c);

/* Copies item it of batch b; fills it->result and friends. */
void ferry_copier_copy(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it);
/* Re-reads the destination and/or source (b->work flags) and compares. */
void ferry_copier_verify(struct ferry_copier *c, struct ferry_batch *b,
                         struct ferry_item *it);

/* Opens (create: and makes) directory path under DST; when not root and
 * an earlier run left it without owner access, gives that back first. */
int ferry_copy_open_dst_dir(int dstfd, const char *path, bool create, int *fd);

/* What making a DST directory for a SRC directory needs; all borrowed. */
struct ferry_copy_dirs {
        int srcfd, dstfd;
        struct ferry_names *names; /* may be NULL: DST holds any name */
};

/* Makes and opens directory path under DST for SRC's directory path, as
 * ferry_copy_open_dst_dir does, unless DST cannot hold it: a component has
 * a refused name (EINVAL), or on a case-insensitive DST a component is
 * stored under another spelling that SRC holds too (EEXIST; see
 * ferry_names_dir_clash), and then nothing is made or removed. why gets
 * the reason for those, "" for any other error. */
int ferry_copy_make_dst_dir(const struct ferry_copy_dirs *d, const char *path,
                            int *fd, char *why, size_t size);

/* True for errors worth retrying (EIO, EAGAIN, ETIMEDOUT, ESTALE, ...).
 * The scanner uses it too: one policy for every retry of a run. */
bool ferry_copy_transient(int err);
/* True for errors of a step on DST that may be DST's own rather than one
 * file's (EIO, ENODEV, ENXIO, ESHUTDOWN, EROFS, ENOTCONN, ESTALE, ENOENT,
 * the network's): worth asking ferry_copy_dst_failed before a retry. */
bool ferry_copy_dst_suspect(int err);
/* Crash-safety rule 10: 0 while DST's root (dstfd) answers
 * (ferry_fsio_probe_dir), else the errno that says DST itself failed:
 * gone, shut down, removed or read-only. Then the run stops and the rows
 * stay pending; nobody's file failed. dstfd < 0 (a dry run): 0. */
int ferry_copy_dst_failed(int dstfd);
/* Sleeps before retry number attempt + 1 (0-based): 50 ms, doubling up to
 * 3.2 s. With ferry_copy_transient and --retries, the whole retry policy. */
void ferry_copy_backoff(unsigned attempt);

/* Writes the temp name of row id for name into out (NAME_MAX + 1 bytes). */
void ferry_copy_temp_name(const char *name, int64_t id, char *out);

#endif
