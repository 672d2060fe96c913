/*
 * copy_verify.c - the metadata half of --verify (copier.h): after DST's
 * content was found equal, DST's entry is compared with what the row
 * says ferry applied to it (the MF_AP_* bits of its `applied`): mode,
 * owner, mtime, the digest of its xattrs and ACLs, and for a name of a
 * hardlink group, that it is a link to its first name's copy. A
 * difference is R_META_DIFFERS with the parts named in the item's why;
 * content differing (copy_data.c) wins, and this check does not run.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "buf.h"
#include "fsio.h"
#include "manifest_types.h"
#include "xattr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What the row says ferry applied: its recorded bits, or for a row that
 * recorded none (an older ferry's) what this run's options would apply
 * to what DST can hold (dstcaps.h). */
static uint32_t bits_to_check(const struct ferry_copier *c,
                              const struct ferry_item *it)
{
        if (it->rec_applied)
                return it->rec_applied;
        const struct ferry_meta_cfg *mc = &c->cfg.meta;
        const struct ferry_dst_caps *caps = &mc->caps;
        return (mc->perms && caps->perms ? MF_AP_PERMS : 0) |
               (mc->times ? MF_AP_TIMES : 0) |
               (mc->owner && mc->root && caps->owner ? MF_AP_OWNER : 0) |
               (mc->xattrs && caps->xattrs_user ? MF_AP_XATTRS : 0) |
               (mc->acls && caps->acls ? MF_AP_ACLS : 0) |
               (it->link_off ? MF_AP_LINKS : 0);
}

/* Whether the digest of DST's entry name's xattrs and ACLs (d its stat),
 * read with the filter the copy used for SRC's (the parts in bits),
 * differs from the row's; false when it cannot be read (no proof). */
static bool xattrs_differ(struct ferry_copier *c, const char *name,
                          const struct ferry_stat *d,
                          const struct ferry_item *it, uint32_t bits)
{
        unsigned keep = (bits & MF_AP_XATTRS ? FERRY_XA_XATTRS : 0u) |
                        (bits & MF_AP_ACLS ? FERRY_XA_ACLS : 0u) |
                        (c->cfg.meta.root ? 0u : FERRY_XA_USER_ONLY);
        if (ferry_xattrs_read_at(&c->xa, c->dst_dir, name, d->dev, keep))
                return false;
        return ferry_xattrs_digest(&c->xa) != it->rec_xdigest;
}

/* Whether DST's entry d is not the inode of the hardlink group's first
 * name, whose DST path is leader (its directory opened as the copy's link
 * does: a path may be longer than PATH_MAX). A first name that cannot be
 * looked at for another reason than its absence proves nothing. */
static bool not_link_to(struct ferry_copier *c, const char *leader,
                        const struct ferry_stat *d)
{
        struct ferry_stat l;
        const char *slash = strrchr(leader, '/');
        int dfd = -1, rc = 0;
        if (slash) {
                char *dir = strndup(leader, (size_t)(slash - leader));
                rc = dir ? ferry_fsio_open_dir(c->cfg.dstfd, dir, &dfd)
                         : ENOMEM;
                free(dir);
        }
        if (!rc)
                rc = ferry_fsio_statat(slash ? dfd : c->cfg.dstfd,
                                       slash ? slash + 1 : leader, &l);
        ferry_fsio_close(&dfd);
        if (rc)
                return rc == ENOENT || rc == ENOTDIR;
        return l.ino != d->ino || l.dev != d->dev;
}

static void add_part(struct ferry_buf *why, const char *part)
{
        if (why->len)
                ferry_buf_add(why, ", ", 2);
        ferry_buf_add(why, part, strlen(part));
}

/* The MF_AP_* bits of DST's entry d that differ from the row's; their
 * names go into why. */
static uint32_t compare(struct ferry_copier *c, const struct ferry_batch *b,
                        const struct ferry_item *it, const struct ferry_stat *d,
                        struct ferry_buf *why)
{
        uint32_t bits = bits_to_check(c, it), differs = 0;
        bool link = it->type == FT_LINK;
        if ((bits & MF_AP_PERMS) && !link &&
            (d->mode & 07777) != (it->st.mode & 07777)) {
                differs |= MF_AP_PERMS;
                add_part(why, "mode");
        }
        /* not root, MF_AP_OWNER says the group alone was applied */
        if ((bits & MF_AP_OWNER) &&
            ferry_meta_owner_differs(&c->cfg.meta, d->uid, d->gid, it->st.uid,
                                     it->st.gid)) {
                differs |= MF_AP_OWNER;
                add_part(why, "owner");
        }
        if ((bits & MF_AP_TIMES) && (!link || c->cfg.meta.caps.symlink_times) &&
            !ferry_meta_times_match(d->mtime, it->st.mtime)) {
                differs |= MF_AP_TIMES;
                add_part(why, "mtime");
        }
        if ((bits & MF_AP_LINKS) && it->link_off && !link) {
                const char *leader = ferry_batch_at(b, it->link_off);
                if (not_link_to(c, leader, d)) {
                        differs |= MF_AP_LINKS;
                        add_part(why, "not a link to '");
                        ferry_buf_add(why, leader, strlen(leader));
                        ferry_buf_add(why, "'", 1);
                }
        }
        return differs;
}

/* Sets it's why to the text in why (into b's arena: pointers into it are
 * stale afterwards). */
static void set_why(struct ferry_batch *b, struct ferry_item *it,
                    const struct ferry_buf *why)
{
        if (why->oom || !why->len ||
            ferry_batch_str(b, why->buf, why->len, &it->why_off))
                it->why_off = 0; /* no room: the step's words say it */
}

void ferry_copier_verify_meta(struct ferry_copier *c, struct ferry_batch *b,
                              struct ferry_item *it)
{
        const char *name = ferry_batch_at(b, it->name_off);
        struct ferry_stat d;
        int rc = c->dst_err ? c->dst_err
                            : ferry_fsio_statat(c->dst_dir, name, &d);
        if (rc) {
                if (!ferry_copier_dst_gone(c, it, rc, &S_VERIFY_DST))
                        ferry_copier_set_result(it, rc, &S_VERIFY_DST);
                return;
        }
        struct ferry_buf why = FERRY_BUF_INIT;
        uint32_t differs = compare(c, b, it, &d, &why);
        uint32_t xbits = bits_to_check(c, it) & (MF_AP_XATTRS | MF_AP_ACLS);
        if (xbits && it->rec_has_xdigest &&
            xattrs_differ(c, name, &d, it, xbits)) {
                differs |= xbits;
                add_part(&why, "xattrs");
        }
        if (differs) {
                it->result = R_META_DIFFERS;
                it->fail = (struct ferry_failure){FERRY_SIDE_DST,
                                                  FERRY_STEP_META_DIFFERS, 0};
                it->differs = differs;
                set_why(b, it, &why);
        }
        ferry_buf_release(&why);
}
