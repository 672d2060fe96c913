/*
 * copier.h - what the files of the copier share (private to copy*.c).
 *
 * One copier (struct ferry_copier) is one worker's state. Its work is
 * split by concern:
 *   copy.c       the copier's life, its directory cache, and the procedure
 *                of one row (attempts, retries, results);
 *   copy_data.c  reading, hashing and writing data (sparse files too),
 *                the file's metadata, and verify's re-reading;
 *   copy_verify.c  verify's check of DST's metadata against the row;
 *   copy_dst.c   what is put in DST and how: temp files, directories, and
 *                rule 9 (replace only what is ferry's);
 *   copy_link.c  a hardlink follower: a link to its first name's copy;
 *   copy_meta.c  a row whose metadata alone is to be applied, in place;
 *   copy_special.c  FIFOs, sockets and devices;
 *   copy_chunks.c a large file with a chunk plan (chunks.h): its temp
 *                (kept for a resume), its streams, its whole-file hash;
 *   copy_stream.c one stream's copy of a chunk (copy_chunks_impl.h);
 *   copy_repair.c verify by chunk, and the repair of bad chunks in place;
 *   retry.c      the retry policy (retry.h), shared with the scanner.
 * A step that fails names its side and step (struct step, ferry.h's
 * struct ferry_failure); nothing reads the words of a message.
 */
#ifndef FERRY_COPIER_H
#define FERRY_COPIER_H

#include "chunks.h"
#include "copy.h"
#include "xattr.h"

#include <xxhash.h>

/* A large file: above this, sparse ranges are looked for and reads are
 * advised sequential; a read of one borrows a buffer of the job's pool
 * (bufpool.h). */
#define BUF_SIZE (128 * 1024)
/* Each copier's own buffer: one read for most files of a tree, and the
 * reads of any file when the pool has no buffer free. */
#define FERRY_COPIER_BUF (16 * 1024)

struct ferry_copier {
        struct ferry_copy_cfg cfg;
        XXH3_state_t *xxh;
        char *buf;       /* what reads use now: own, or one borrowed */
        size_t buf_size; /* its size */
        char *own;       /* the copier's own, FERRY_COPIER_BUF bytes */
        bool root;
        bool mknod;     /* may make devices (ferry_copy_can_make_devices) */
        int64_t dir_id; /* the directory the fds below belong to */
        int src_dir, dst_dir;
        int src_err, dst_err; /* why a descriptor is missing */
        char dir_why[384];    /* the reason for dst_err (names), or "" */
        /* the current item's own reason (names, rule 9), or "" */
        char why[384];
        enum ferry_step why_step; /* which kind of refusal why is */
        struct ferry_xattrs xa;   /* the current entry's SRC xattrs */
        bool dst_dacl; /* dst_dir has a default ACL: new files inherit */
        /* the DST directory of the last leader linked to (copy.c,
         * link_leader): its descriptor and path under DST, or -1 */
        int lead_dir;
        char *lead_path;
        size_t lead_len;
};

/* A step of a copy or verify that can fail: its side and what it does
 * (ferry.h). Decisions (a full or failed DST, a vanished source file) go
 * by these, never by the words of a message. Defined in copy.c. */
struct step {
        enum ferry_side side;
        enum ferry_step step;
};

extern const struct step S_COPY;
extern const struct step S_OPEN_SRC;
extern const struct step S_OPEN_SRC_DIR;
extern const struct step S_READ_SRC;
extern const struct step S_READ_SRC_LINK;
extern const struct step S_STAT_SRC;
extern const struct step S_MAKE_DIR;
extern const struct step S_CREATE;
extern const struct step S_CREATE_LINK;
extern const struct step S_WRITE;
extern const struct step S_FSYNC;
extern const struct step S_CLOSE;
extern const struct step S_LINK;
extern const struct step S_RENAME;
extern const struct step S_VERIFY_DST;
extern const struct step S_VERIFY_SRC;
extern const struct step S_XATTR_READ;

/* copy.c: before streaming a file of size bytes: when it is larger than
 * the copier's own buffer and the pool has one free, c->buf becomes a
 * borrowed buffer (c->buf_size its size) until ferry_copier_unborrow. */
void ferry_copier_borrow(struct ferry_copier *c, uint64_t size);
void ferry_copier_unborrow(struct ferry_copier *c);

/* copy_special.c: whether mode is a FIFO's, socket's or device's; what
 * identifies a special (its kind and, for a device, rdev: what the
 * manifest keeps in dst_size); its hash (from that), and the hash of the
 * entry name in dirfd as a special's (another type gets the hash of
 * none); one attempt at making it in DST under rule 9. */
bool ferry_copy_is_special(uint32_t mode);
uint64_t ferry_copy_special_id(uint32_t mode, uint64_t rdev);
void ferry_copy_special_hash(uint32_t mode, uint64_t rdev, uint8_t out[16]);
int ferry_copy_special_hash_at(int dirfd, const char *name, uint8_t out[16]);
int ferry_copier_special_once(struct ferry_copier *c, const char *name,
                              struct ferry_item *it, bool *changed,
                              const struct step **step);

/* copy.c: the DST step of a metadata step (meta.h), S_COPY for others. */
const struct step *ferry_copier_dst_step(enum ferry_step s);

/* copy.c: reads SRC's kept xattrs of the open fd (fd >= 0) or of name in
 * c->src_dir into c->xa, and sets it->xdigest; *step on failure. */
int ferry_copier_read_xattrs(struct ferry_copier *c, int fd, const char *name,
                             const struct ferry_stat *st, struct ferry_item *it,
                             const struct step **step);

/* copy.c: opens the directories of it unless cached; closes them. */
void ferry_copier_enter_dir(struct ferry_copier *c, const struct ferry_batch *b,
                            const struct ferry_item *it);
void ferry_copier_leave_dir(struct ferry_copier *c);
/* copy.c: it failed at step s with err (R_FAILED, R_NOSPACE, R_NOFDS). */
void ferry_copier_set_result(struct ferry_item *it, int err,
                             const struct step *s);
/* copy.c: true (and it is R_DSTFAIL) when err at s is DST's own failure. */
bool ferry_copier_dst_gone(struct ferry_copier *c, struct ferry_item *it,
                           int err, const struct step *s);
/* copy.c: it ran out of descriptors: wait, and true to start it over. */
bool ferry_copier_wait_fds(struct ferry_copier *c, struct ferry_item *it,
                           int64_t *since);

/* copy_link.c: one attempt at a hardlink follower (it->link_off: its
 * first name's DST path): its name linked to that copy; *changed when
 * SRC's name is no longer the file the scan saw (rule 5); ENOENT, EXDEV,
 * EMLINK, ENAMETOOLONG: the copy cannot be linked (copy it instead). */
int ferry_copier_link_once(struct ferry_copier *c, const struct ferry_batch *b,
                           const char *name, struct ferry_item *it,
                           bool *changed, const struct step **step);
/* copy_link.c: closes the cached DST directory of first names. */
void ferry_copier_leave_leader(struct ferry_copier *c);

/* copy_data.c: opens file name in dirfd for reading (no atime where the
 * kernel allows it, no FIFO hang); _source: in SRC's directory. */
int ferry_copier_open_read(int dirfd, const char *name, int *fd);
int ferry_copier_open_source(struct ferry_copier *c, const char *name, int *fd);
/* copy_data.c: writes the data and metadata of one attempt from in to out;
 * *changed when the source moved under us; *step: what failed. */
int ferry_copier_data(struct ferry_copier *c, int in, int out,
                      const struct ferry_stat *before, struct ferry_item *it,
                      bool *changed, const struct step **step);

/* copy_data.c: SRC's stat a equals b (size, mtime, ctime, dev, ino):
 * rule 5's test of a source that did not change. */
bool ferry_copier_same_file(const struct ferry_stat *a,
                            const struct ferry_stat *b);
/* copy_data.c: the same, but for the device number: SRC as the scan
 * recorded it (a share's device number changes from one mount to the
 * next, and the scan does not compare it either: a pending row keeps the
 * one it was first seen with). */
bool ferry_copier_same_source(const struct ferry_stat *a,
                              const struct ferry_stat *b);
/* copy_data.c: applies st's metadata (c->xa's xattrs) to the open DST
 * file fd; a shortfall is kept in it->meta_fail and is no error. */
int ferry_copier_file_meta(struct ferry_copier *c, int fd,
                           const struct ferry_stat *st, struct ferry_item *it,
                           const struct step **step);
/* Adds n bytes written to DST to the shared counter (cfg.bytes_live). */
static inline void ferry_copier_count(const struct ferry_copier *c, uint64_t n)
{
        if (c->cfg.bytes_live)
                atomic_fetch_add_explicit(c->cfg.bytes_live, n,
                                          memory_order_relaxed);
}

/* copy_chunks.c: the plan of a fresh copy: no chunk kept, no resume (SRC
 * changed, or the temp's data is not known to be durable). */
void ferry_copier_plan_forget(struct ferry_chunk_plan *plan);
/* copy_chunks.c: the data and metadata of a file with a chunk plan
 * (chunks.h), in src (open, its fstat before), into its temp tmp, made
 * or (plan->resume) reopened: *out gets the temp's descriptor (-1 when
 * none is open). Several streams copy chunks at once; each chunk is made
 * durable and reported (cfg.chunk_inbox). *changed when SRC is not the
 * scan's it->st before, during or after; *keep whether the temp is to be
 * kept on failure (a later run resumes it). */
int ferry_copier_chunked(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                         int in, const struct ferry_stat *before,
                         struct ferry_item *it, const char *tmp, int *out,
                         bool *changed, bool *keep, const struct step **step);
/* copy_repair.c: a done file's CH_BAD chunks rewritten in DST's name in
 * place (rule 9 checked first); 0 and *done when that made it whole,
 * 0 and !*done when a full copy must be made instead (plan reset). */
int ferry_copier_repair(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                        int in, const struct ferry_stat *before,
                        struct ferry_item *it, const char *name, bool *done,
                        bool *changed, const struct step **step);
/* copy_repair.c: verify's hash of open fd (DST) with plan: the whole
 * file's XXH3-128 in out, and each chunk whose hash differs from the
 * plan's CH_DONE one set CH_BAD. */
int ferry_copier_hash_planned(struct ferry_copier *c, int fd,
                              struct ferry_chunk_plan *plan, uint8_t out[16],
                              uint64_t *size);

/* copy_verify.c: after it's content was found equal, compares DST's
 * entry's metadata with the row's (R_META_DIFFERS, it->differs, and the
 * parts named in it->why_off, into b's arena). */
void ferry_copier_verify_meta(struct ferry_copier *c, struct ferry_batch *b,
                              struct ferry_item *it);
/* copy_data.c: the hash (XXH3-128, as the copy makes it) and size of
 * name in dirfd, a file or a symlink's target. */
int ferry_copier_hash(struct ferry_copier *c, int dirfd, const char *name,
                      enum ferry_ftype type, uint8_t out[16], uint64_t *size);

/* copy_data.c: the same of the open file fd, read from where it is to
 * its end (a descriptor just opened: all of it). */
int ferry_copier_hash_fd(struct ferry_copier *c, int fd, uint8_t out[16],
                         uint64_t *size);
/* copy_adopt.c: --adopt: when DST already holds an entry equal to SRC's
 * file or symlink (same type, size and, with times, mtime: what cp -a and
 * rsync -a leave), both are read and hashed; equal, SRC's metadata is
 * applied to it in place and the item is done (it->adopted), no data
 * written: true. false: the item is to be copied as any other
 * (it->adopt_differs when only the content differed). */
bool ferry_copier_adopt(struct ferry_copier *c, struct ferry_batch *b,
                        struct ferry_item *it);

/* copy_meta.c: a row that needs its metadata alone (MF_NEED_META),
 * applied in place; true when that gave it its result, false when its
 * data is to be copied after all (it->need is MF_NEED_DATA then). */
bool ferry_copier_meta(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it);

/* copy_dst.c: creates temp file tmp in the DST directory (a leftover of a
 * crashed run is removed first). */
int ferry_copier_create_temp(struct ferry_copier *c, const char *tmp, int *fd);
/* The same, opened with access (O_WRONLY or O_RDWR: a chunked file's temp
 * is read back). */
int ferry_copier_create_temp_as(struct ferry_copier *c, const char *tmp,
                                int access, int *fd);
/* copy_dst.c: ferry_meta_apply failed with err at step on an entry whose
 * data is in place: true when that is a shortfall, kept in it->meta_fail
 * (ferry_copy_meta_shortfall). */
bool ferry_copier_meta_failed(struct ferry_copier *c, struct ferry_item *it,
                              int err, enum ferry_step step);
/* copy_dst.c: a file larger than DST holds; c->why and c->why_step say
 * so. */
bool ferry_copier_too_big(struct ferry_copier *c, const struct ferry_item *it);
/* copy_dst.c: whether a shared job's fence has passed (copy.h): the claim
 * of what is copied may no longer be this host's. Past it nothing more is
 * written into DST, not even a temp file whose make and removal would
 * change a directory's time after another host's metadata pass: an item
 * not begun is not begun (R_NONE), a copy stops at its next buffer
 * (ECANCELED), and nothing is put in place. */
bool ferry_copier_fenced(const struct ferry_copy_cfg *cfg);
/* copy_dst.c: what a copy left in DST (it->dst), the manifest's record of
 * it (rule 9): the source's size and mtime, or DST's mtime where the
 * times may not have been set. */
void ferry_copier_record_dst(struct ferry_copier *c, struct ferry_item *it,
                             const char *name);
/* copy_dst.c: renames tmp over name under rule 9 and the case rules. */
int ferry_copier_install(struct ferry_copier *c, const struct ferry_item *it,
                         const struct ferry_stat *src, const char *tmp,
                         const char *name);
/* copy_dst.c: after ferry_copier_install, on a DST whose rename does not
 * keep times (caps.times_survive_rename false; fusefat sets the mtime to
 * now), sets st's times again on name, when they were set on the temp
 * entry (MF_AP_TIMES). A refusal is a metadata shortfall, as in
 * ferry_copier_meta_failed (it->applied loses MF_AP_TIMES); otherwise
 * the errno, and *step. */
int ferry_copier_times_again(struct ferry_copier *c, struct ferry_item *it,
                             const struct ferry_stat *st, const char *name,
                             const struct step **step);

#endif
