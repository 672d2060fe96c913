/*
 * copy_meta.c - a row whose data is as copied but whose metadata is not
 * (need MF_NEED_META, manifest/classify.c): SRC's metadata applied
 * in place to the DST entry ferry put there, no data read from SRC and
 * none written to DST (copier.h: ferry_copier_meta).
 *
 * Owns the in-place action and the ctime rule. The row's recorded stat
 * (it->st as handed out) is what was applied; SRC is stat'ed again:
 *   - its data moved (type, size, mtime, inode): a full copy;
 *   - mode, owner, link count or the digest of its xattrs and ACLs moved
 *     (with the ctime; SRC's xattrs are read first, by name, no data):
 *     their change explains the ctime, the metadata is applied in place
 *     (rsync does the same; --verify=source catches the rest);
 *   - the ctime alone moved, nothing of that explains it: `touch -r` may hide a
 * change of content behind a restored mtime, so SRC is read and hashed and
 * compared with the recorded hash before anything is written (equal: in place;
 *     differs: a full copy), unless --trust-mtime, which trusts size and
 *     mtime as rsync does;
 *   - nothing moved (an option wants what an earlier run left out): in
 *     place.
 * Rule 9 holds: the DST entry is changed only when it still is what the
 * manifest says ferry put there (ferry_copy_matches). A hardlink name
 * whose first name is done needs no DST work: that name's apply covers
 * the inode.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

static const struct step S_OPEN_DST = {FERRY_SIDE_DST, FERRY_STEP_OPEN};

/* A special's data is its kind and device number: the same kind (a FIFO
 * still a FIFO) and rdev are its data as made. */
static bool data_moved(const struct ferry_stat *was,
                       const struct ferry_stat *st, enum ferry_ftype t)
{
        bool type = t == FT_REG    ? S_ISREG(st->mode)
                    : t == FT_LINK ? S_ISLNK(st->mode)
                                   : ferry_copy_is_special(st->mode) &&
                                             (st->mode & S_IFMT) ==
                                                     (was->mode & S_IFMT) &&
                                             st->rdev == was->rdev;
        return !type || was->size != st->size ||
               !ferry_time_eq(was->mtime, st->mtime) || was->ino != st->ino;
}

/* The ctime alone moved (rows of an older ferry recorded no nlink). */
static bool ctime_only(const struct ferry_stat *was,
                       const struct ferry_stat *st)
{
        return !ferry_time_eq(was->ctime, st->ctime) && was->mode == st->mode &&
               was->uid == st->uid && was->gid == st->gid &&
               (!was->nlink || was->nlink == st->nlink);
}

/* The ctime rule for a regular file: true when its content is still the
 * recorded one (*rc: why it could not be read). */
static bool content_same(struct ferry_copier *c, const char *name,
                         const struct ferry_item *it, int *rc)
{
        uint8_t h[16];
        uint64_t size = 0;
        *rc = ferry_copier_hash(c, c->src_dir, name, FT_REG, h, &size);
        return !*rc && size == it->st.size && !memcmp(h, it->hash, 16);
}

/* Not ferry's entry any more: the normal refusal (rule 9). */
static void refuse(struct ferry_copier *c, struct ferry_batch *b,
                   struct ferry_item *it, const struct ferry_stat *d)
{
        ferry_copy_refusal(it, d, c->why, sizeof(c->why));
        it->result = R_FAILED;
        it->err = 0;
        it->fail =
                (struct ferry_failure){FERRY_SIDE_DST, FERRY_STEP_NOT_OURS, 0};
        if (ferry_batch_str(b, c->why, strlen(c->why), &it->why_off))
                it->why_off = 0;
}

/* Opens (regular) or stats (symlink) the DST entry; 0 and *fd, or errno. */
static int open_dst(struct ferry_copier *c, const char *name,
                    const struct ferry_item *it, int *fd, struct ferry_stat *d)
{
        *fd = -1;
        if (it->type != FT_REG)
                return ferry_fsio_statat(c->dst_dir, name, d);
        int rc = ferry_fsio_openat(c->dst_dir, name,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, fd);
        if (rc == ELOOP)
                return ferry_fsio_statat(c->dst_dir, name, d); /* refused */
        if (!rc && (rc = ferry_fsio_fstat(*fd, d)))
                ferry_fsio_close(fd);
        return rc;
}

/* Applies st to the DST entry in place; the result is the item's. */
static void apply(struct ferry_copier *c, struct ferry_batch *b,
                  struct ferry_item *it, const char *name,
                  const struct ferry_stat *st, bool xa)
{
        struct ferry_stat d;
        int fd = -1;
        int rc = open_dst(c, name, it, &fd, &d);
        if (rc == ENOENT) { /* gone from DST: copied again */
                it->need = MF_NEED_DATA;
                return;
        }
        if (rc) {
                if (!ferry_copier_dst_gone(c, it, rc, &S_OPEN_DST))
                        ferry_copier_set_result(it, rc, &S_OPEN_DST);
                return;
        }
        if (!ferry_copy_matches(&it->dst, &d)) {
                ferry_fsio_close(&fd);
                refuse(c, b, it, &d);
                return;
        }
        struct ferry_meta_target t = {fd, c->dst_dir, name, true, NULL};
        enum ferry_step fs = FERRY_STEP_NONE;
        rc = ferry_meta_apply(&c->cfg.meta, &t, st, xa ? &c->xa : NULL,
                              &it->applied, &fs);
        /* --durability=file: no syncfs makes it durable at the barrier */
        if (!rc && fd >= 0 && c->cfg.fsync_each && (rc = ferry_fsio_fsync(fd)))
                fs = FERRY_STEP_FSYNC;
        ferry_fsio_close(&fd);
        const struct step *step =
                fs == FERRY_STEP_FSYNC ? &S_FSYNC : ferry_copier_dst_step(fs);
        if (rc && ferry_copier_dst_gone(c, it, rc, step))
                return;
        /* the data is in DST whatever became of the metadata: done, and
         * what fell short is kept apart (the next run applies it again) */
        if (rc)
                it->meta_fail =
                        (struct ferry_failure){step->side, step->step, rc};
        if (c->cfg.meta.times && (it->applied & MF_AP_TIMES))
                it->dst.mtime = st->mtime;
        it->st = *st;
        it->result = R_DONE;
        it->bytes = 0;
}

bool ferry_copier_meta(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it)
{
        const char *name = ferry_batch_at(b, it->name_off);
        struct ferry_stat st;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (rc == ENOENT) {
                it->result = R_VANISHED;
                it->err = rc;
                it->fail = (struct ferry_failure){S_STAT_SRC.side,
                                                  S_STAT_SRC.step, rc};
                return true;
        }
        if (rc) {
                ferry_copier_set_result(it, rc, &S_STAT_SRC);
                return true;
        }
        if (data_moved(&it->st, &st, it->type)) {
                it->need = MF_NEED_DATA;
                return false; /* its data changed after the scan */
        }
        /* a hardlink name: re-linked when the ctime alone moved (cheap,
         * and right should its first name be copied anew); its xattrs
         * are its first name's to apply, not read here */
        if (it->link_off) {
                if (ctime_only(&it->st, &st))
                        return it->need = MF_NEED_DATA, false;
                it->applied = it->rec_applied;
                it->st = st;
                it->result = R_DONE;
                it->bytes = 0;
                return true;
        }
        /* SRC's xattrs and ACLs (xattr.h), by name, read before the ctime
         * rule: a setfattr or setfacl moves the ctime alone, and a digest
         * other than the recorded one explains it. Unreadable: DST's are
         * left as they are, and they explain nothing. */
        const struct step *xs = NULL;
        bool xa = (c->cfg.meta.xattrs || c->cfg.meta.acls) &&
                  !ferry_copier_read_xattrs(c, -1, name, &st, it, &xs);
        bool xmoved =
                xa && it->rec_has_xdigest && it->xdigest != it->rec_xdigest;
        bool only_ctime = !xmoved && ctime_only(&it->st, &st);
        if (only_ctime && it->type == FT_REG && !c->cfg.trust_mtime &&
            !content_same(c, name, it, &rc)) {
                if (rc && rc != ENOENT) {
                        ferry_copier_set_result(it, rc, &S_READ_SRC);
                        return true;
                }
                it->need = MF_NEED_DATA; /* touch -r hid a new content */
                return false;
        }
        apply(c, b, it, name, &st, xa);
        return it->need == MF_NEED_META;
}
