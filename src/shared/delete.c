/*
 * shared/delete.c - --delete in a shared job (internal.h): once the whole
 * job's scan of this gen is over and the rows it did not see are marked
 * removed (finish.c), each host run with --delete deletes their copies
 * from DST, before the metadata pass, as the SQLite run does
 * (coord/finish.c, coord/guard.c):
 *
 *  - nothing at all when a directory of this gen could not be listed (its
 *    rows look removed, and are not), or when SRC looks emptied or
 *    replaced (no file seen, or more than a handful gone and more than
 *    stay: FERRY_EDELETE unless --delete-anyway). The job's rows decide,
 *    so every host decides alike;
 *  - removed file rows a claim at a time (PG_DEL_FILES, under a lease and
 *    a token like any claim), each DST copy deleted only when it is still
 *    what ferry put there (rule 9: the row's DST record; treework.c) and
 *    SRC holds no other spelling of its name on a DST that compares names
 *    without case (that entry is the other spelling's copy now), then the
 *    removed directories, deepest first (rmdir: an empty one only);
 *  - what was deleted is made durable before its outcome commits (as a
 *    copy's done mark, rule 1: a syncfs, or an fsync of the directory
 *    where that does not cover directories, shared/barrier.c); the
 *    directory of every row tried gets its metadata applied again by the
 *    pass after (an entry left it: now, or in a try whose host died);
 *  - past this host's fence (2/3 of the claim's lease) nothing more is
 *    deleted: the claim may be another host's by then; each row's outcome
 *    is recorded only while the row is still the claim's;
 *  - --max-delete N bounds the gen's deletions, whichever hosts make them
 *    (manifest_pg/del_limit.c): every host that deletes in a gen has the
 *    first one's N; before it deletes a claim's rows a host takes a share
 *    of what is left, and gives back what it did not use with the
 *    outcomes. Past its share a row is kept, listed under -v, for the
 *    next gen; the hosts that deleted then say so once and exit 25.
 */
#define _GNU_SOURCE
#include "config.h"
#include "shared/internal.h"

#include "failure.h"
#include "fsio.h"
#include "names.h"
#include "names_fold.h"
#include "treework.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Rows a delete claim takes. */
#define DEL_CLAIM 500
/* More files gone at once than this, and more than stay, look like a SRC
 * replaced or emptied (coord/guard.c's DELETE_HANDFUL). */
#define DEL_HANDFUL 100

struct del_pass {
        struct shared *s;
        enum ferry_pg_kind kind;
        struct ferry_pg_del_outcome o[DEL_CLAIM];
        char why[DEL_CLAIM][300];
        size_t n;
        /* something left DST, here or (found gone) by a try of another
         * host whose outcome never came: sync before the outcomes */
        bool deleted;
        /* a case-insensitive DST (or one not known): SRC's other
         * spellings of a removed row's name are kept (names_fold.h) */
        struct shared_keep keep;
        bool told_lost;
        /* --max-delete: this claim's share of the gen's limit, the
         * entries of it deleted, and the rows kept for the limit */
        bool limited;
        uint64_t share, used, held;
};

/* A deletion that failed with err: true when DST itself failed (the run
 * stops, the row keeps its claim until the release). */
static bool dst_failed(struct shared *s, int err)
{
        int why = ferry_copy_dst_suspect(err) ? ferry_copy_dst_failed(s->dstfd)
                                              : 0;
        if (why)
                shared_fail(s, FERRY_EDSTFAIL, "DST '%s' failed: %s",
                            s->opt->dst, strerror(why));
        return why != 0;
}

static void told(struct del_pass *dp, const struct ferry_tree_job *t,
                 enum ferry_event ev, const char *what)
{
        const char *name = t->name ? t->name : "";
        shared_event(dp->s, ev, t->dir, strlen(t->dir), name, strlen(name),
                     what, NULL);
}

static bool is_mark(const char *dir, const char *name)
{
        return !dir[0] && name && !strcmp(name, SHARED_MARK);
}

/* A job of the tree work back: its row's outcome (not tried: past the
 * fence, the claim may be another's by now). */
static bool del_done(void *ctx, const struct ferry_tree_job *t)
{
        struct del_pass *dp = ctx;
        struct shared *s = dp->s;
        bool is_dir = t->op == TREE_DEL_DIR;
        /* a deletion not made durable is not recorded as one */
        int rc = t->rc ? t->rc : t->sync_rc;
        struct ferry_pg_del_outcome *o = &dp->o[dp->n];
        *o = (struct ferry_pg_del_outcome){
                .id = is_dir ? t->row.id : t->it.id,
                .tried = rc != ECANCELED,
                .forget = true,
                .dir = is_dir ? t->row.parent : t->it.dir_id,
        };
        char *why = dp->why[dp->n];
        enum ferry_dst_delete found = t->skip        ? DD_GONE
                                      : t->sync_rc   ? DD_ERROR
                                      : !is_dir      ? t->found
                                      : !rc          ? DD_DELETED
                                      : rc == ENOENT ? DD_GONE
                                                     : DD_ERROR;
        if (!o->tried)
                found = DD_GONE; /* nothing done: recorded as not tried */
        else if (t->skip && is_mark(t->dir, t->name))
                found = DD_OWN; /* else another spelling in SRC: kept */
        /* left out by the selection: the row stays, not claimed again in
         * this gen, nothing said (as a single host keeps it) */
        if (o->tried && t->skip && found == DD_GONE &&
            shared_select_protects(s, t->dir, t->name, is_dir)) {
                o->forget = false;
                dp->n++;
                return true;
        }
        switch (found) {
        case DD_DELETED:
                s->sum->files_deleted++;
                dp->used++;
                told(dp, t, FERRY_EV_DELETED, NULL);
                dp->deleted = true;
                break;
        case DD_GONE:
                dp->deleted = dp->deleted || (o->tried && !t->skip);
                break;
        case DD_OWN:
                told(dp, t, FERRY_EV_WARNING,
                     "is ferry's job mark: not deleted");
                break;
        case DD_CHANGED:
                told(dp, t, FERRY_EV_WARNING,
                     t->it.dst.type ? "not deleted: it was changed since "
                                      "ferry copied it"
                                    : "not deleted: ferry did not write it");
                break;
        case DD_ERROR:
                if (dst_failed(s, rc))
                        return false; /* the run stops: no outcome */
                snprintf(why, sizeof(dp->why[0]), "%s: %s",
                         is_dir ? "directory not deleted" : "cannot delete",
                         strerror(rc));
                told(dp, t, FERRY_EV_WARNING, why);
                o->forget = false;
                o->error = why;
                break;
        }
        dp->n++;
        return true;
}

bool shared_delete_keeps(const struct shared *s, struct shared_keep *k,
                         const char *dir, const char *name, bool is_dir)
{
        return is_mark(dir, name) ||
               shared_select_protects(s, dir, name, is_dir) ||
               (k->names &&
                ferry_fold_other_spelling(&k->fold, s->srcfd, k->names, dir,
                                          name ? name : ""));
}

int shared_keep_init(const struct shared *s, struct shared_keep *k)
{
        /* DST compares names without case, or cannot tell (its root looked
         * up by another spelling, nothing written): SRC's other
         * spellings are asked before each deletion */
        struct ferry_name_rules nr = {.case_insensitive = true};
        k->names = NULL;
        k->fold = NULL;
        return ferry_names_probe_case(s->dstfd) != 0
                       ? ferry_names_new(&nr, &k->names)
                       : 0;
}

void shared_keep_release(struct shared_keep *k)
{
        ferry_fold_free(k->fold);
        ferry_names_free(k->names);
        k->fold = NULL;
        k->names = NULL;
}

/* Whether the removed row at dir/name is kept from deletion
 * (shared_delete_keeps). */
static bool keep(struct del_pass *dp, const char *dir, const char *name,
                 bool is_dir)
{
        return shared_delete_keeps(dp->s, &dp->keep, dir, name, is_dir);
}

/* Whether DST holds an entry at dir/name (an error other than its
 * absence: yes). */
static bool dst_has(const struct shared *s, const char *dir, const char *name)
{
        int dfd = -1, rc = ferry_fsio_open_dir(s->dstfd, dir, &dfd);
        struct ferry_stat st;
        if (!rc)
                rc = ferry_fsio_statat(dfd, name, &st);
        ferry_fsio_close(&dfd);
        return rc != ENOENT && rc != ENOTDIR;
}

/* --max-delete, as on a single host (coord/guard.c): whether the row id
 * at dir/name (in directory row pdir) is kept because this claim's share
 * of the gen's limit is used up. The deletions under way are waited for
 * first once they could use it up (one that finds nothing to delete uses
 * none). A kept entry that DST holds is listed ("not deleting PATH:
 * --max-delete N reached"); its row stays removed, tried in this gen, for
 * the next gen's --delete. */
static bool held(struct del_pass *dp, struct ferry_treework *tw,
                 const char *dir, const char *name, int64_t id, int64_t pdir)
{
        if (!dp->limited)
                return false;
        if (dp->used + ferry_treework_pending(tw) >= dp->share)
                ferry_treework_drain(tw);
        if (dp->used < dp->share || !dst_has(dp->s, dir, name))
                return false;
        char why[64];
        snprintf(why, sizeof(why), "--max-delete %lld reached",
                 (long long)dp->s->opt->max_delete);
        shared_event(dp->s, FERRY_EV_WOULD_DELETE, dir, strlen(dir), name,
                     strlen(name), why, NULL);
        dp->o[dp->n++] = (struct ferry_pg_del_outcome){
                .id = id, .tried = true, .forget = false, .dir = pdir};
        dp->held++;
        return true;
}

/* The tree work's job for claimed row r; ENOMEM or 0. A path or name
 * with a NUL byte in it, which no listing makes (a manifest written by
 * something else), is no name in DST: the row is only forgotten. */
static int add_row(struct del_pass *dp, struct ferry_treework *tw,
                   struct ferry_batch *b, const struct ferry_pg_row *r)
{
        bool odd = (r->path && memchr(r->path, '\0', r->path_len)) ||
                   (r->name && memchr(r->name, '\0', r->name_len));
        char *path = strndup(r->path ? r->path : "", r->path_len);
        int rc = path ? 0 : ENOMEM;
        if (!rc && dp->kind == PG_DEL_FILES) {
                rc = shared_put_row(b, r);
                if (!rc) {
                        const struct ferry_item *it = &b->items[b->n - 1];
                        const char *name = ferry_batch_at(b, it->name_off);
                        bool kept = odd || keep(dp, path, name, false);
                        if (kept ||
                            !held(dp, tw, path, name, r->id, it->dir_id))
                                rc = ferry_treework_add_file(tw, TREE_DEL_FILE,
                                                             kept, b, it);
                }
        } else if (!rc) {
                /* a directory's path is its parent's and its name */
                char *slash = strrchr(path, '/');
                if (slash)
                        *slash = '\0';
                const char *dir = slash ? path : "",
                           *name = slash ? slash + 1 : path;
                bool kept = odd || keep(dp, dir, name, true),
                     hold = !kept && held(dp, tw, dir, name, r->id, r->dir);
                if (slash)
                        *slash = '/';
                if (hold) {
                        free(path);
                        return 0;
                }
                struct ferry_dir_row d = {.id = r->id,
                                          .parent = r->dir,
                                          .path = path,
                                          .path_len = strlen(path)};
                rc = ferry_treework_add_dir(tw, TREE_DEL_DIR, kept, &d);
        }
        free(path);
        return rc;
}

/* Rows a delete claim asks for: DEL_CLAIM, or in test builds
 * FERRY_PG_DEL_CLAIM (t87: small claims, so that two hosts both take
 * shares of --max-delete). */
static size_t claim_rows(void)
{
#ifdef FERRY_TESTING
        const char *e = getenv("FERRY_PG_DEL_CLAIM");
        long v = e ? strtol(e, NULL, 10) : 0;
        if (v >= 1 && v <= DEL_CLAIM)
                return (size_t)v;
#endif
        return DEL_CLAIM;
}

/* In test builds, FERRY_PG_DEL_WAIT_MS: a wait after each delete claim
 * and its share of --max-delete, before the deletions (t87: the other
 * host claims meanwhile, so that both take shares of the limit). */
static void claim_wait(void)
{
#ifdef FERRY_TESTING
        const char *e = getenv("FERRY_PG_DEL_WAIT_MS");
        long ms = e ? strtol(e, NULL, 10) : 0;
        if (ms > 0 && ms <= 10000) {
                struct timespec w = {ms / 1000, (ms % 1000) * 1000000L};
                nanosleep(&w, NULL);
        }
#endif
}

/* One claim of kind: its rows' DST entries deleted on the pool, made
 * durable, recorded; *none when none was claimable. */
static int delete_some(struct shared *s, struct del_pass *dp,
                       const struct ferry_tree_cfg *tc, bool *none)
{
        struct ferry_pg_claim c;
        shared_fence_claim(s);
        if (shared_claim(s, dp->kind, claim_rows(), &c, none) || *none)
                return s->code;
        struct ferry_treework *tw = NULL;
        struct ferry_batch *b = ferry_batch_new(0, c.n);
        dp->n = 0;
        dp->deleted = false;
        dp->share = dp->used = dp->held = 0;
        int rc = 0, prc = 0;
        if (dp->limited && (prc = ferry_pg_del_take(s->pg, c.n, &dp->share)))
                rc = shared_pg_fail(s, prc);
        claim_wait();
        if (!rc && (!b || ferry_treework_new(tc, s->pool, del_done, dp, &tw)))
                rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
        for (size_t i = 0; i < c.n && !rc; i++)
                if (add_row(dp, tw, b, &c.rows[i]))
                        rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
        ferry_treework_drain(tw);
        ferry_treework_free(tw);
        ferry_batch_free(b);
        rc = rc ? rc : s->code;
        /* rule 1: what left DST is durable before it is recorded (else a
         * power cut could bring back a copy whose row is gone) */
        if (!rc && dp->deleted && s->opt->durability == FERRY_DURABLE_BATCH)
                rc = shared_sync_dst(s);
        uint64_t lost = 0;
        /* what of the share was not deleted goes back with the outcomes */
        struct ferry_pg_del_share sh = {dp->share - dp->used, dp->held};
        if (!rc && (dp->n || sh.unused) &&
            (prc = ferry_pg_deleted(s->pg, dp->kind, c.token, dp->o, dp->n,
                                    dp->limited ? &sh : NULL, &lost)))
                rc = shared_pg_fail(s, prc);
        if (lost && !dp->told_lost) {
                dp->told_lost = true;
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "a lease ran out and another host took the "
                             "claim of rows this host was deleting: that "
                             "host records them",
                             NULL);
        }
        ferry_pg_claim_release(&c);
        return rc;
}

bool shared_delete_suspect(const struct shared *s,
                           const struct ferry_pg_delete_check *k, char *why,
                           size_t size)
{
        unsigned long long n = k->to_delete;
        if (!k->seen) {
                snprintf(why, size,
                         "the source '%s' holds no files but the manifest "
                         "records %llu files copied from it (a mount that "
                         "failed?)",
                         s->opt->src, n);
                return true;
        }
        if (n <= DEL_HANDFUL || n <= k->done)
                return false;
        snprintf(why, size,
                 "%llu of the %llu files copied from the source '%s' are "
                 "gone from it (a source replaced, or a mount below it that "
                 "failed?)",
                 n, n + (unsigned long long)k->done, s->opt->src);
        return true;
}

/* May this host delete? Not when the scan had errors, nor when SRC looks
 * emptied or replaced (s->delete_refused then, with the run's message). */
static int may_delete(struct shared *s, bool *may)
{
        struct ferry_pg_delete_check k;
        *may = false;
        int rc = ferry_pg_delete_check(s->pg, &k);
        if (rc)
                return shared_pg_fail(s, rc);
        if (!k.complete) {
                shared_event(s, FERRY_EV_WARNING, "", 0, "", 0,
                             "--delete: the scan had errors: nothing deleted",
                             NULL);
                return 0;
        }
        char why[700];
        if (k.to_delete && !s->opt->delete_anyway &&
            shared_delete_suspect(s, &k, why, sizeof(why))) {
                s->delete_refused = true;
                if (!s->err->msg[0])
                        snprintf(s->err->msg, sizeof(s->err->msg),
                                 "--delete refused: %s; nothing deleted; use "
                                 "--delete-anyway to delete them",
                                 why);
                return 0;
        }
        *may = true;
        return 0;
}

/* "--max-delete N", or "no --max-delete" for -1, into buf. */
static const char *limit_text(int64_t n, char *buf, size_t size)
{
        if (n < 0)
                return "no --max-delete";
        snprintf(buf, size, "--max-delete %lld", (long long)n);
        return buf;
}

int shared_delete_join(struct shared *s)
{
        if (!s->opt->delete_removed)
                return 0;
        int64_t mine = s->opt->max_delete < 0 ? -1 : s->opt->max_delete,
                theirs = mine;
        bool found = false;
        int rc = ferry_pg_del_limit(s->pg, mine, &theirs, &found);
        if (rc)
                return shared_pg_fail(s, rc);
        return found ? shared_delete_limit_check(s, theirs) : 0;
}

int shared_delete_limit_check(struct shared *s, int64_t theirs)
{
        int64_t mine = s->opt->max_delete < 0 ? -1 : s->opt->max_delete;
        if (theirs == mine)
                return 0;
        char a[48], b[48];
        return shared_fail(s, FERRY_EUSAGE,
                           "job '%s' deletes with %s in this run; this host "
                           "has %s: give every host that deletes in a run "
                           "the same --max-delete (another may start once "
                           "this one is over)",
                           s->opt->job_name, limit_text(theirs, a, sizeof(a)),
                           limit_text(mine, b, sizeof(b)));
}

/* --max-delete's one message once the gen's deletions are over (every
 * host's outcomes are in): the whole job's counts, exit 25 when some were
 * kept for it. */
static int report_held(struct shared *s)
{
        struct ferry_pg_del_budget b;
        int rc = ferry_pg_del_budget(s->pg, &b);
        if (rc)
                return shared_pg_fail(s, rc);
        if (!b.held)
                return 0;
        s->delete_held = true;
        if (!s->err->msg[0])
                snprintf(s->err->msg, sizeof(s->err->msg),
                         "--max-delete %lld reached: %llu entries deleted, "
                         "%llu kept (-v lists them); the next run with "
                         "--delete goes on",
                         (long long)b.limit, (unsigned long long)b.used,
                         (unsigned long long)b.held);
        return 0;
}

int shared_delete(struct shared *s)
{
        bool may = false;
        if (!s->opt->delete_removed || may_delete(s, &may) || !may)
                return s->code;
        struct ferry_tree_cfg tc = {
                .srcfd = s->srcfd,
                .dstfd = s->dstfd,
                .meta = s->ccfg.meta,
                .fsync_deletes = s->opt->durability != FERRY_DURABLE_NONE &&
                                 !shared_dirs_covered(s),
                .fence = &s->fence,
        };
        struct del_pass *dp = calloc(1, sizeof(*dp));
        if (!dp)
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        dp->s = s;
        dp->limited = s->opt->max_delete >= 0;
        if (shared_keep_init(s, &dp->keep)) {
                free(dp);
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        }
        int rc = 0, idle = 0; /* shared_idle's wait */
        while (!rc && !atomic_load(s->stop) && !s->moved) {
                /* files first, then the directories they leave empty */
                bool none = false, some = false;
                for (int k = 0; k < 2; k++) {
                        dp->kind = k ? PG_DEL_DIRS : PG_DEL_FILES;
                        none = false;
                        while (!rc && !none && !atomic_load(s->stop)) {
                                rc = delete_some(s, dp, &tc, &none);
                                some = some || !none;
                        }
                }
                /* none claimable: the end, or other claims hold some
                 * (another host's, or one whose host died: its lease
                 * runs out) */
                uint64_t out = 0;
                int prc = rc ? 0 : ferry_pg_deleting(s->pg, &out);
                if (prc)
                        rc = shared_pg_fail(s, prc);
                if (rc || !out)
                        break;
                shared_renew(s); /* this host's last_seen */
                if (some)
                        idle = 0;
                shared_idle(&idle);
        }
        bool limited = dp->limited;
        shared_keep_release(&dp->keep);
        free(dp);
        if (!rc && limited && !atomic_load(s->stop) && !s->moved)
                rc = report_held(s);
        return rc;
}
