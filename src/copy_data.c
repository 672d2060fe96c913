/*
 * copy_data.c - reading, hashing and writing a file's data (copier.h).
 *
 * Owns the read + XXH3-128 + write loop, sparse files (SEEK_DATA and
 * SEEK_HOLE: holes stay holes and hash as zeros, so the hash covers the
 * logical content and `xxhsum -H2` of the copy gives the manifest's
 * value), the copied file's metadata (owner, mode, xattrs and ACLs read
 * from the open source, times), the check that
 * the source did not change while read, and verify's re-reading and
 * comparing of DST or SRC (their metadata: copy_verify.c).
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"
#include "ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char zeros[64 * 1024];

static void hash_zeros(XXH3_state_t *xxh, uint64_t n)
{
        while (n) {
                size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
                XXH3_128bits_update(xxh, zeros, k);
                n -= k;
        }
}

static void hash_final(XXH3_state_t *xxh, uint8_t out[16])
{
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(xxh));
        memcpy(out, canon.digest, 16);
}

/* How much to read next of a file whose fstat said size (0: unknown, as
 * /proc's): no more than is left, so that the read that would only meet
 * EOF is not made; a file that grew meanwhile has another size in the
 * fstat after (ferry_copier_data) and is copied again. */
static size_t next_read(const struct ferry_copier *c, uint64_t size,
                        uint64_t total)
{
        return size && size - total < c->buf_size ? (size_t)(size - total)
                                                  : c->buf_size;
}

/* Reads fd to EOF (or its size, above), hashing; writes to out unless
 * out < 0. */
static int stream(struct ferry_copier *c, int in, int out, uint64_t size,
                  uint64_t *total, const struct step **step)
{
        for (;;) {
                size_t got, want = next_read(c, size, *total);
                if (!want)
                        return 0; /* all its size read */
                int rc = ferry_fsio_read(in, c->buf, want, &got);
                if (rc) {
                        *step = &S_READ_SRC;
                        return rc;
                }
                if (!got)
                        return 0;
                XXH3_128bits_update(c->xxh, c->buf, got);
                if (out >= 0 &&
                    (rc = ferry_rate_take(c->cfg.rate, got, c->cfg.stop))) {
                        *step = &S_COPY; /* stopped while it waited */
                        return rc;
                }
                if (out >= 0 && (rc = ferry_fsio_write(out, c->buf, got))) {
                        *step = &S_WRITE;
                        return rc;
                }
                if (out >= 0)
                        ferry_copier_count(c, got);
                *total += got;
                if (got < want)
                        return 0;
                if (atomic_load(c->cfg.stop) || ferry_copier_fenced(&c->cfg)) {
                        *step = &S_COPY;
                        return ECANCELED;
                }
        }
}

/* Copies the data ranges of a sparse file; holes stay holes. */
static int stream_sparse(struct ferry_copier *c, int in, int out, uint64_t size,
                         uint64_t *total, const struct step **step)
{
        off_t off = 0, end = (off_t)size;
        *step = &S_READ_SRC;
        while (off < end) {
                off_t data = end, hole = end;
                int err = ferry_fsio_seek_data(in, off, &data);
                if (err && err != ENXIO)
                        return err;
                if (err || data > end)
                        data = end;
                hash_zeros(c->xxh, (uint64_t)(data - off));
                off = data;
                if (off >= end)
                        break;
                if ((err = ferry_fsio_seek_hole(in, off, &hole)))
                        return err;
                if (hole > end)
                        hole = end;
                while (off < hole) {
                        size_t want = (size_t)(hole - off) < c->buf_size
                                              ? (size_t)(hole - off)
                                              : c->buf_size;
                        size_t got;
                        int rc = ferry_fsio_pread(in, c->buf, want, off, &got);
                        if (rc)
                                return rc;
                        if (!got)
                                return 0; /* shrank: the fstat after sees it */
                        XXH3_128bits_update(c->xxh, c->buf, got);
                        if ((rc = ferry_rate_take(c->cfg.rate, got,
                                                  c->cfg.stop))) {
                                *step = &S_COPY; /* stopped while it waited */
                                return rc;
                        }
                        if ((rc = ferry_fsio_pwrite(out, c->buf, got, off))) {
                                *step = &S_WRITE;
                                return rc;
                        }
                        ferry_copier_count(c, got);
                        off += (off_t)got;
                }
        }
        *total = size;
        *step = &S_WRITE;
        return ferry_fsio_ftruncate(out, end);
}

bool ferry_copier_same_file(const struct ferry_stat *a,
                            const struct ferry_stat *b)
{
        return a->size == b->size && ferry_time_eq(a->mtime, b->mtime) &&
               ferry_time_eq(a->ctime, b->ctime) && a->ino == b->ino &&
               a->dev == b->dev;
}

bool ferry_copier_same_source(const struct ferry_stat *a,
                              const struct ferry_stat *b)
{
        return a->size == b->size && ferry_time_eq(a->mtime, b->mtime) &&
               ferry_time_eq(a->ctime, b->ctime) && a->ino == b->ino;
}

int ferry_copier_file_meta(struct ferry_copier *c, int fd,
                           const struct ferry_stat *st, struct ferry_item *it,
                           const struct step **step)
{
        struct ferry_meta_target t = {fd, -1, NULL, c->dst_dacl, NULL};
        enum ferry_step fs = FERRY_STEP_NONE;
        it->meta_fail = (struct ferry_failure){0};
        int rc = ferry_meta_apply(&c->cfg.meta, &t, st, &c->xa, &it->applied,
                                  &fs);
        /* the data is there: a metadata shortfall does not fail it */
        if (rc && ferry_copier_meta_failed(c, it, rc, fs))
                return 0;
        if (rc)
                *step = ferry_copier_dst_step(fs);
        return rc;
}

int ferry_copier_open_read(int dirfd, const char *name, int *fd)
{
        /* O_NONBLOCK: a file turned FIFO must not hang the worker; it means
         * nothing for the regular files we read */
        int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
#ifdef HAVE_O_NOATIME
        int rc = ferry_fsio_openat(dirfd, name, flags | O_NOATIME, 0, fd);
        if (rc != EPERM)
                return rc;
#endif
        return ferry_fsio_openat(dirfd, name, flags, 0, fd);
}

int ferry_copier_open_source(struct ferry_copier *c, const char *name, int *fd)
{
        return ferry_copier_open_read(c->src_dir, name, fd);
}

/* Writes the data and metadata of one attempt into tmp; *changed when the
 * source moved under us. */
int ferry_copier_data(struct ferry_copier *c, int in, int out,
                      const struct ferry_stat *before, struct ferry_item *it,
                      bool *changed, const struct step **step)
{
        uint64_t total = 0;
        XXH3_128bits_reset(c->xxh);
        bool sparse =
                before->size > BUF_SIZE && before->blocks * 512 < before->size;
#ifdef HAVE_POSIX_FADVISE
        if (before->size > BUF_SIZE)
                posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        ferry_copier_borrow(c, before->size);
        int rc = sparse ? stream_sparse(c, in, out, before->size, &total, step)
                        : stream(c, in, out, before->size, &total, step);
        ferry_copier_unborrow(c);
        if (rc)
                return rc;
        /* before the second fstat: an xattr changed meanwhile changes the
         * ctime, and the copy is made again */
        if ((rc = ferry_copier_read_xattrs(c, in, NULL, before, it, step)))
                return rc;
        struct ferry_stat after;
        if ((rc = ferry_fsio_fstat(in, &after))) {
                *step = &S_STAT_SRC;
                return rc;
        }
        *changed =
                !ferry_copier_same_file(before, &after) || total != after.size;
        if (*changed)
                return 0;
        hash_final(c->xxh, it->hash);
        it->st = after;
        it->bytes = total;
        return ferry_copier_file_meta(c, out, before, it, step);
}

/* Hashes one side of a verify: the file, a symlink's target, or a
 * special's kind and device number. */
static int hash_side(struct ferry_copier *c, int dirfd, const char *name,
                     enum ferry_ftype type, struct ferry_chunk_plan *plan,
                     uint8_t out[16], uint64_t *size)
{
        if (type == FT_SPECIAL) {
                *size = 0; /* a special's content is its kind and rdev */
                return ferry_copy_special_hash_at(dirfd, name, out);
        }
        if (type == FT_LINK) {
                char *target;
                size_t len;
                int rc = ferry_fsio_readlinkat(dirfd, name, &target, &len);
                if (rc)
                        return rc;
                XXH128_canonical_t canon;
                XXH128_canonicalFromHash(&canon, XXH3_128bits(target, len));
                memcpy(out, canon.digest, 16);
                *size = len;
                free(target);
                return 0;
        }
        int fd = -1;
        /* SRC is read as a copy reads it: its atime stays (--atimes) */
        int rc = dirfd == c->src_dir
                         ? ferry_copier_open_source(c, name, &fd)
                         : ferry_fsio_openat(dirfd, name,
                                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
                                             0, &fd);
        if (rc)
                return rc;
        /* chunk by chunk too (copy_repair.c) */
        rc = plan ? ferry_copier_hash_planned(c, fd, plan, out, size)
                  : ferry_copier_hash_fd(c, fd, out, size);
        /* a big file is read once, as a copy reads it: its pages go */
        if (!rc && *size >= FERRY_CHUNK_MIN_FILE)
                ferry_fsio_uncache(fd, 0, 0);
        ferry_fsio_close(&fd);
        return rc;
}

int ferry_copier_hash_fd(struct ferry_copier *c, int fd, uint8_t out[16],
                         uint64_t *size)
{
        XXH3_128bits_reset(c->xxh);
        const struct step *step;
        *size = 0;
#ifdef HAVE_POSIX_FADVISE
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        int rc = stream(c, fd, -1, 0, size, &step); /* all of it, to EOF */
        if (!rc)
                hash_final(c->xxh, out);
        return rc;
}

int ferry_copier_hash(struct ferry_copier *c, int dirfd, const char *name,
                      enum ferry_ftype type, uint8_t out[16], uint64_t *size)
{
        return hash_side(c, dirfd, name, type, NULL, out, size);
}

static void verify_side(struct ferry_copier *c, int dirfd, int dir_err,
                        const char *name, struct ferry_item *it,
                        struct ferry_chunk_plan *plan, const struct step *side)
{
        uint8_t got[16];
        uint64_t size = 0;
        ferry_copier_borrow(c, it->st.size);
        int rc =
                dir_err ? dir_err
                        : hash_side(c, dirfd, name, it->type, plan, got, &size);
        ferry_copier_unborrow(c);
        if (rc == ENOENT || rc == ENOTDIR || rc == ELOOP) {
                it->result = R_MISSING;
                it->fail = (struct ferry_failure){side->side,
                                                  FERRY_STEP_MISSING, 0};
                return;
        }
        if (rc) {
                if (!ferry_copier_dst_gone(c, it, rc, side))
                        ferry_copier_set_result(it, rc, side);
                return;
        }
        bool size_ok = it->type == FT_LINK || size == it->st.size;
        if (!size_ok || memcmp(got, it->hash, 16) != 0) {
                it->result = R_MISMATCH;
                it->fail = (struct ferry_failure){side->side,
                                                  FERRY_STEP_DIFFERS, 0};
        }
}

static void verify_item(struct ferry_copier *c, struct ferry_batch *b,
                        struct ferry_item *it)
{
        ferry_copier_enter_dir(c, b, it);
        const char *name = ferry_batch_at(b, it->name_off);
        it->result = R_DONE;
        if (b->work & WORK_VERIFY_DST)
                verify_side(c, c->dst_dir, c->dst_err, name, it,
                            it->type == FT_REG ? ferry_item_plan(b, it) : NULL,
                            &S_VERIFY_DST);
        if (it->result == R_DONE && (b->work & WORK_VERIFY_SRC))
                verify_side(c, c->src_dir, c->src_err, name, it, NULL,
                            &S_VERIFY_SRC);
        /* content differing wins: metadata only of an equal copy */
        if (it->result == R_DONE && (b->work & WORK_VERIFY_DST))
                ferry_copier_verify_meta(c, b, it);
}

void ferry_copier_verify(struct ferry_copier *c, struct ferry_batch *b,
                         struct ferry_item *it)
{
        int64_t since = 0;
        do
                verify_item(c, b, it);
        while (ferry_copier_wait_fds(c, it, &since));
}
