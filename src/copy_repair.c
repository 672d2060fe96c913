/*
 * copy_repair.c - a done chunked file checked and mended by chunk
 * (chunks.h, copier.h).
 *
 * Owns verify's hash of a file with a plan (the whole file's XXH3-128 and
 * each chunk's, in one pass: a chunk whose hash differs from the plan's
 * gets CH_BAD) and the repair of a done file whose verify found CH_BAD
 * chunks (plan->repair): when DST's entry is still what ferry put there
 * (ferry_copy_matches against the row's record, rule 9), only the bad
 * chunks' bytes are read from SRC and written in place; DST is then read
 * back whole, and it must hash as the plan says (the recorded hashes of
 * the good chunks, the new ones of the rewritten); its times are set
 * again (the writes moved its mtime). Anything else (DST not ferry's, not
 * openable, a hash still wrong) falls back to a full chunked copy into a
 * temp file and a rename: never a half-mended file under the real name.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"
#include "ratelimit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static void digest(XXH3_state_t *x, uint8_t out[16])
{
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(x));
        memcpy(out, canon.digest, 16);
}

/* Chunk i hashed h: CH_BAD when it had a record and h is not it. */
static void judge(struct ferry_chunk_plan *plan, uint32_t i,
                  const uint8_t h[16])
{
        if (i >= plan->n || plan->chunks[i].state == CH_TODO)
                return; /* no record: nothing to say */
        plan->chunks[i].state =
                memcmp(h, plan->chunks[i].hash, 16) ? CH_BAD : CH_DONE;
}

int ferry_copier_hash_planned(struct ferry_copier *c, int fd,
                              struct ferry_chunk_plan *plan, uint8_t out[16],
                              uint64_t *size)
{
        XXH3_state_t *x = XXH3_createState();
        if (!x)
                return ENOMEM;
        uint64_t cs = plan->chunk_size ? plan->chunk_size : FERRY_CHUNK_SIZE;
        uint64_t off = 0;
        uint8_t h[16];
        int rc = 0;
        XXH3_128bits_reset(c->xxh);
        XXH3_128bits_reset(x);
#ifdef HAVE_POSIX_FADVISE
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        for (;;) {
                uint64_t left = cs - off % cs;
                size_t want = left < c->buf_size ? (size_t)left : c->buf_size,
                       got;
                if ((rc = ferry_fsio_pread(fd, c->buf, want, (off_t)off, &got)))
                        break;
                if (!got)
                        break;
                XXH3_128bits_update(c->xxh, c->buf, got);
                XXH3_128bits_update(x, c->buf, got);
                off += got;
                if (off % cs == 0) {
                        digest(x, h);
                        judge(plan, (uint32_t)(off / cs - 1), h);
                        XXH3_128bits_reset(x);
                        /* read once: its pages go (the rest: hash_side) */
                        ferry_fsio_uncache(fd, (off_t)(off - cs), (size_t)cs);
                }
                if (atomic_load(c->cfg.stop)) {
                        rc = ECANCELED;
                        break;
                }
        }
        if (!rc && off % cs) {
                digest(x, h);
                judge(plan, (uint32_t)(off / cs), h);
        }
        /* chunks past a short file's end are not there at all */
        for (uint64_t i = (off + cs - 1) / cs; !rc && i < plan->n; i++)
                if (plan->chunks[i].state == CH_DONE)
                        plan->chunks[i].state = CH_BAD;
        XXH3_freeState(x);
        if (!rc) {
                digest(c->xxh, out);
                *size = off;
        }
        return rc;
}

/* Rewrites chunk i of DST (dfd) from SRC (in), its new hash in the plan. */
static int rewrite(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                   uint32_t i, int in, int dfd, uint64_t size, XXH3_state_t *x,
                   uint64_t *written, bool *changed, const struct step **step)
{
        uint64_t off = i * plan->chunk_size;
        uint64_t end =
                off + plan->chunk_size < size ? off + plan->chunk_size : size;
        XXH3_128bits_reset(x);
        while (off < end) {
                size_t want = end - off < c->buf_size ? (size_t)(end - off)
                                                      : c->buf_size,
                       got;
                *step = &S_READ_SRC;
                int rc = ferry_fsio_pread(in, c->buf, want, (off_t)off, &got);
                if (rc)
                        return rc;
                if (got < want) {
                        *changed = true;
                        return 0;
                }
                XXH3_128bits_update(x, c->buf, got);
                *step = &S_COPY; /* --bwlimit, the pause: stopped meanwhile */
                if ((rc = ferry_rate_take(c->cfg.rate, got, c->cfg.stop)))
                        return rc;
                *step = &S_WRITE;
                if ((rc = ferry_fsio_pwrite(dfd, c->buf, got, (off_t)off)))
                        return rc;
                ferry_copier_count(c, got);
                *written += got;
                off += got;
                if (atomic_load(c->cfg.stop)) {
                        *step = &S_COPY;
                        return ECANCELED;
                }
        }
        digest(x, plan->chunks[i].hash);
        plan->chunks[i].state = CH_DONE;
        return 0;
}

/* Opens DST's name for the repair when it is ferry's (rule 9): its
 * descriptor, or -1 (then a full copy is made). */
static int open_ours(struct ferry_copier *c, const struct ferry_item *it,
                     const char *name, int *dfd)
{
        struct ferry_stat d, o;
        *dfd = -1;
        if (ferry_fsio_statat(c->dst_dir, name, &d) || !S_ISREG(d.mode) ||
            !ferry_copy_matches(&it->dst, &d) || d.size != it->st.size)
                return 0;
        int rc = ferry_fsio_openat(c->dst_dir, name,
                                   O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0, dfd);
        if (rc)
                return ferry_fsio_out_of_fds(rc) ? rc : 0;
        if (ferry_fsio_fstat(*dfd, &o) || o.ino != d.ino || o.dev != d.dev)
                ferry_fsio_close(dfd); /* replaced meanwhile */
        return 0;
}

/* The bad chunks rewritten in dfd and DST read back whole: *whole_ok when
 * every chunk now hashes as the plan says (and the whole file as the row
 * expects, when it->hash holds that). */
static int mend(struct ferry_copier *c, struct ferry_chunk_plan *plan, int in,
                int dfd, struct ferry_item *it, bool *whole_ok, bool *wrote,
                bool *changed, const struct step **step)
{
        XXH3_state_t *x = XXH3_createState();
        if (!x)
                return ENOMEM;
        uint64_t written = 0;
        int rc = 0;
        for (uint32_t i = 0; i < plan->n && !rc && !*changed; i++)
                if (plan->chunks[i].state == CH_BAD) {
                        rc = rewrite(c, plan, i, in, dfd, it->st.size, x,
                                     &written, changed, step);
                }
        XXH3_freeState(x);
        *wrote = written > 0;
        it->bytes += written; /* a fallback's copy adds its own */
        struct ferry_stat now;
        *step = &S_STAT_SRC;
        if (!rc && !*changed && !(rc = ferry_fsio_fstat(in, &now)))
                *changed = !ferry_copier_same_source(&now, &it->st);
        if (rc || *changed)
                return rc;
        uint8_t whole[16], zero[16] = {0};
        uint64_t size = 0;
        *step = &S_VERIFY_DST;
        if ((rc = ferry_copier_hash_planned(c, dfd, plan, whole, &size)))
                return rc;
        *whole_ok = size == it->st.size;
        for (uint32_t i = 0; i < plan->n; i++)
                *whole_ok = *whole_ok && plan->chunks[i].state == CH_DONE;
        if (memcmp(it->hash, zero, 16) && memcmp(it->hash, whole, 16))
                *whole_ok = false;
        memcpy(it->hash, whole, 16);
        return 0;
}

/* The plan becomes a full copy's: nothing kept, nothing repaired. */
static void full_copy(struct ferry_chunk_plan *plan)
{
        plan->repair = false;
        plan->resume = false;
        for (uint32_t i = 0; i < plan->n; i++)
                plan->chunks[i].state = CH_TODO;
}

int ferry_copier_repair(struct ferry_copier *c, struct ferry_chunk_plan *plan,
                        int in, const struct ferry_stat *before,
                        struct ferry_item *it, const char *name, bool *done,
                        bool *changed, const struct step **step)
{
        *done = false;
        if (!ferry_copier_same_source(before, &it->st)) {
                *changed = true;
                return 0;
        }
        int dfd = -1;
        *step = &S_VERIFY_DST;
        int rc = plan->chunk_size &&
                                 plan->n == ferry_chunk_count(it->st.size,
                                                              plan->chunk_size)
                         ? open_ours(c, it, name, &dfd)
                         : 0;
        if (rc || dfd < 0) {
                if (!rc)
                        full_copy(plan);
                return rc;
        }
        bool ok = false, wrote = false;
        rc = mend(c, plan, in, dfd, it, &ok, &wrote, changed, step);
        if (!rc && !*changed && ok) {
                /* the write moved DST's mtime, and may have cleared its
                 * setuid bits and capabilities: all of its metadata again */
                rc = ferry_copier_read_xattrs(c, in, NULL, before, it, step);
                if (!rc)
                        rc = ferry_copier_file_meta(c, dfd, &it->st, it, step);
        } else if (wrote) {
                /* DST as ferry recorded it, so the full copy that follows
                 * (now, or in a later run) may replace it (rule 9): it is
                 * still the file ferry wrote, its mtime put back */
                ferry_fsio_futimens(dfd, it->dst.mtime, it->dst.mtime);
                ferry_fsio_fsync(dfd);
        }
        if (!rc && !*changed && ok && !c->cfg.no_sync) {
                *step = &S_FSYNC;
                rc = ferry_fsio_fsync(dfd);
        }
        ferry_fsio_close(&dfd);
        if (rc || *changed)
                return rc;
        if (!ok) {
                full_copy(plan);
                return 0;
        }
        *done = true;
        return 0;
}
