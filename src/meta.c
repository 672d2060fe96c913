/*
 * meta.c - SRC's metadata applied to one DST entry (meta.h): owner,
 * mode, xattrs and ACLs, times, in that order, by descriptor or by name
 * (not root: the group, when the process is in it).
 * A part that fails does not stop the parts after it: the first failure
 * is reported, and *applied names only the parts that worked.
 */
#define _GNU_SOURCE
#include "meta.h"

#include "buf.h"
#include "manifest_types.h"
#include "xattr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int set_owner(const struct ferry_meta_target *t,
                     const struct ferry_stat *st)
{
        return t->fd >= 0 ? ferry_fsio_fchown(t->fd, st->uid, st->gid)
                          : ferry_fsio_lchownat(t->dirfd, t->name, st->uid,
                                                st->gid);
}

/* Not root: the group alone (uid -1), as cp -a does. */
static int set_group(const struct ferry_meta_target *t, gid_t gid)
{
        return t->fd >= 0
                       ? ferry_fsio_fchown(t->fd, (uid_t)-1, gid)
                       : ferry_fsio_lchownat(t->dirfd, t->name, (uid_t)-1, gid);
}

void ferry_meta_cfg_groups(struct ferry_meta_cfg *mc)
{
        int n = getgroups(0, NULL);
        gid_t *all = n > 0 ? malloc((size_t)n * sizeof(*all)) : NULL;
        n = all ? getgroups(n, all) : 0;
        mc->euid = geteuid();
        mc->groups[0] = getegid();
        mc->ngroups = 1;
        for (int i = 0; i < n && mc->ngroups < FERRY_META_GROUPS; i++)
                if (all[i] != mc->groups[0])
                        mc->groups[mc->ngroups++] = all[i];
        free(all);
}

static bool in_groups(const struct ferry_meta_cfg *mc, gid_t gid)
{
        for (unsigned i = 0; i < mc->ngroups; i++)
                if (mc->groups[i] == gid)
                        return true;
        return false;
}

/* Not root, an entry ferry did not just make (in place, a directory):
 * *skip when it is another user's (no chown can work: cp -a's rule, and
 * the chmod after says why) or already has the group. */
static int group_skip(const struct ferry_meta_cfg *mc,
                      const struct ferry_meta_target *t, gid_t gid, bool *skip,
                      bool *has)
{
        struct ferry_stat d;
        *skip = *has = false;
        if (!t->in_place)
                return 0;
        int rc = t->now       ? (d = *t->now, 0)
                 : t->fd >= 0 ? ferry_fsio_fstat(t->fd, &d)
                              : ferry_fsio_statat(t->dirfd, t->name, &d);
        if (!rc) {
                *skip = d.uid != mc->euid || d.gid == gid;
                *has = d.uid == mc->euid && d.gid == gid;
        }
        return rc;
}

/* The owner part: root sets uid and gid; another user the group alone,
 * when it is one of theirs. *applied gets MF_AP_OWNER when it was set;
 * *called when a chown was made (which clears setuid bits and
 * capabilities: t->now no longer tells them). */
static int apply_owner(const struct ferry_meta_cfg *mc,
                       const struct ferry_meta_target *t,
                       const struct ferry_stat *st, uint32_t *applied,
                       bool *called)
{
        int rc = 0;
        bool skip = false, has = false;
        if (mc->root)
                skip = has = t->now && t->now->uid == st->uid &&
                             t->now->gid == st->gid;
        else if (!in_groups(mc, st->gid))
                return 0;
        else
                rc = group_skip(mc, t, st->gid, &skip, &has);
        *called = !rc && !skip;
        if (*called)
                rc = mc->root ? set_owner(t, st) : set_group(t, st->gid);
        if (!rc && (!skip || has))
                *applied |= MF_AP_OWNER;
        return rc;
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
                return t->now && (t->now->mode & 07777) == (st->mode & 07777)
                               ? 0
                               : set_mode(t, st->mode & 07777);
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

static int set_times(const struct ferry_meta_cfg *mc,
                     const struct ferry_meta_target *t,
                     const struct ferry_stat *st)
{
        /* equal: no call (without --atimes an access time alone is not
         * kept, as a re-run does not look for one) */
        if (t->now && ferry_time_eq(t->now->mtime, st->mtime) &&
            (!mc->atimes || ferry_time_eq(t->now->atime, st->atime)))
                return 0;
        return t->fd >= 0
                       ? ferry_fsio_futimens(t->fd, st->atime, st->mtime)
                       : ferry_fsio_utimensat(t->dirfd, t->name, st->atime,
                                              st->mtime, AT_SYMLINK_NOFOLLOW);
}

/* t->now: whether the entry holds e already, with e's value. */
static bool has_xattr(const struct ferry_meta_target *t,
                      const struct ferry_xattr *e)
{
        if (!t->now)
                return false;
        char small[256];
        char *buf = e->len < sizeof(small) ? small : malloc(e->len + 1);
        size_t len = 0;
        if (!buf)
                return false;
        /* one byte more than e's: a longer value says ERANGE */
        int rc = t->fd >= 0 ? ferry_fsio_fgetxattr(t->fd, e->name, buf,
                                                   e->len + 1, &len)
                            : ferry_fsio_lgetxattrat(t->dirfd, t->name, e->name,
                                                     buf, e->len + 1, &len);
        bool same = !rc && len == e->len && !memcmp(buf, e->value, len);
        if (buf != small)
                free(buf);
        return same;
}

static int set_xattr(const struct ferry_meta_target *t,
                     const struct ferry_xattr *e)
{
        return t->fd >= 0
                       ? ferry_fsio_fsetxattr(t->fd, e->name, e->value, e->len)
                       : ferry_fsio_lsetxattrat(t->dirfd, t->name, e->name,
                                                e->value, e->len);
}

static int remove_xattr(const struct ferry_meta_target *t, const char *name)
{
        int rc = t->fd >= 0
                         ? ferry_fsio_fremovexattr(t->fd, name)
                         : ferry_fsio_lremovexattrat(t->dirfd, t->name, name);
        return rc == ENODATA ? 0 : rc;
}

static int list_xattrs(const struct ferry_meta_target *t, struct ferry_buf *b,
                       size_t *len)
{
        for (int i = 0; i < 8; i++) {
                int rc = t->fd >= 0
                                 ? ferry_fsio_flistxattr(t->fd, b->buf,
                                                         b->alloc - 1, len)
                                 : ferry_fsio_llistxattrat(t->dirfd, t->name,
                                                           b->buf, b->alloc - 1,
                                                           len);
                if (rc != ERANGE)
                        return rc;
                if (ferry_buf_grow(b, b->alloc * 2))
                        return ENOMEM;
        }
        return EAGAIN;
}

unsigned ferry_meta_xattr_keep(const struct ferry_meta_cfg *mc)
{
        return (mc->xattrs ? FERRY_XA_XATTRS : 0u) |
               (mc->acls ? FERRY_XA_ACLS : 0u) |
               (mc->root ? 0u : FERRY_XA_USER_ONLY);
}

/* What a part of the xattrs is: DST may hold it, the options keep it. */
static bool holds(const struct ferry_meta_cfg *mc, const char *name)
{
        if (!ferry_xattr_kept(name, ferry_meta_xattr_keep(mc)))
                return false;
        if (ferry_xattr_is_acl(name))
                return mc->caps.acls;
        if (!strncmp(name, "user.", 5))
                return mc->caps.xattrs_user;
        return mc->caps.xattrs_other;
}

/* The outcome of the xattr part: the first failure, and which halves
 * (xattrs, ACLs) were applied in full. */
struct xa_out {
        int rc;
        enum ferry_step step;
        bool xattrs_full, acls_full;
};

static void xa_fail(struct xa_out *o, const char *name, int rc)
{
        bool acl = ferry_xattr_is_acl(name);
        if (acl)
                o->acls_full = false;
        else
                o->xattrs_full = false;
        if (!o->rc) {
                o->rc = rc;
                o->step = acl ? FERRY_STEP_ACL : FERRY_STEP_XATTR;
        }
}

/* In place (the target may carry attributes of its own: an earlier
 * copy, an ACL inherited from a default ACL): removes those SRC lacks,
 * within what is kept and held. */
static void remove_extra(const struct ferry_meta_cfg *mc,
                         const struct ferry_meta_target *t,
                         const struct ferry_xattrs *xa, struct xa_out *o)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        size_t len = 0;
        int rc = ferry_buf_grow(&b, 1024) ? ENOMEM : list_xattrs(t, &b, &len);
        if (rc == ENOTSUP)
                rc = 0, len = 0;
        if (rc) {
                xa_fail(o, "", rc);
                o->acls_full = false;
        }
        for (size_t at = 0; !rc && at < len;) {
                const char *name = b.buf + at;
                at += strnlen(name, len - at) + 1;
                if (!holds(mc, name) || ferry_xattrs_find(xa, name) >= 0)
                        continue;
                int err = remove_xattr(t, name);
                if (err)
                        xa_fail(o, name, err);
        }
        ferry_buf_release(&b);
}

static void apply_xattrs(const struct ferry_meta_cfg *mc,
                         const struct ferry_meta_target *t,
                         const struct ferry_xattrs *xa, struct xa_out *o)
{
        static const struct ferry_xattrs none;
        if (!xa)
                xa = &none;
        /* in full: every attribute of the namespaces DST holds (what it
         * cannot hold was said at the start, and the run does not want
         * it: coord/ingest.c set_wanted) */
        o->xattrs_full = mc->caps.xattrs_user;
        o->acls_full = mc->caps.acls;
        if (t->in_place)
                remove_extra(mc, t, xa, o);
        for (size_t i = 0; i < xa->n; i++) {
                const struct ferry_xattr *e = &xa->v[i];
                if (!holds(mc, e->name) || has_xattr(t, e))
                        continue;
                int rc = set_xattr(t, e);
                if (rc)
                        xa_fail(o, e->name, rc);
        }
}

static void note(int rc, enum ferry_step s, int *first, enum ferry_step *step)
{
        if (rc && !*first) {
                *first = rc;
                *step = s;
        }
}

int ferry_meta_apply(const struct ferry_meta_cfg *mc,
                     const struct ferry_meta_target *t,
                     const struct ferry_stat *st, const struct ferry_xattrs *xa,
                     uint32_t *applied, enum ferry_step *step)
{
        bool link = S_ISLNK(st->mode), called = false;
        int rc, first = 0;
        *applied = 0;
        if (mc->owner && (rc = apply_owner(mc, t, st, applied, &called)))
                note(rc, link ? FERRY_STEP_LCHOWN : FERRY_STEP_CHOWN, &first,
                     step);
        /* a chown made: the mode and xattrs as they are now are unknown */
        struct ferry_meta_target after = *t;
        if (called)
                after.now = NULL;
        t = &after;
        if (!link) {
                if ((rc = apply_mode(mc, t, st)))
                        note(rc, FERRY_STEP_CHMOD, &first, step);
                else if (mc->perms)
                        *applied |= MF_AP_PERMS;
        }
        /* after the chown (it clears security.capability) and the chmod
         * (an access ACL sets the group bits from its mask: a chmod after
         * it would widen the ACL) */
        if ((mc->xattrs || mc->acls) && xa) {
                struct xa_out o = {0, FERRY_STEP_NONE, false, false};
                apply_xattrs(mc, t, xa, &o);
                note(o.rc, o.step, &first, step);
                if (mc->xattrs && o.xattrs_full)
                        *applied |= MF_AP_XATTRS;
                if (mc->acls && o.acls_full)
                        *applied |= MF_AP_ACLS;
        }
        if (mc->times && (!link || mc->caps.symlink_times)) {
                if ((rc = set_times(mc, t, st)))
                        note(rc, link ? FERRY_STEP_LUTIMES : FERRY_STEP_UTIMES,
                             &first, step);
                else
                        *applied |= MF_AP_TIMES;
        }
        return first;
}

#define FINE_SLACK_NS   1000LL
#define COARSE_SLACK_NS 2000000000LL
#define COARSE_UNIT_NS  10000000U

bool ferry_meta_times_match(struct ferry_time dst, struct ferry_time src)
{
        if (ferry_time_near(dst, src, FINE_SLACK_NS))
                return true;
        return dst.nsec % COARSE_UNIT_NS == 0 &&
               ferry_time_near(dst, src, COARSE_SLACK_NS);
}

bool ferry_meta_owner_differs(const struct ferry_meta_cfg *mc, uint32_t uid,
                              uint32_t gid, uint32_t src_uid, uint32_t src_gid)
{
        return (mc->root && uid != src_uid) || gid != src_gid;
}
