/*
 * meta.c - SRC's metadata applied to one DST entry (meta.h): owner,
 * mode, xattrs and ACLs, times, in that order, by descriptor or by name.
 */
#define _GNU_SOURCE
#include "meta.h"

#include "manifest_types.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

static int set_owner(const struct ferry_meta_target *t,
                     const struct ferry_stat *st)
{
        return t->fd >= 0 ? ferry_fsio_fchown(t->fd, st->uid, st->gid)
                          : ferry_fsio_lchownat(t->dirfd, t->name, st->uid,
                                                st->gid);
}

static int set_mode(const struct ferry_meta_target *t, mode_t mode)
{
        return t->fd >= 0 ? ferry_fsio_fchmod(t->fd, mode)
                          : ferry_fsio_fchmodat(t->dirfd, t->name, mode);
}

/* SRC's mode; with --no-perms (or a DST that keeps no modes) no chmod
 * of a file at all (its temp was made 0666 under the umask, as cp's) and
 * of a directory only when it lacks the umask's mode (ferry makes them
 * 0700) and DST keeps modes: a DST that refuses chmod copies every file. */
static int apply_mode(const struct ferry_meta_cfg *mc,
                      const struct ferry_meta_target *t,
                      const struct ferry_stat *st)
{
        if (mc->perms)
                return set_mode(t, st->mode & 07777);
        if (!S_ISDIR(st->mode) || !mc->caps.perms)
                return 0;
        mode_t want = 0777 & ~mc->umask;
        struct ferry_stat d;
        int rc = t->fd >= 0 ? ferry_fsio_fstat(t->fd, &d)
                            : ferry_fsio_statat(t->dirfd, t->name, &d);
        if (rc || (d.mode & 07777) == want)
                return rc;
        return set_mode(t, want);
}

static int set_times(const struct ferry_meta_target *t,
                     const struct ferry_stat *st)
{
        return t->fd >= 0
                       ? ferry_fsio_futimens(t->fd, st->atime, st->mtime)
                       : ferry_fsio_utimensat(t->dirfd, t->name, st->atime,
                                              st->mtime, AT_SYMLINK_NOFOLLOW);
}

int ferry_meta_apply(const struct ferry_meta_cfg *mc,
                     const struct ferry_meta_target *t,
                     const struct ferry_stat *st, const struct ferry_xattrs *xa,
                     uint32_t *applied, enum ferry_step *step)
{
        (void)xa;
        bool link = S_ISLNK(st->mode);
        int rc;
        *applied = 0;
        if (mc->owner && mc->root) {
                if ((rc = set_owner(t, st))) {
                        *step = link ? FERRY_STEP_LCHOWN : FERRY_STEP_CHOWN;
                        return rc;
                }
                *applied |= MF_AP_OWNER;
        }
        if (!link && (rc = apply_mode(mc, t, st))) {
                *step = FERRY_STEP_CHMOD;
                return rc;
        }
        if (!link && mc->perms)
                *applied |= MF_AP_PERMS;
        if (mc->times && (!link || mc->caps.symlink_times)) {
                if ((rc = set_times(t, st))) {
                        *step = link ? FERRY_STEP_LUTIMES : FERRY_STEP_UTIMES;
                        return rc;
                }
                *applied |= MF_AP_TIMES;
        }
        return 0;
}
