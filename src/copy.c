/*
 * copy.c - one row at a time: copy, link or verify (copy.h, copier.h).
 *
 * Owns the copier's life (its buffer, XXH3 state and the cached
 * descriptors of the current source and destination directories) and the
 * procedure of one row: enter its directories, make attempts (its
 * metadata alone through copy_meta.c, a file's data through copy_data.c, a
 * symlink, a special file through copy_special.c, a hard link to its
 * leader through copy_link.c), retry what the policy of retry.h calls
 * transient, and turn the outcome into the item's result and struct
 * ferry_failure. The data loop and verify are in copy_data.c, what is put in
 * DST and rule 9 in copy_dst.c.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The steps (copier.h): side and step of each, for struct ferry_failure. */
const struct step S_COPY = {FERRY_SIDE_DST, FERRY_STEP_COPY};
const struct step S_OPEN_SRC = {FERRY_SIDE_SRC, FERRY_STEP_OPEN};
const struct step S_OPEN_SRC_DIR = {FERRY_SIDE_SRC, FERRY_STEP_OPENDIR};
const struct step S_READ_SRC = {FERRY_SIDE_SRC, FERRY_STEP_READ};
const struct step S_READ_SRC_LINK = {FERRY_SIDE_SRC, FERRY_STEP_READLINK};
const struct step S_STAT_SRC = {FERRY_SIDE_SRC, FERRY_STEP_STAT};
const struct step S_MAKE_DIR = {FERRY_SIDE_DST, FERRY_STEP_MKDIR};
const struct step S_CREATE = {FERRY_SIDE_DST, FERRY_STEP_CREATE};
const struct step S_CREATE_LINK = {FERRY_SIDE_DST, FERRY_STEP_SYMLINK};
const struct step S_WRITE = {FERRY_SIDE_DST, FERRY_STEP_WRITE};
const struct step S_FSYNC = {FERRY_SIDE_DST, FERRY_STEP_FSYNC};
const struct step S_CLOSE = {FERRY_SIDE_DST, FERRY_STEP_CLOSE};
const struct step S_LINK = {FERRY_SIDE_DST, FERRY_STEP_LINK};
const struct step S_RENAME = {FERRY_SIDE_DST, FERRY_STEP_RENAME};
const struct step S_VERIFY_DST = {FERRY_SIDE_DST, FERRY_STEP_VERIFY};
const struct step S_VERIFY_SRC = {FERRY_SIDE_SRC, FERRY_STEP_VERIFY};
const struct step S_XATTR_READ = {FERRY_SIDE_SRC, FERRY_STEP_XATTR_READ};

const struct step *ferry_copier_dst_step(enum ferry_step s)
{
        static const struct step dst[] = {
                [FERRY_STEP_CHOWN] = {FERRY_SIDE_DST, FERRY_STEP_CHOWN},
                [FERRY_STEP_CHMOD] = {FERRY_SIDE_DST, FERRY_STEP_CHMOD},
                [FERRY_STEP_UTIMES] = {FERRY_SIDE_DST, FERRY_STEP_UTIMES},
                [FERRY_STEP_LCHOWN] = {FERRY_SIDE_DST, FERRY_STEP_LCHOWN},
                [FERRY_STEP_LUTIMES] = {FERRY_SIDE_DST, FERRY_STEP_LUTIMES},
                [FERRY_STEP_XATTR] = {FERRY_SIDE_DST, FERRY_STEP_XATTR},
                [FERRY_STEP_ACL] = {FERRY_SIDE_DST, FERRY_STEP_ACL},
                [FERRY_STEP_MKNOD] = {FERRY_SIDE_DST, FERRY_STEP_MKNOD},
        };
        return (size_t)s < sizeof(dst) / sizeof(dst[0]) && dst[s].step
                       ? &dst[s]
                       : &S_COPY;
}

static void fail_at(struct ferry_item *it, const struct step *s, int err)
{
        it->fail = (struct ferry_failure){s->side, s->step, err};
}

int ferry_copier_new(const struct ferry_copy_cfg *cfg,
                     struct ferry_copier **out)
{
        struct ferry_copier *c = calloc(1, sizeof(*c));
        if (!c)
                return ENOMEM;
        c->cfg = *cfg;
        c->xxh = XXH3_createState();
        c->own = malloc(FERRY_COPIER_BUF);
        c->buf = c->own;
        c->buf_size = FERRY_COPIER_BUF;
        if (!c->xxh || !c->own) {
                ferry_copier_free(c);
                return ENOMEM;
        }
        c->root = geteuid() == 0;
        c->mknod = ferry_copy_can_make_devices();
        ferry_xattrs_init(&c->xa);
        c->dir_id = -1;
        c->src_dir = c->dst_dir = c->lead_dir = -1;
        *out = c;
        return 0;
}

void ferry_copier_leave_dir(struct ferry_copier *c)
{
        ferry_fsio_close(&c->src_dir);
        ferry_fsio_close(&c->dst_dir);
        c->dir_id = -1;
}

void ferry_copier_free(struct ferry_copier *c)
{
        if (!c)
                return;
        ferry_copier_leave_dir(c);
        ferry_copier_leave_leader(c);
        ferry_xattrs_release(&c->xa);
        if (c->xxh)
                XXH3_freeState(c->xxh);
        ferry_copier_unborrow(c);
        free(c->own);
        free(c);
}

void ferry_copier_borrow(struct ferry_copier *c, uint64_t size)
{
        if (c->buf != c->own || size <= FERRY_COPIER_BUF)
                return;
        char *b = ferry_bufpool_try_get(c->cfg.bufs);
        if (b) {
                c->buf = b;
                c->buf_size = ferry_bufpool_size(c->cfg.bufs);
        }
}

void ferry_copier_unborrow(struct ferry_copier *c)
{
        if (c->buf == c->own)
                return;
        ferry_bufpool_put(c->cfg.bufs, c->buf);
        c->buf = c->own;
        c->buf_size = FERRY_COPIER_BUF;
}

/* Opens the directories of it (source, destination or both) unless cached. */
void ferry_copier_enter_dir(struct ferry_copier *c, const struct ferry_batch *b,
                            const struct ferry_item *it)
{
        if (c->dir_id == it->dir_id)
                return;
        ferry_copier_leave_dir(c);
        const char *dir = ferry_batch_at(b, it->dir_off);
        c->src_err = c->dst_err = 0;
        c->dir_why[0] = '\0';
        if (b->work & (WORK_COPY | WORK_VERIFY_SRC))
                c->src_err =
                        ferry_fsio_open_dir(c->cfg.srcfd, dir, &c->src_dir);
        struct ferry_copy_dirs d = {c->cfg.srcfd, c->cfg.dstfd, c->cfg.names};
        if (b->work & WORK_COPY)
                c->dst_err = ferry_copy_make_dst_dir(
                        &d, dir, &c->dst_dir, c->dir_why, sizeof(c->dir_why));
        else if (b->work & WORK_VERIFY_DST)
                c->dst_err = ferry_copy_open_dst_dir(c->cfg.dstfd, dir, false,
                                                     &c->dst_dir);
        /* a file made here inherits an access ACL from a default ACL,
         * which SRC may not have: its metadata is applied in place */
        size_t dlen;
        c->dst_dacl =
                !c->dst_err && (b->work & WORK_COPY) && c->cfg.meta.acls &&
                !ferry_fsio_fgetxattr(c->dst_dir, "system.posix_acl_default",
                                      NULL, 0, &dlen);
        /* no descriptor is no answer about the directory: not kept */
        c->dir_id = ferry_fsio_out_of_fds(c->src_err) ||
                                    ferry_fsio_out_of_fds(c->dst_err)
                            ? -1
                            : it->dir_id;
}

/* A full destination stops the run (R_NOSPACE); ENOSPC or EDQUOT from a
 * step on SRC says nothing about DST and fails only this file. No
 * descriptor after fsio's wait (EMFILE, ENFILE) is no file's fault either:
 * it stops the run too (R_NOFDS), on either side. */
void ferry_copier_set_result(struct ferry_item *it, int err,
                             const struct step *s)
{
        it->err = err;
        fail_at(it, s, err);
        if (ferry_fsio_out_of_fds(err))
                it->result = R_NOFDS;
        else if ((err == ENOSPC || err == EDQUOT) && s->side == FERRY_SIDE_DST)
                it->result = R_NOSPACE;
        else
                it->result = R_FAILED;
}

/* Step s failed with err: when that may be DST's own failure and DST's
 * root no longer answers, it is R_DSTFAIL (err: why DST failed) and true:
 * nothing is retried, the run stops. */
bool ferry_copier_dst_gone(struct ferry_copier *c, struct ferry_item *it,
                           int err, const struct step *s)
{
        if (s->side != FERRY_SIDE_DST || !ferry_copy_dst_suspect(err))
                return false;
        int why = ferry_copy_dst_failed(c->cfg.dstfd);
        if (!why)
                return false;
        it->result = R_DSTFAIL;
        it->err = why;
        fail_at(it, s, err);
        return true;
}

int ferry_copier_read_xattrs(struct ferry_copier *c, int fd, const char *name,
                             const struct ferry_stat *st, struct ferry_item *it,
                             const struct step **step)
{
        const struct ferry_meta_cfg *mc = &c->cfg.meta;
        unsigned keep = ferry_meta_xattr_keep(mc);
        int rc = fd >= 0 ? ferry_xattrs_read_fd(&c->xa, fd, st->dev, keep)
                         : ferry_xattrs_read_at(&c->xa, c->src_dir, name,
                                                st->dev, keep);
        it->has_xdigest = !rc && (mc->xattrs || mc->acls);
        it->xdigest = it->has_xdigest ? ferry_xattrs_digest(&c->xa) : 0;
        if (rc)
                *step = &S_XATTR_READ;
        return rc;
}

static int copy_once(struct ferry_copier *c, const char *name,
                     struct ferry_item *it, struct ferry_chunk_plan *plan,
                     bool *changed, const struct step **step)
{
        int in = -1, out = -1, rc;
        char tmp[NAME_MAX + 1];
        bool keep = false; /* a chunked file's temp, for a resume */
        *changed = false;
        *step = &S_OPEN_SRC;
        if ((rc = ferry_copier_open_source(c, name, &in)))
                return rc == ELOOP ? (*changed = true, 0) : rc;
        struct ferry_stat before;
        if ((rc = ferry_fsio_fstat(in, &before)))
                goto out;
        if (!S_ISREG(before.mode)) {
                *changed = true;
                goto out;
        }
        /* a shared job's row: the inode number is the listing host's;
         * when the rest is the row's, this host's is the file's */
        if (c->cfg.foreign_rows && before.size == it->st.size &&
            ferry_time_eq(before.mtime, it->st.mtime) &&
            ferry_time_eq(before.ctime, it->st.ctime)) {
                it->st.dev = before.dev;
                it->st.ino = before.ino;
        }
        ferry_copy_temp_name(name, it->id, tmp);
        if (plan) /* ferry_copier_data borrows its own */
                ferry_copier_borrow(c, it->st.size);
        if (plan && plan->repair) { /* the bad chunks alone, in place */
                bool done = false;
                rc = ferry_copier_repair(c, plan, in, &before, it, name, &done,
                                         changed, step);
                if (rc || *changed || done)
                        goto out;
        }
        if (plan) {
                rc = ferry_copier_chunked(c, plan, in, &before, it, tmp, &out,
                                          changed, &keep, step);
        } else {
                *step = &S_CREATE;
                if ((rc = ferry_copier_create_temp(c, tmp, &out)))
                        goto out;
                rc = ferry_copier_data(c, in, out, &before, it, changed, step);
        }
        if (!rc && !*changed && c->cfg.fsync_each &&
            (rc = ferry_fsio_fsync(out))) {
                *step = &S_FSYNC;
                if (plan) { /* rule 3: its data is not to be trusted */
                        ferry_copier_plan_forget(plan);
                        keep = false;
                }
        }
        int crc = ferry_fsio_close(&out);
        if (!rc && crc) {
                rc = crc;
                *step = &S_CLOSE;
                if (plan) { /* a write-back error told at close */
                        ferry_copier_plan_forget(plan);
                        keep = false;
                }
        }
        if (!rc && !*changed) {
                ferry_fsio_crashpoint("after_write");
                *step = &S_RENAME;
                rc = ferry_copier_install(c, it, &before, tmp, name);
                if (!rc)
                        rc = ferry_copier_times_again(c, it, &before, name,
                                                      step);
        }
        /* a chunked file's temp stays for a resume, unless SRC changed
         * or the job is shared: no pass of one removes a temp nobody
         * resumes, so a host removes its own when its copy stops or fails
         * (one killed leaves it: the next claim of the row adopts its
         * chunks, copy_chunks.c, or replaces it). Past its fence too:
         * should the name be the next claim's temp by then, that claim's
         * rename finds nothing and it copies again, where a temp of this
         * host's left under the name would be installed as its copy. */
        if (c->cfg.foreign_rows)
                keep = false;
        if ((rc || *changed) && !(keep && !*changed))
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
out:
        ferry_copier_unborrow(c);
        ferry_fsio_close(&out);
        ferry_fsio_close(&in);
        return rc;
}

static int copy_symlink_once(struct ferry_copier *c, const char *name,
                             struct ferry_item *it, bool *changed,
                             const struct step **step)
{
        char *target = NULL;
        size_t len = 0;
        char tmp[NAME_MAX + 1];
        struct ferry_stat st;
        *changed = false;
        *step = &S_READ_SRC_LINK;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (!rc && !S_ISLNK(st.mode)) {
                *changed = true;
                return 0;
        }
        if (!rc)
                rc = ferry_fsio_readlinkat(c->src_dir, name, &target, &len);
        if (rc)
                return rc == EINVAL ? (*changed = true, 0) : rc;
        if ((rc = ferry_copier_read_xattrs(c, -1, name, &st, it, step))) {
                free(target);
                return rc;
        }
        ferry_copy_temp_name(name, it->id, tmp);
        *step = &S_CREATE_LINK;
        rc = ferry_fsio_symlinkat(target, c->dst_dir, tmp);
        if (rc == EEXIST) {
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
                rc = ferry_fsio_symlinkat(target, c->dst_dir, tmp);
        }
        if (!rc) {
                struct ferry_meta_target t = {-1, c->dst_dir, tmp, false, NULL};
                enum ferry_step fs = FERRY_STEP_NONE;
                it->meta_fail = (struct ferry_failure){0};
                rc = ferry_meta_apply(&c->cfg.meta, &t, &st, &c->xa,
                                      &it->applied, &fs);
                if (rc && ferry_copier_meta_failed(c, it, rc, fs))
                        rc = 0; /* the link is made: a shortfall */
                if (rc)
                        *step = ferry_copier_dst_step(fs);
        }
        if (!rc) {
                *step = &S_RENAME;
                rc = ferry_copier_install(c, it, &st, tmp, name);
                if (!rc)
                        rc = ferry_copier_times_again(c, it, &st, name, step);
        }
        if (rc)
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        else {
                XXH128_canonical_t canon;
                XXH128_canonicalFromHash(&canon, XXH3_128bits(target, len));
                memcpy(it->hash, canon.digest, 16);
                it->st = st;
        }
        free(target);
        return rc;
}

static int copy_attempt(struct ferry_copier *c, const struct ferry_batch *b,
                        const char *name, struct ferry_item *it, bool *changed,
                        const struct step **step)
{
        if (it->type == FT_LINK)
                return copy_symlink_once(c, name, it, changed, step);
        *changed = false;
        if (it->link_off) {
                int rc = ferry_copier_link_once(c, b, name, it, changed, step);
                /* EPERM: a DST that holds no second name (exFAT), for
                 * rows grouped by a run on a DST that did */
                if (*changed || (rc != ENOENT && rc != EXDEV && rc != EMLINK &&
                                 rc != EPERM && rc != ENAMETOOLONG))
                        return rc;
                it->link_off = 0; /* leader's copy unusable: copy data */
        }
        /* the leader's directory cached by a link (copy_link.c) is let go
         * before a file is opened: a copier holds FERRY_COPIER_FDS */
        ferry_copier_leave_leader(c);
        return it->type == FT_SPECIAL
                       ? ferry_copier_special_once(c, name, it, changed, step)
                       : copy_once(c, name, it,
                                   it->type == FT_REG ? ferry_item_plan(b, it)
                                                      : NULL,
                                   changed, step);
}

/* Whether a failed enter_dir is worth another try: a transient error (an
 * EIO from mkdir on a flaky share) or ENOENT on DST (someone removes what
 * ferry made there, perhaps DST's root: rm -rf), unless DST's root no
 * longer answers. */
static bool retry_dir(struct ferry_copier *c)
{
        if (ferry_copy_transient(c->src_err))
                return true;
        if (!ferry_copy_transient(c->dst_err) && c->dst_err != ENOENT)
                return false;
        return !(ferry_copy_dst_suspect(c->dst_err) &&
                 ferry_copy_dst_failed(c->cfg.dstfd));
}

/* Enters the item's directories, retrying transient errors like those of
 * the copy itself. */
static void enter_dir_retrying(struct ferry_copier *c, struct ferry_batch *b,
                               struct ferry_item *it)
{
        ferry_copier_enter_dir(c, b, it);
        for (unsigned attempt = 0; attempt < c->cfg.retries &&
                                   !atomic_load(c->cfg.stop) && retry_dir(c);
             attempt++) {
                ferry_copier_leave_dir(c);
                ferry_copy_backoff(attempt);
                ferry_copier_enter_dir(c, b, it);
        }
}

/* Fails it with the reason in c->why, which goes into b's arena (so
 * pointers into the arena are stale afterwards). */
static void fail_why(struct ferry_copier *c, struct ferry_batch *b,
                     struct ferry_item *it)
{
        it->result = R_FAILED;
        it->err = 0;
        it->fail = (struct ferry_failure){FERRY_SIDE_DST, c->why_step, 0};
        if (ferry_batch_str(b, c->why, strlen(c->why), &it->why_off))
                it->why_off = 0; /* no room: the step's words say it */
}

/* Checks the name and enters the item's directories; false when that
 * already gave the item its result (nothing to copy). */
static bool ready_to_copy(struct ferry_copier *c, struct ferry_batch *b,
                          struct ferry_item *it)
{
        c->why[0] = '\0';
        c->why_step = FERRY_STEP_NAME; /* unless place() says otherwise */
        /* a name DST cannot hold fails before anything is read */
        if (ferry_names_refused(c->cfg.names, ferry_batch_at(b, it->name_off),
                                c->why, sizeof(c->why))) {
                fail_why(c, b, it);
                return false;
        }
        enter_dir_retrying(c, b, it);
        if (ferry_fsio_out_of_fds(c->src_err)) {
                ferry_copier_set_result(it, c->src_err, &S_OPEN_SRC_DIR);
                return false;
        }
        /* the run stops (a signal, a full or failed DST): an error that
         * would have been retried fails nobody; the row stays pending */
        if ((c->src_err || c->dst_err) && atomic_load(c->cfg.stop) &&
            retry_dir(c)) {
                it->result = R_NONE;
                return false;
        }
        if (c->src_err) {
                it->result = c->src_err == ENOENT ? R_VANISHED : R_FAILED;
                it->err = c->src_err;
                fail_at(it, &S_OPEN_SRC_DIR, c->src_err);
                return false;
        }
        if (c->dst_err == ENOTDIR) { /* a file where SRC has a directory */
                it->result = R_IN_WAY;
                it->err = ENOTDIR;
                return false;
        }
        if (c->dst_err) {
                if (c->dir_why[0]) { /* a refused or colliding directory */
                        memcpy(c->why, c->dir_why, sizeof(c->why));
                        fail_why(c, b, it);
                } else if (!ferry_copier_dst_gone(c, it, c->dst_err,
                                                  &S_MAKE_DIR))
                        ferry_copier_set_result(it, c->dst_err, &S_MAKE_DIR);
                return false;
        }
        return true;
}

static void copy_item(struct ferry_copier *c, struct ferry_batch *b,
                      struct ferry_item *it)
{
        if (ferry_copier_fenced(&c->cfg)) { /* its claim may be another's */
                it->result = R_NONE;
                return;
        }
        /* a file DST cannot hold fails before anything is read or made */
        if (ferry_copier_too_big(c, it)) {
                fail_why(c, b, it);
                return;
        }
        if (!ready_to_copy(c, b, it))
                return;
        /* metadata alone (copy_meta.c), unless its data moved after all */
        if (it->need == MF_NEED_META && ferry_copier_meta(c, b, it))
                return;
        const char *name = ferry_batch_at(b, it->name_off);
        /* --adopt: DST's equal entry kept, no data written */
        if (ferry_copier_adopt(c, b, it)) {
                if (it->result == R_DONE)
                        ferry_copier_record_dst(c, it, name);
                return;
        }
        for (unsigned attempt = 0;; attempt++) {
                bool changed = false;
                const struct step *step = &S_COPY;
                int rc = copy_attempt(c, b, name, it, &changed, &step);
                if (!rc && !changed) {
                        it->result = R_DONE;
                        ferry_copier_record_dst(c, it, name);
                        return;
                }
                if (rc == EISDIR) { /* a directory where SRC has a file */
                        it->result = R_IN_WAY;
                        it->err = EISDIR;
                        return;
                }
                if (rc == ENOTUNIQ) { /* another spelling's entry? */
                        it->result = R_IN_WAY;
                        it->err = EEXIST;
                        return;
                }
                if (c->why[0]) { /* a clash by case: never retried */
                        fail_why(c, b, it);
                        return;
                }
                if (rc == ECANCELED) {
                        it->result = R_NONE;
                        return;
                }
                if (rc && ferry_copier_dst_gone(c, it, rc, step))
                        return;
                /* ENOENT on DST: someone removes what ferry made, perhaps
                 * DST's root (rm -rf), which the next probe tells */
                bool again = changed || ferry_copy_transient(rc) ||
                             (rc == ENOENT && step->side == FERRY_SIDE_DST);
                if (again && atomic_load(c->cfg.stop)) {
                        it->result = R_NONE; /* as for enter_dir above */
                        return;
                }
                if (again && attempt < c->cfg.retries) {
                        ferry_copy_backoff(attempt);
                        continue;
                }
                if (rc == ENOENT && step->side == FERRY_SIDE_SRC) {
                        it->result = R_VANISHED;
                        fail_at(it, step, rc);
                        return;
                }
                if (changed) {
                        it->result = R_CHANGED;
                        it->fail = (struct ferry_failure){
                                FERRY_SIDE_SRC, FERRY_STEP_CHANGED, 0};
                        it->err = 0;
                        return;
                }
                ferry_copier_set_result(it, rc, step);
                return;
        }
}

/* No descriptor for it (R_NOFDS): let go of the cached directories, which
 * another worker may need to finish its file, wait, and start the item
 * over, its attempts not counted; false when the wait ran out (the run
 * stops) or a stop was asked (then the item is not attempted). */
bool ferry_copier_wait_fds(struct ferry_copier *c, struct ferry_item *it,
                           int64_t *since)
{
        if (it->result != R_NOFDS)
                return false;
        ferry_copier_leave_dir(c);
        ferry_copier_leave_leader(c);
        if (!atomic_load(c->cfg.stop) && ferry_fsio_fd_wait(since, it->err))
                return true;
        if (atomic_load(c->cfg.stop))
                it->result = R_NONE;
        return false;
}

void ferry_copier_copy(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it)
{
        int64_t since = 0;
        do
                copy_item(c, b, it);
        while (ferry_copier_wait_fds(c, it, &since));
}

void ferry_copier_rest(struct ferry_copier *c)
{
        ferry_copier_leave_dir(c);
        ferry_copier_leave_leader(c);
}
