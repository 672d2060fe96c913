/*
 * copy_link.c - a hardlink follower's row: its name in DST made a link to
 * the copy of its group's first name (copier.h: ferry_copier_link_once).
 *
 * Owns the copier's cached descriptor of the DST directory of the last
 * first name linked to (lead_dir, lead_path: a batch of followers mostly
 * links into one directory), rule 5 for a follower (one stat of SRC's
 * name, which must still be the file the scan saw), and the two ways a
 * link is made: straight to its name (linkat never replaces) for a row
 * that never was done, or through a temp name and place()'s rule 9
 * (copy_dst.c) when something is there already or the row was done.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ferry_copier_leave_leader(struct ferry_copier *c)
{
        ferry_fsio_close(&c->lead_dir);
        free(c->lead_path);
        c->lead_path = NULL;
        c->lead_len = 0;
}

/* The DST directory of the leader's copy ("dir/name" under DST; dir may
 * be "", DST's root): the cached descriptor when it is the last one
 * asked for (a batch of followers mostly links to one directory of
 * leaders), else opened on its own, so paths beyond PATH_MAX work too.
 * *base is the leader's name in it; *fresh whether it was just opened. */
static int leader_dir(struct ferry_copier *c, const char *leader,
                      const char **base, bool *fresh)
{
        const char *slash = strrchr(leader, '/');
        size_t len = slash ? (size_t)(slash - leader) : 0;
        *base = slash ? slash + 1 : leader;
        *fresh = false;
        if (c->lead_dir >= 0 && c->lead_len == len &&
            !memcmp(c->lead_path, leader, len))
                return 0;
        ferry_copier_leave_leader(c);
        *fresh = true;
        char *dir = strndup(leader, len);
        if (!dir)
                return ENOMEM;
        int rc = ferry_fsio_open_dir(c->cfg.dstfd, dir, &c->lead_dir);
        if (rc) {
                free(dir);
                return rc;
        }
        c->lead_path = dir;
        c->lead_len = len;
        return 0;
}

/* Links the leader's copy to name in the item's DST directory (linkat
 * never replaces: EEXIST when something is there). A cached directory
 * that no longer holds the leader's copy (ENOENT: DST's directory made
 * again meanwhile) is opened again once. */
static int link_leader(struct ferry_copier *c, const char *leader,
                       const char *name)
{
        const char *base;
        bool fresh;
        int rc = leader_dir(c, leader, &base, &fresh);
        if (!rc)
                rc = ferry_fsio_linkat(c->lead_dir, base, c->dst_dir, name);
        if (rc == ENOENT && !fresh) {
                ferry_copier_leave_leader(c);
                if (!(rc = leader_dir(c, leader, &base, &fresh)))
                        rc = ferry_fsio_linkat(c->lead_dir, base, c->dst_dir,
                                               name);
        }
        if (ferry_fsio_out_of_fds(rc))
                ferry_copier_leave_leader(c);
        return rc;
}

/* Rule 5 for a follower: SRC's name is still the file the scan saw
 * (type, dev, inode, size, mtime), so the leader's copy is its copy. The
 * rows of a shared job carry the dev and inode of the host that listed
 * them: its identity is then checked against the leader's SRC name
 * instead (leader_checked). */
static bool same_file(const struct ferry_copier *c,
                      const struct ferry_stat *was, const struct ferry_stat *st)
{
        return (was->mode & S_IFMT) == (st->mode & S_IFMT) &&
               (c->cfg.foreign_rows ||
                (was->dev == st->dev && was->ino == st->ino)) &&
               was->size == st->size && ferry_time_eq(was->mtime, st->mtime);
}

/* A shared job's follower: whether SRC's name of the leader ("dir/name"
 * under SRC, as under DST) is st's inode on this host's mount with the
 * ctime the leader's copy recorded (so that another host's numbering
 * never links two files alone, nor a name to the copy of an older state
 * of its inode), and whether DST's entry of the leader is still the copy
 * ferry made (rule 9: its record). EXDEV when not, or when either cannot
 * be looked up: the data is copied instead. */
static int leader_checked(struct ferry_copier *c, const char *leader,
                          const struct ferry_stat *st)
{
        struct ferry_lead_rec lr;
        memcpy(&lr, leader + strlen(leader) + 1, sizeof(lr));
        const char *slash = strrchr(leader, '/');
        int fd = -1, rc = 0;
        if (slash) {
                char *dir = strndup(leader, (size_t)(slash - leader));
                rc = dir ? ferry_fsio_open_dir(c->cfg.srcfd, dir, &fd) : ENOMEM;
                free(dir);
        }
        struct ferry_stat l, d;
        if (!rc)
                rc = ferry_fsio_statat(slash ? fd : c->cfg.srcfd,
                                       slash ? slash + 1 : leader, &l);
        ferry_fsio_close(&fd);
        if (!rc && (l.dev != st->dev || l.ino != st->ino ||
                    !ferry_time_eq(l.ctime, lr.ctime)))
                rc = EXDEV;
        const char *base;
        bool fresh;
        if (!rc)
                rc = leader_dir(c, leader, &base, &fresh);
        if (!rc)
                rc = ferry_fsio_statat(c->lead_dir, base, &d);
        if (!rc && !ferry_copy_matches(&lr.dst, &d))
                rc = EXDEV;
        if (ferry_fsio_out_of_fds(rc)) {
                ferry_copier_leave_leader(c);
                return rc; /* the item waits for a descriptor */
        }
        return rc == ENOMEM ? rc : rc ? EXDEV : 0;
}

/* A follower whose row never was done (no DST entry recorded as ferry's)
 * is linked straight to its final name on a DST that compares names as
 * bytes: linkat is atomic and never replaces. EEXIST (something is
 * there: a link made before a crash, or an entry ferry did not write)
 * goes the careful way, through a temp name and rule 9 (place()). */
static bool link_direct(const struct ferry_copier *c,
                        const struct ferry_item *it)
{
        return !it->dst.type && !ferry_names_case_insensitive(c->cfg.names);
}

/* The careful way: link to a temp name, then put it in place under rule 9
 * (ferry_copier_install). rename() does nothing when name already is a
 * link to the same inode (a re-run after a crash): the temp name must
 * still go then. */
static int link_via_temp(struct ferry_copier *c, const char *leader,
                         const char *name, struct ferry_item *it,
                         const struct ferry_stat *st, const struct step **step)
{
        char tmp[NAME_MAX + 1];
        ferry_copy_temp_name(name, it->id, tmp);
        *step = &S_LINK;
        int rc = link_leader(c, leader, tmp);
        if (rc == EEXIST) {
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
                rc = link_leader(c, leader, tmp);
        }
        if (rc)
                return rc;
        *step = &S_RENAME;
        rc = ferry_copier_install(c, it, st, tmp, name);
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        return rc;
}

/* A hardlink follower: link to the leader's copy. ENOENT: copy instead.
 * SRC's name is stat'ed once (rule 5: *changed when it is no longer the
 * file the scan saw); the scan's own stat is not enough for that. */
int ferry_copier_link_once(struct ferry_copier *c, const struct ferry_batch *b,
                           const char *name, struct ferry_item *it,
                           bool *changed, const struct step **step)
{
        struct ferry_stat st;
        *step = &S_STAT_SRC;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (rc)
                return rc;
        if (!same_file(c, &it->st, &st)) {
                *changed = true;
                return 0;
        }
        const char *leader = ferry_batch_at(b, it->link_off);
        if (c->cfg.foreign_rows && (rc = leader_checked(c, leader, &st)))
                return rc;
        /* a shared job's claim may be another host's by now: no name made
         * (a rename checks the same, ferry_copier_install) */
        if (ferry_copier_fenced(&c->cfg))
                return ECANCELED;
        rc = EEXIST;
        if (link_direct(c, it)) {
                *step = &S_LINK;
                rc = link_leader(c, leader, name);
                if (!rc)
                        ferry_fsio_crashpoint("after_rename");
        }
        if (rc == EEXIST)
                rc = link_via_temp(c, leader, name, it, &st, step);
        if (!rc)
                it->st = st;
        return rc;
}
