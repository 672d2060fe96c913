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
 * then reported), set owner/mode/xattrs and ACLs/times (SRC's xattrs read
 * from the open source), optionally fsync, rename into place. A file with
 * a chunk plan (chunks.h, item->plan_off) is copied in chunks, by several
 * streams at once, into a temp file that survives a failure or a crash
 * (copy_chunks.c); a done one's bad chunks are repaired in place.
 * The item's result fields say what happened; durability of the rename is
 * the coordinator's barrier, not the copier's business. A step on DST that
 * fails with an error DST itself may have (ferry_copy_dst_suspect) asks whether
 * DST's root still answers before it retries: when not, the item is
 * R_DSTFAIL at once, and so is every later one of the run.
 */
#ifndef FERRY_COPY_H
#define FERRY_COPY_H

#include "ferry.h"
#include "batch.h"
#include "bufpool.h"
#include "meta.h"
#include "names.h"
#include "retry.h"

#include <stdatomic.h>
#include <stdint.h>

struct ferry_queue;
struct ferry_chunk_plan; /* chunks.h */

/* Descriptors one copier holds at most at once: the cached source and
 * destination directories, and the file being read and its temp file; a
 * hard link's leader directory, or the one-at-a-time walk of make_dirs
 * and of the name checks, takes the place of those files. */
#define FERRY_COPIER_FDS 4

struct ferry_copy_cfg {
        int srcfd;                  /* borrowed */
        int dstfd;                  /* borrowed */
        struct ferry_meta_cfg meta; /* what metadata to apply (meta.h) */
        bool specials, devices, trust_mtime;
        bool fsync_each; /* --durability=file */
        bool adopt;      /* --adopt (copy_adopt.c) */
        unsigned retries;
        /* when runs that may have left copies without done marks began
         * (seconds since the epoch), or 0: see ferry_copy_is_ours */
        int64_t written_since;
        atomic_bool *stop; /* borrowed */
        /* a shared job's fence (borrowed; NULL: none): CLOCK_MONOTONIC ns
         * until which every claim this host holds is surely its own. Past
         * it a copy is not put in place (ECANCELED, the item R_NONE): its
         * claim may be another host's by now, whose copy it would replace
         * (src/shared/run.c, shared_renew) */
        const _Atomic int64_t *fence;
        /* a shared job's rows: another host's listing numbered their
         * inodes, so a hardlink follower is linked only when SRC's name
         * of its leader is its own inode on this host, with the ctime
         * the leader's copy recorded, and DST's entry of the leader is
         * still that copy (copy_link.c, batch.h's ferry_lead_rec) */
        bool foreign_rows;
        /* borrowed, shared by the workers; NULL: DST holds any name */
        struct ferry_names *names;
        /* borrowed, shared by the workers: --bwlimit's bucket and the
         * pause (ratelimit.h); NULL: no limit */
        struct ferry_rate *rate;
        /* issue 11, large files in chunks (copy_chunks.c): */
        /* borrowed, may be NULL: every data byte written to DST (any
         * file, a chunk, a repair) is added as it is written; never
         * taken back (a failed attempt's bytes stay counted) */
        _Atomic uint64_t *bytes_live;
        /* borrowed, may be NULL: a chunk made durable in its temp file is
         * pushed here as a malloc'd struct ferry_chunk_msg (MSG_CHUNK);
         * the receiver frees it */
        struct ferry_queue *chunk_inbox;
        /* --durability=none: no fdatasync per chunk, no fsync of the DST
         * directory once a chunked file's temp is made */
        bool no_sync;
        /* borrowed, shared by the workers (bufpool.h); NULL: each copier
         * reads through its own small buffer alone */
        struct ferry_bufpool *bufs;
};

struct ferry_copier;
struct ferry_rate;

int ferry_copier_new(const struct ferry_copy_cfg *cfg,
                     struct ferry_copier **out);
void ferry_copier_free(struct ferry_copier *c);

/* Copies item it of batch b; fills it->result and friends. */
void ferry_copier_copy(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it);
/* Re-reads the destination and/or source (b->work flags) and compares. */
void ferry_copier_verify(struct ferry_copier *c, struct ferry_batch *b,
                         struct ferry_item *it);
/* In both, running out of descriptors (EMFILE, ENFILE) is waited out
 * with ferry_fsio_fd_wait, the cached directories closed meanwhile, and
 * the item starts over, no attempt counted; only when that wait runs out
 * is the result R_NOFDS (the run stops; R_NONE when a stop was asked). */

/* Closes the cached directories (an idle worker under descriptor
 * pressure holds none); the next item opens them again. */
void ferry_copier_rest(struct ferry_copier *c);

/*
 * Rule 9 (DESIGN.md): ferry replaces or removes a DST entry only when it is
 * ferry's. ferry_copy_matches: d still is what rec says ferry put there
 * (type, size or a special's kind and device number, mtime within a
 * FAT's 2 s). ferry_copy_is_ours: that, or d is
 * a copy of this very version of the source src (type, size and, when
 * times are kept, mtime), as cp -a leaves: replacing it loses nothing; or
 * d has the row's type and appeared (its ctime) since a run that did not
 * end (killed, a power cut, a stop) began, cfg->written_since: that run
 * renamed it into place before its done mark, whatever a power cut left
 * of its data. In a shared job (cfg->fence) written_since is the job's
 * start, and it holds only for a row a claim of which ended without a
 * done outcome (item->unmarked: its host died, was cut off or let it go):
 * a row no host left so was never written unmarked, and a user's file that
 * appears in DST while the job runs is not taken for ferry's.
 */
/* Whether the process may make device files: root with CAP_MKNOD
 * (copy_special.c). */
bool ferry_copy_can_make_devices(void);

bool ferry_copy_matches(const struct ferry_dst_rec *rec,
                        const struct ferry_stat *d);
/* Whether a shared job's fence (ferry_copy_cfg's fence; NULL: none) has
 * passed: what this host claimed may be another host's by now. */
bool ferry_fence_passed(const _Atomic int64_t *fence);
/* What rec->size holds of an entry of type t whose stat is d: its size, a
 * special's kind and device number (ferry_copy_special_id). Both the
 * copy and --verify's claim record it so. */
uint64_t ferry_copy_dst_size(enum ferry_ftype t, const struct ferry_stat *d);
bool ferry_copy_is_ours(const struct ferry_copy_cfg *cfg,
                        const struct ferry_item *it,
                        const struct ferry_stat *src,
                        const struct ferry_stat *d);
/* d is a copy of this very version of SRC's src, of type t: the same
 * type and size and, when times are kept, mtime (within a FAT's 2 s);
 * --adopt's test before it hashes (copy_adopt.c, the dry run's too). */
bool ferry_copy_same_version(const struct ferry_copy_cfg *cfg,
                             enum ferry_ftype t, const struct ferry_stat *src,
                             const struct ferry_stat *d);
/*
 * --adopt (copy_adopt.c): whether the run hashes DST's entry name (in
 * dst_dir, its stat d) to adopt item it (its chunk plan, or NULL; SRC's
 * stat s: the scan's, or the file as opened), by every test short of
 * reading either side: one function for the run and the dry run, so the
 * dry run cannot list what the run would not hash. A name to copy (not a
 * hardlink follower, which is linked; not a chunked copy resumed or a
 * repair, which are ferry's own work), DST's entry not SRC's own inode; a
 * file of SRC's size and mtime (ferry_copy_same_version) with no more
 * links than SRC's, or a symlink; and, on a case-insensitive DST, not the
 * copy of another spelling of the name (names.h; src_dir: SRC's directory
 * of it). A symlink's target is compared after (the run reads it to hash
 * it).
 */
bool ferry_adopt_would_hash(const struct ferry_copy_cfg *cfg,
                            const struct ferry_item *it,
                            const struct ferry_chunk_plan *plan,
                            const struct ferry_stat *s, int dst_dir,
                            int src_dir, const char *name,
                            const struct ferry_stat *d);
/* Whether SRC's symlink name (in sfd) and DST's (in dfd) have one target
 * (a dry run's test of a symlink --adopt would keep). */
bool ferry_adopt_same_target(int sfd, int dfd, const char *name);
/* On a case-insensitive DST, name's entry in dst_dir is the copy of
 * another source file (in src_dir) whose name differs only by case
 * (names.h: ferry_names_clash, the copy's own test): not item it's to
 * adopt or replace; why says so. */
bool ferry_copy_other_spelling(const struct ferry_copy_cfg *cfg,
                               const struct ferry_item *it, int dst_dir,
                               int src_dir, const char *name, char *why,
                               size_t size);
/* "file", "symlink", "directory" or "special file": static. */
const char *ferry_copy_kind(const struct ferry_stat *d);
/* The reason an entry d in the way of item it is not replaced. */
void ferry_copy_refusal(const struct ferry_item *it, const struct ferry_stat *d,
                        char *why, size_t size);

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

/* Writes the temp name of row id for name into out (NAME_MAX + 1 bytes);
 * a long UTF-8 name is cut on a character boundary. */
void ferry_copy_temp_name(const char *name, int64_t id, char *out);

/* Applying metadata to a DST entry whose data is in place failed with err:
 * true when that is a metadata shortfall (the data stays done); false for
 * DST's own failures (no answer from its root, full, no descriptors) and
 * transient errors (retried), which stay what they are. */
bool ferry_copy_meta_shortfall(int dstfd, int err);

#endif
