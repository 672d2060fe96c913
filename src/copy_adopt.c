/*
 * copy_adopt.c - --adopt: a file or symlink that DST already holds, as
 * cp -a, rsync -a or a moved ferry job left it, recorded as done without
 * a copy (copier.h: ferry_copier_adopt).
 *
 * Owns the test and the in-place action. A regular file is adopted when
 * DST's entry is a regular file of SRC's size and (unless --no-times)
 * mtime within a FAT's 2 s, and the XXH3-128 of both sides, each read in
 * full, is the same; a symlink when DST's is a symlink to the same target.
 * SRC must stay the file the scan saw while it is read (rule 5), DST the
 * entry that was stat'ed. Then SRC's metadata is applied to DST's entry in
 * place, as a row whose metadata alone moved (copy_meta.c), each part
 * compared first and set only when it differs (meta.h: an equal entry
 * keeps its ctime; DST's file is read with O_NOATIME), and the item
 * is R_DONE with the hash of SRC: its done mark waits for the same
 * barrier as a copy's (coord/barrier.c: a syncfs of DST, an fsync of its
 * directory; --durability=file: the file's own fsync here), so a file cp
 * wrote a moment ago and that sits in the page cache is durable before
 * the manifest says so. Anything else goes the normal way: the same size
 * and mtime with another content is copied (a temp and a rename: it is a
 * copy of this very version by size and mtime, which rule 9 lets ferry
 * replace), anything of another type, size or mtime meets rule 9 as
 * without --adopt: left alone and reported when ferry did not write it.
 * On a DST that compares names without case, an entry that is the copy
 * of another spelling of the name (names.h) is not adopted.
 * Every test short of reading either side is ferry_adopt_would_hash
 * (copy.h), which the dry run calls too (coord/dryrun.c): what it lists to
 * adopt is what the run hashes.
 * A DST file with more names (links) than SRC's is not adopted: applying
 * metadata in place would reach names ferry does not copy to, which
 * the rename of a copy leaves alone.
 * A hardlink follower is never adopted here: it is linked to its first
 * name's copy (copy_link.c), which replaces an equal copy (rsync -a
 * without -H) and leaves a name that already is that link as it is.
 * A DST entry that is SRC's own inode (cp -al, rsync --link-dest=SRC on
 * one file system) is never adopted either: an edit of SRC would change
 * DST under a done mark, and metadata applied in place would touch SRC
 * (its ctime: every later run would hash it again); it is copied, a new
 * inode under DST's name. DST's entry must stay as stat'ed (inode, size,
 * mtime, ctime) from before it is hashed until its metadata is applied:
 * a write that kept size and mtime still moves the ctime.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The DST entry read is still the one stat'ed first. */
static bool same_entry(const struct ferry_stat *a, const struct ferry_stat *b)
{
        return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
               ferry_time_eq(a->mtime, b->mtime) &&
               ferry_time_eq(a->ctime, b->ctime);
}

/* DST's entry d is SRC's s itself (a hard link across the trees). */
static bool same_inode(const struct ferry_stat *s, const struct ferry_stat *d)
{
        return s->dev == d->dev && s->ino == d->ino;
}

/* The tests of ferry_adopt_would_hash that need no directory. */
static bool adoptable(const struct ferry_copy_cfg *cfg,
                      const struct ferry_item *it,
                      const struct ferry_chunk_plan *plan,
                      const struct ferry_stat *s, const struct ferry_stat *d)
{
        /* a chunked copy under way or a repair is ferry's own work */
        if (!cfg->adopt || it->need != MF_NEED_DATA || it->link_off ||
            it->follower || (plan && (plan->resume || plan->repair)) ||
            same_inode(s, d))
                return false;
        /* a DST inode with more names than SRC's has names ferry does not
         * copy to (cp -al snapshots beside it): its metadata applied in
         * place would change theirs too; a copy replaces this name alone */
        if (it->type == FT_REG)
                return S_ISREG(s->mode) && S_ISREG(d->mode) &&
                       d->nlink <= s->nlink &&
                       ferry_copy_same_version(cfg, FT_REG, s, d);
        return it->type == FT_LINK && S_ISLNK(s->mode) && S_ISLNK(d->mode);
}

/* Applies SRC's st (and c->xa when xa) to DST's entry name (fd, or -1
 * for a symlink; its stat now) in place, each part only where it differs
 * (meta.h): an entry equal in full is not written at all, its ctime
 * stays. A shortfall is kept in it->meta_fail. 0, or the errno that fails
 * the item (*step). */
static int apply_in_place(struct ferry_copier *c, struct ferry_item *it, int fd,
                          const char *name, const struct ferry_stat *now,
                          const struct ferry_stat *st, bool xa,
                          const struct step **step)
{
        struct ferry_meta_target t = {fd, c->dst_dir, name, true, now};
        enum ferry_step fs = FERRY_STEP_NONE;
        it->meta_fail = (struct ferry_failure){0};
        int rc = ferry_meta_apply(&c->cfg.meta, &t, st, xa ? &c->xa : NULL,
                                  &it->applied, &fs);
        if (rc && ferry_copier_meta_failed(c, it, rc, fs))
                rc = 0; /* the data is there: a shortfall */
        if (rc) {
                *step = ferry_copier_dst_step(fs);
                return rc;
        }
        /* --durability=file: no syncfs makes it durable at the barrier */
        if (fd >= 0 && c->cfg.fsync_each && (rc = ferry_fsio_fsync(fd)))
                *step = &S_FSYNC;
        return rc;
}

/* Reads and hashes SRC's open file in (its fstat before) and DST's entry
 * name (its stat d); *equal when both hold the same bytes and neither
 * moved meanwhile. SRC's xattrs are read into c->xa. */
static int compare_files(struct ferry_copier *c, int in,
                         const struct ferry_stat *before, const char *name,
                         const struct ferry_stat *d, struct ferry_item *it,
                         int *out, bool *equal)
{
        uint8_t sh[16], dh[16];
        uint64_t ssize = 0, dsize = 0;
        struct ferry_stat after, d2;
        const struct step *step;
        *equal = false;
        ferry_copier_borrow(c, before->size);
        int rc = ferry_copier_hash_fd(c, in, sh, &ssize);
        if (!rc)
                rc = ferry_copier_read_xattrs(c, in, NULL, before, it, &step);
        if (!rc)
                rc = ferry_fsio_fstat(in, &after);
        if (rc || !ferry_copier_same_file(before, &after) ||
            ssize != after.size)
                goto out; /* the normal copy tells (rule 5) */
        /* DST's atime stays where it may, as SRC's: one thing less to set
         * back after */
        rc = ferry_copier_open_read(c->dst_dir, name, out);
        if (!rc)
                rc = ferry_fsio_fstat(*out, &d2);
        if (rc || !S_ISREG(d2.mode) || !same_entry(d, &d2))
                goto out;
        rc = ferry_copier_hash_fd(c, *out, dh, &dsize);
        if (!rc)
                rc = ferry_fsio_fstat(*out, &d2);
        if (rc || !same_entry(d, &d2))
                goto out;
        *equal = dsize == ssize && !memcmp(sh, dh, 16);
        it->adopt_differs = !*equal;
        if (*equal) {
                memcpy(it->hash, sh, 16);
                it->st = after;
        }
out:
        ferry_copier_unborrow(c);
        return rc;
}

static bool adopt_file(struct ferry_copier *c, const char *name,
                       struct ferry_item *it,
                       const struct ferry_chunk_plan *plan,
                       const struct ferry_stat *d)
{
        int in = -1, out = -1;
        struct ferry_stat before;
        bool equal = false;
        if (ferry_copier_open_source(c, name, &in))
                return false;
        /* SRC as opened: still the scan's file, and adoptable as that */
        if (!ferry_fsio_fstat(in, &before) &&
            ferry_copier_same_source(&it->st, &before) &&
            adoptable(&c->cfg, it, plan, &before, d) &&
            !compare_files(c, in, &before, name, d, it, &out, &equal) &&
            equal) {
                /* still the entry hashed: else not adopted, copied */
                struct ferry_stat now;
                if (ferry_fsio_fstat(out, &now) || !same_entry(d, &now)) {
                        equal = false;
                        goto out;
                }
                /* a shared job's claim that passed its fence: another
                 * host may have the row now; nothing done here */
                if (ferry_copier_fenced(&c->cfg)) {
                        it->result = R_NONE;
                        goto out;
                }
                const struct step *step = &S_COPY;
                int rc = apply_in_place(c, it, out, name, &now, &it->st, true,
                                        &step);
                if (rc && !ferry_copier_dst_gone(c, it, rc, step))
                        ferry_copier_set_result(it, rc, step);
        }
out:
        ferry_fsio_close(&out);
        ferry_fsio_close(&in);
        return equal;
}

static bool adopt_symlink(struct ferry_copier *c, const char *name,
                          struct ferry_item *it, const struct ferry_stat *d)
{
        struct ferry_stat st, again;
        char *src = NULL, *dst = NULL;
        size_t slen = 0, dlen = 0;
        bool equal = !ferry_fsio_statat(c->src_dir, name, &st) &&
                     adoptable(&c->cfg, it, NULL, &st, d) &&
                     !ferry_fsio_readlinkat(c->src_dir, name, &src, &slen) &&
                     !ferry_fsio_readlinkat(c->dst_dir, name, &dst, &dlen) &&
                     slen == dlen && !memcmp(src, dst, slen);
        const struct step *step = &S_COPY;
        equal = equal && !ferry_copier_read_xattrs(c, -1, name, &st, it, &step);
        /* rule 5: still the link the target was read of */
        equal = equal && !ferry_fsio_statat(c->src_dir, name, &again) &&
                ferry_copier_same_file(&st, &again);
        /* DST's still the link whose target was read */
        equal = equal && !ferry_fsio_statat(c->dst_dir, name, &again) &&
                same_entry(d, &again);
        if (equal && ferry_copier_fenced(&c->cfg)) /* as adopt_file */
                it->result = R_NONE;
        else if (equal) {
                XXH128_canonical_t canon;
                XXH128_canonicalFromHash(&canon, XXH3_128bits(src, slen));
                memcpy(it->hash, canon.digest, 16);
                it->st = st;
                int rc = apply_in_place(c, it, -1, name, &again, &st, true,
                                        &step);
                if (rc && !ferry_copier_dst_gone(c, it, rc, step))
                        ferry_copier_set_result(it, rc, step);
        }
        free(src);
        free(dst);
        return equal;
}

bool ferry_copy_other_spelling(const struct ferry_copy_cfg *cfg,
                               const struct ferry_item *it, int dst_dir,
                               int src_dir, const char *name, char *why,
                               size_t size)
{
        if (!ferry_names_case_insensitive(cfg->names))
                return false;
        bool clash = false;
        ferry_names_lock(cfg->names, it->dir_id, name);
        int rc = ferry_names_clash(cfg->names, dst_dir, src_dir, name, &it->st,
                                   &clash, why, size);
        ferry_names_unlock(cfg->names, it->dir_id, name);
        if (rc)
                snprintf(why, size, "cannot tell the name's case apart: %s",
                         strerror(rc));
        return rc || clash;
}

bool ferry_adopt_would_hash(const struct ferry_copy_cfg *cfg,
                            const struct ferry_item *it,
                            const struct ferry_chunk_plan *plan,
                            const struct ferry_stat *s, int dst_dir,
                            int src_dir, const char *name,
                            const struct ferry_stat *d)
{
        char why[384];
        return adoptable(cfg, it, plan, s, d) &&
               !ferry_copy_other_spelling(cfg, it, dst_dir, src_dir, name, why,
                                          sizeof(why));
}

bool ferry_adopt_same_target(int sfd, int dfd, const char *name)
{
        char *a = NULL, *b = NULL;
        size_t an = 0, bn = 0;
        bool same = !ferry_fsio_readlinkat(sfd, name, &a, &an) &&
                    !ferry_fsio_readlinkat(dfd, name, &b, &bn) && an == bn &&
                    !memcmp(a, b, an);
        free(a);
        free(b);
        return same;
}

bool ferry_copier_adopt(struct ferry_copier *c, struct ferry_batch *b,
                        struct ferry_item *it)
{
        const struct ferry_chunk_plan *plan = ferry_item_plan(b, it);
        const char *name = ferry_batch_at(b, it->name_off);
        struct ferry_stat d;
        /* the cheap tests first: most items of most runs end here */
        if (!c->cfg.adopt || it->need != MF_NEED_DATA || it->link_off ||
            (it->type != FT_REG && it->type != FT_LINK) ||
            ferry_fsio_statat(c->dst_dir, name, &d) ||
            !ferry_adopt_would_hash(&c->cfg, it, plan, &it->st, c->dst_dir,
                                    c->src_dir, name, &d))
                return false; /* nothing there (or the copy tells why) */
        it->result = R_DONE;
        bool kept = it->type == FT_REG ? adopt_file(c, name, it, plan, &d)
                                       : adopt_symlink(c, name, it, &d);
        if (!kept) {
                it->result = R_NONE;
                return false;
        }
        it->adopted = it->result == R_DONE;
        it->bytes = 0;
        return true;
}
