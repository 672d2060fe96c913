/*
 * shared/finish.c - the end of a shared job: once no directory is left to
 * list and no file to copy (none pending, none leased), the hosts that
 * get there mark the rows this gen's scan did not see removed (the one
 * that marks them removes the temps those not done may have left: a host
 * killed while it copied one, and no claim of the row came after; as a
 * single host's stale temps, coord/finish.c), run
 * --delete's deletions when they were given it (delete.c: they change
 * directories' times, so they come first), then claim the listed
 * directories whose metadata is still to apply
 * and give each its mode, owner, xattrs and ACLs and times in DST (making
 * it first when it is missing: an empty directory), children before
 * parents, through the tree work of the SQLite run (treework.h), on the
 * copy's worker threads once each directory takes a round trip. A host
 * ends only when no directory is left to apply: it waits for those other
 * claims hold; a claim of a host that died, or one whose reply was lost
 * (a server restart), expires with its lease and is claimed again.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "copy.h"
#include "failure.h"
#include "fsio.h"
#include "treework.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Directories a claim of the metadata pass takes. */
#define META_CLAIM 200

struct meta_pass {
        struct shared *s;
        struct ferry_pg_outcome o[META_CLAIM];
        char why[META_CLAIM][400]; /* a job's why, 384 */
        size_t n;
};

static bool meta_done(void *ctx, const struct ferry_tree_job *t)
{
        struct meta_pass *mp = ctx;
        struct shared *s = mp->s;
        size_t i = mp->n++;
        mp->o[i] =
                (struct ferry_pg_outcome){.id = t->row.id, .result = PG_DONE};
        int err = t->rc ? t->rc : t->sync_rc;
        if (!err && !t->why[0])
                return true;
        struct ferry_failure f = ferry_failure_of(FERRY_SIDE_DST, t->step, err);
        char msg[200];
        snprintf(mp->why[i], sizeof(mp->why[i]), "%s",
                 t->why[0] ? t->why : ferry_failure_str(&f, msg, sizeof(msg)));
        mp->o[i].result = PG_FAILED;
        mp->o[i].error = mp->why[i];
        s->sum->meta_failed++;
        shared_event(s, FERRY_EV_META_FAILED, t->row.path, t->row.path_len, "",
                     0, mp->why[i], &f);
        return true;
}

static int by_id_desc(const void *a, const void *b)
{
        int64_t x = ((const struct ferry_pg_row *)a)->id;
        int64_t y = ((const struct ferry_pg_row *)b)->id;
        return (x < y) - (x > y);
}

/* One claim's directories; *none when none was left. */
static int apply_some(struct shared *s, const struct ferry_tree_cfg *tc,
                      struct meta_pass *mp, bool *none)
{
        struct ferry_pg_claim c;
        if (shared_claim(s, PG_DIR_META, META_CLAIM, &c, none) || *none)
                return s->code;
        int rc = 0;
        qsort(c.rows, c.n, sizeof(*c.rows), by_id_desc);
        struct ferry_treework *tw = NULL;
        mp->n = 0;
        if (ferry_treework_new(tc, s->pool, meta_done, mp, &tw)) {
                ferry_pg_claim_release(&c);
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        }
        for (size_t i = 0; i < c.n && !rc; i++) {
                const struct ferry_pg_row *r = &c.rows[i];
                char *path = strndup(r->path, r->path_len);
                if (!path) {
                        rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
                        break;
                }
                struct ferry_dir_row d = {
                        .id = r->id,
                        .parent = r->dir,
                        .path = path,
                        .path_len = r->path_len,
                        .mode = r->mode & 07777,
                        .uid = r->uid,
                        .gid = r->gid,
                        .mtime = shared_time(r->mtime_ns),
                };
                if (ferry_treework_add_dir(tw, TREE_APPLY_DIR, false, &d))
                        rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
                free(path);
        }
        ferry_treework_drain(tw);
        ferry_treework_free(tw);
        /* rule 1: what was applied is durable before it is marked (each
         * directory fsynced by the tree work where this does not cover
         * them: tc->fsync_dirs) */
        if (!rc && mp->n && s->opt->durability == FERRY_DURABLE_BATCH)
                rc = shared_sync_dst(s);
        bool refused = false;
        if (!rc && mp->n) {
                int prc = ferry_pg_complete(s->pg, PG_DIR_META, c.token, mp->o,
                                            mp->n, &refused);
                /* a deletion made one of them apply again (delete.c):
                 * the others go back now, not when the lease runs out */
                if (!prc && refused)
                        prc = ferry_pg_meta_drop(s->pg, c.token);
                if (prc)
                        rc = shared_pg_fail(s, prc);
        }
        ferry_pg_claim_release(&c);
        return rc;
}

/* The temps the rows just marked removed may have left in DST, each
 * directory opened once (t comes in directory order). A row with a NUL
 * in its path or name has no name in DST. What fails stays, as a single
 * host's remove_temp leaves it. */
static void remove_temps(struct shared *s, const struct ferry_pg_temp *t,
                         size_t n)
{
        int dfd = -1;
        const char *at = NULL;
        for (size_t i = 0; i < n; i++) { /* a stop too: none is found again */
                if (strlen(t[i].path) != t[i].path_len ||
                    strlen(t[i].name) != t[i].name_len)
                        continue;
                if (!at || strcmp(at, t[i].path)) {
                        ferry_fsio_close(&dfd);
                        at = t[i].path;
                        if (ferry_fsio_open_dir(s->dstfd, at, &dfd))
                                dfd = -1;
                }
                char tmp[NAME_MAX + 1];
                ferry_copy_temp_name(t[i].name, t[i].id, tmp);
                if (dfd >= 0)
                        ferry_fsio_unlinkat(dfd, tmp, 0);
        }
        ferry_fsio_close(&dfd);
}

int shared_finish_dirs(struct shared *s)
{
        struct ferry_tree_cfg tc = {
                .srcfd = s->srcfd,
                .dstfd = s->dstfd,
                .meta = s->ccfg.meta,
                .fsync_dirs = s->opt->durability != FERRY_DURABLE_NONE &&
                              !shared_dirs_covered(s),
        };
        struct meta_pass *mp = calloc(1, sizeof(*mp));
        if (!mp)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        mp->s = s;
        /* a job run again: what its scan did not see is gone from SRC */
        uint64_t removed = 0;
        struct ferry_pg_temp *temps = NULL;
        size_t nt = 0;
        /* except what the selection leaves out (not seen, not gone) */
        int rc = shared_select_keep(s);
        if (!rc && (rc = ferry_pg_mark_removed(s->pg, &removed, &temps, &nt)))
                rc = shared_pg_fail(s, rc);
        remove_temps(s, temps, nt);
        ferry_pg_temps_free(temps, nt);
        /* deletions first: they change their directories' times */
        if (!rc)
                rc = shared_delete(s);
        int idle = 0; /* shared_idle's wait */
        while (!rc && !atomic_load(s->stop)) {
                bool none = false, some = false;
                while (!rc && !none && !atomic_load(s->stop)) {
                        rc = apply_some(s, &tc, mp, &none);
                        some = some || !none;
                }
                if (rc || atomic_load(s->stop))
                        break;
                /* none claimable: the end, or some are leased (another
                 * host applies them, or a claim whose reply was lost, a
                 * host that died, whose lease runs out): wait for them */
                uint64_t left = 0, leased = 0;
                int prc =
                        ferry_pg_remaining(s->pg, PG_DIR_META, &left, &leased);
                if (prc)
                        rc = shared_pg_fail(s, prc);
                if (rc || !left || s->moved)
                        break;
                shared_renew(s); /* this host's last_seen */
                if (some)
                        idle = 0;
                shared_idle(&idle);
        }
        free(mp);
        return rc;
}
