/*
 * shared/dryrun.c - the dry run of a shared job (ferry -n --manifest
 * postgresql://... --job-name NAME SRC DST): what a run of this host would
 * copy, adopt or refuse, said as a single host's dry run says it; nothing
 * is written (no job, no host, no row, no mark in DST).
 *
 * What a run would take: of a job whose run is under way (rows pending,
 * directories to list), the pending rows (ferry_pg_pending_files) and what
 * listing the directories still to list would find; of a job that is
 * over, or a new one, what listing all of SRC would find (a run begins a
 * new scan). This host alone lists, one directory at a time and each
 * whole, as a claimed directory is listed (scan.c, shared_list_dir: the
 * selection, -x, the kinds of entries the options copy), and asks the
 * manifest about each directory's files at once (ferry_pg_dry_files: the
 * test of a change that a run's listing applies, so a file is listed when
 * a run would make it pending: new, changed, or not done; one pending
 * already is the pending rows' to say). For each such file it looks at
 * DST's entry as the copy would: none, or one ferry's record says is its
 * copy (ferry_copy_is_ours, with a shared job's rule on unmarked copies),
 * is a copy; a file --adopt would hash is an adoption; anything else is a
 * refusal (rule 9), a warning and a failed file, as on a single host. A
 * job that does not exist yet would copy everything; one whose SRC or DST
 * is not this host's is refused as a run is. A name of a hard-link group
 * after the first met is a copy, never an adoption (the run links it).
 *
 * With --delete: which rows a run would mark removed is the whole job's
 * scan, so the ids of the rows this listing finds are kept in a temporary
 * table of the dry run's own session (manifest_pg/dryrun.c); once the
 * listing is over (and complete), the rows a run's --delete would claim
 * are those it does not hold: weighed by the run's guard (SRC emptied or
 * replaced: nothing would be deleted, exit 25), and each one whose DST
 * entry is still ferry's copy listed as a deletion, past --max-delete as
 * one kept, as a single host's dry run lists them (coord/dryrun.c).
 * A SRC whose top level changed is the job's when a run would take it
 * (ferry_pg_job_find_new_src, the join's rule); a selection or a
 * --max-delete other than those of the run under way is refused, as a
 * run's join refuses it (same_options). Like `ferry status`, it brings
 * the database's schema up to date (ferry_pg_connect).
 */
#define _GNU_SOURCE
#include "shared/internal.h"
#include "manifest_pg/pg_dry.h"

#include "copy.h"
#include "fsio.h"
#include "manifest_types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A fence that never passes: it only marks the copy rules' config as a
 * shared job's (ferry_copy_is_ours: written_since for unmarked rows). */
static const _Atomic int64_t never = INT64_MAX;

struct dry {
        char **stack; /* directories to list, n of cap */
        size_t n, cap;
        const char *path; /* the directory being listed */
        size_t path_len;
        bool job;    /* the job exists */
        bool over;   /* ... and its run is over: a run begins a new scan */
        bool delete; /* --delete of a job that exists: rows seen recorded */
        /* files a run would copy or adopt whose rows are not done now (a
         * run's --delete guard weighs them done) */
        uint64_t new_done;
        bool vanished; /* a directory to list is gone from SRC */
        /* inodes of hard-link groups met (sorted), the first name of
         * each the one a run copies or adopts */
        uint64_t *ino;
        size_t nino, capino;
        struct ferry_copy_cfg cc;
};

/* Whether ino is a hard-link group's inode met before; records it. */
static bool met_before(struct dry *d, uint64_t ino, bool *oom)
{
        size_t lo = 0, hi = d->nino;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (d->ino[mid] == ino)
                        return true;
                if (d->ino[mid] < ino)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (d->nino == d->capino) {
                size_t cap = d->capino ? 2 * d->capino : 64;
                uint64_t *v = realloc(d->ino, cap * sizeof(*v));
                if (!v) {
                        *oom = true;
                        return false;
                }
                d->ino = v;
                d->capino = cap;
        }
        memmove(d->ino + lo + 1, d->ino + lo, (d->nino - lo) * sizeof(*d->ino));
        d->ino[lo] = ino;
        d->nino++;
        return false;
}

static int push(struct dry *d, const char *path, size_t len)
{
        if (d->n == d->cap) {
                size_t cap = d->cap ? 2 * d->cap : 64;
                char **v = realloc(d->stack, cap * sizeof(*v));
                if (!v)
                        return ENOMEM;
                d->stack = v;
                d->cap = cap;
        }
        if (!(d->stack[d->n] = strndup(path, len)))
                return ENOMEM;
        d->n++;
        return 0;
}

/* File f as the copy's item: its stat and DST record, from o. */
static void item_of(const struct ferry_pg_file *f, const struct ferry_pg_dry *o,
                    struct ferry_item *it)
{
        memset(it, 0, sizeof(*it));
        it->type = (enum ferry_ftype)f->type;
        it->need = MF_NEED_DATA;
        it->unmarked = o->unmarked;
        it->st = (struct ferry_stat){
                .size = f->size,
                .mtime = shared_time(f->mtime_ns),
                .ctime = shared_time(f->ctime_ns),
                .mode = f->mode,
                .uid = f->uid,
                .gid = f->gid,
                .dev = f->dev,
                .ino = f->ino,
                .rdev = f->rdev,
                .nlink = f->nlink,
        };
        it->dst = (struct ferry_dst_rec){
                .type = (enum ferry_ftype)o->dst_type,
                .size = o->dst_size,
                .mtime = shared_time(o->dst_mtime_ns),
        };
}

/* What a run would do with file f, which it would copy, said: a copy, an
 * adoption, or a refusal. dfd: DST's directory (-1: none yet, or derr
 * why not), sfd: SRC's. */
static void judge(struct shared *s, struct dry *d,
                  const struct ferry_pg_file *f, const struct ferry_pg_dry *o,
                  int sfd, int dfd, int derr)
{
        struct ferry_item it;
        item_of(f, o, &it);
        bool oom = false;
        /* a later name of a link group: the run links it to the first */
        it.follower = f->lgroup && met_before(d, f->ino, &oom);
        struct ferry_stat st;
        char why[512] = "";
        bool adopt = false;
        if (derr == ENOTDIR || derr == ELOOP) /* a file, a symlink */
                snprintf(why, sizeof(why),
                         "not copied: the destination has no directory "
                         "here, but an entry ferry does not replace by one");
        else if (dfd >= 0 && !ferry_fsio_statat(dfd, f->name, &st)) {
                if (S_ISDIR(st.mode))
                        snprintf(why, sizeof(why),
                                 "not replaced: the destination has a "
                                 "directory here");
                else if (s->opt->adopt && sfd >= 0 && !it.follower &&
                         (it.type == FT_REG || it.type == FT_LINK) &&
                         ferry_adopt_would_hash(&d->cc, &it, NULL, &it.st, dfd,
                                                sfd, f->name, &st) &&
                         (it.type != FT_LINK ||
                          ferry_adopt_same_target(sfd, dfd, f->name)))
                        adopt = true;
                else if (!ferry_copy_is_ours(&d->cc, &it, &it.st, &st))
                        ferry_copy_refusal(&it, &st, why, sizeof(why));
        }
        if (why[0]) {
                s->sum->files_failed++;
                shared_event(s, FERRY_EV_WARNING, d->path, d->path_len, f->name,
                             f->name_len, why, NULL);
        } else if (adopt) {
                d->new_done += !o->id || o->pending;
                s->sum->files_adopted++;
                shared_event(s, FERRY_EV_WOULD_ADOPT, d->path, d->path_len,
                             f->name, f->name_len, NULL, NULL);
        } else {
                d->new_done += !o->id || o->pending;
                if (it.follower) /* linked to the first name, no data */
                        s->sum->files_linked++;
                else {
                        s->sum->files_copied++;
                        s->sum->bytes_copied += it.type == FT_REG ? f->size : 0;
                }
                shared_event(s, FERRY_EV_WOULD_COPY, d->path, d->path_len,
                             f->name, f->name_len, NULL, NULL);
        }
}

/* --delete: the rows of the n files of o that a run's listing would see,
 * kept for ferry_pg_dry_removed; 0, ENOMEM, or ECANCELED (s failed). */
static int seen(struct shared *s, const struct ferry_pg_dry *o, size_t n)
{
        int64_t *ids = malloc(n * sizeof(*ids));
        size_t k = 0;
        if (!ids)
                return ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (o[i].id)
                        ids[k++] = o[i].id;
        int rc = ferry_pg_dry_seen(s->pg, ids, k);
        free(ids);
        if (rc)
                shared_pg_fail(s, rc);
        return rc ? ECANCELED : 0;
}

/* A directory's listing (shared_list_fn): its subdirectories to list,
 * its files asked about and judged. */
static int on_listing(struct shared *s, const struct ferry_pg_dir *dirs,
                      size_t nd, const struct ferry_pg_file *files, size_t nf,
                      void *arg)
{
        struct dry *d = arg;
        for (size_t i = 0; i < nd; i++)
                if (push(d, dirs[i].path, dirs[i].path_len))
                        return ENOMEM;
        s->sum->files_seen += nf;
        if (!nf)
                return 0;
        struct ferry_pg_dry *o = calloc(nf, sizeof(*o));
        if (!o)
                return ENOMEM;
        int rc = 0;
        if (d->job)
                rc = ferry_pg_dry_files(s->pg, d->path, d->path_len, files, nf,
                                        o);
        else /* a new job: every file would be copied */
                for (size_t i = 0; i < nf; i++)
                        o[i].copy = true;
        if (rc) {
                free(o);
                shared_pg_fail(s, rc);
                return ECANCELED;
        }
        if (d->delete &&(rc = seen(s, o, nf))) {
                free(o);
                return rc;
        }
        int sfd = -1, dfd = -1, derr = 0;
        if (ferry_fsio_open_dir(s->srcfd, d->path, &sfd))
                sfd = -1;
        if (s->dstfd >= 0 &&
            (derr = ferry_fsio_open_dir(s->dstfd, d->path, &dfd)))
                dfd = -1;
        for (size_t i = 0; i < nf; i++)
                if (o[i].copy && !(o[i].pending && !d->over))
                        judge(s, d, &files[i], &o[i], sfd, dfd, derr);
        ferry_fsio_close(&sfd);
        ferry_fsio_close(&dfd);
        free(o);
        return 0;
}

/* The job, when it exists: SRC and DST must be its own, as for a run. */
static int find_job(struct shared *s, struct dry *d)
{
        struct ferry_pg_job_info *info = NULL;
        size_t n = 0;
        int rc = ferry_pg_jobs(s->pg, s->opt->job_name, &info, &n);
        ferry_pg_jobs_free(info, n);
        if (rc)
                return shared_pg_fail(s, rc);
        if (!n)
                return 0; /* a new job */
        if (s->dstfd < 0)
                return shared_fail(s, FERRY_EPATH,
                                   "DST '%s' does not exist: not the copy of "
                                   "job '%s'",
                                   s->opt->dst, s->opt->job_name);
        char src_fp[SHARED_FP_LEN], dst_fp[SHARED_FP_LEN];
        char **names = NULL;
        size_t nnames = 0;
        if (shared_src_fp(s, src_fp, &names, &nnames) ||
            shared_dst_fp(s, dst_fp, NULL)) {
                shared_names_free(names, nnames);
                return s->code;
        }
        rc = ferry_pg_job_find(s->pg, s->opt->job_name, src_fp, dst_fp);
        /* SRC changed at its top level: as a run's join, a job that is
         * over takes it when most of its top level is still there */
        if (rc == FERRY_EPATH && ferry_pg_src_differs(s->pg))
                rc = ferry_pg_job_find_new_src(
                        s->pg, s->opt->job_name, src_fp, dst_fp,
                        (const char *const *)names, nnames);
        shared_names_free(names, nnames);
        if (rc)
                return shared_pg_fail(s, rc);
        d->job = true;
        return 0;
}

/* File row r of a job whose run is under way, pending: judged as its
 * claim's copy would judge it. *at: the directory open (its path, its
 * descriptors), moved to r's. */
static int pending_row(struct shared *s, struct dry *d,
                       const struct ferry_pg_row *r, char **at, int *sfd,
                       int *dfd, int *derr)
{
        if (!*at || strlen(*at) != r->path_len ||
            memcmp(*at, r->path, r->path_len)) {
                free(*at);
                ferry_fsio_close(sfd);
                ferry_fsio_close(dfd);
                if (!(*at = strndup(r->path, r->path_len)))
                        return ENOMEM;
                if (ferry_fsio_open_dir(s->srcfd, *at, sfd))
                        *sfd = -1;
                *derr = 0;
                if (s->dstfd >= 0 &&
                    (*derr = ferry_fsio_open_dir(s->dstfd, *at, dfd)))
                        *dfd = -1;
        }
        char *name = strndup(r->name, r->name_len);
        if (!name)
                return ENOMEM;
        struct ferry_pg_file f = {
                .name = name,
                .name_len = r->name_len,
                .type = r->type,
                .size = r->size,
                .mtime_ns = r->mtime_ns,
                .ctime_ns = r->ctime_ns,
                .mode = r->mode,
                .uid = r->uid,
                .gid = r->gid,
                .dev = r->dev,
                .ino = r->ino,
                .rdev = r->rdev,
                .nlink = r->nlink,
                .lgroup = s->opt->hard_links && r->nlink > 1,
        };
        struct ferry_pg_dry o = {.copy = true,
                                 .pending = true,
                                 .unmarked = r->unmarked,
                                 .dst_type = r->dst_type,
                                 .dst_size = r->dst_size,
                                 .dst_mtime_ns = r->dst_mtime_ns};
        d->path = *at;
        d->path_len = r->path_len;
        s->sum->files_seen++;
        judge(s, d, &f, &o, *sfd, *dfd, *derr);
        free(name);
        return 0;
}

/* The state of the pending rows' pass: the directory open. */
struct at {
        char *path;
        int sfd, dfd, derr;
};

static int on_pending(struct shared *s, struct dry *d,
                      const struct ferry_pg_row *r, struct at *at)
{
        return pending_row(s, d, r, &at->path, &at->sfd, &at->dfd, &at->derr);
}

static int on_unlisted(struct shared *s, struct dry *d,
                       const struct ferry_pg_row *r, struct at *at)
{
        (void)s, (void)at;
        return push(d, r->path, r->path_len);
}

typedef int (*page_fn)(struct ferry_pg *pg, int64_t after, size_t max,
                       struct ferry_pg_page *page);
typedef int (*row_fn)(struct shared *s, struct dry *d,
                      const struct ferry_pg_row *r, struct at *at);

/* each row that fetch pages through, to fn; 0 or s's failure */
static int each_row(struct shared *s, struct dry *d, page_fn fetch, row_fn fn,
                    struct at *at)
{
        struct ferry_pg_page page = {0};
        int rc = 0;
        for (int64_t after = 0; !rc;) {
                if ((rc = fetch(s->pg, after, FERRY_PG_BATCH_MAX, &page)))
                        rc = shared_pg_fail(s, rc);
                for (size_t i = 0; !rc && i < page.n; i++)
                        if (fn(s, d, &page.rows[i], at))
                                rc = shared_fail(s, FERRY_EINTERNAL,
                                                 "out of memory");
                if (rc || !page.n)
                        break;
                after = page.rows[page.n - 1].id;
                ferry_pg_page_release(&page);
        }
        ferry_pg_page_release(&page);
        return rc;
}

/* A job whose run is under way: its pending rows judged, and its
 * directories still to list on the stack. */
static int under_way(struct shared *s, struct dry *d)
{
        struct at at = {NULL, -1, -1, 0};
        int rc = each_row(s, d, ferry_pg_pending_files, on_pending, &at);
        free(at.path);
        at.path = NULL;
        ferry_fsio_close(&at.sfd);
        ferry_fsio_close(&at.dfd);
        return rc ? rc
                  : each_row(s, d, ferry_pg_unlisted_dirs, on_unlisted, &at);
}

/* The job found: whether its run is over (a run would begin a new scan)
 * as a join decides it; if not, this host's selection and --max-delete
 * must be the run's, as a join requires (shared_select_join,
 * shared_delete_join). Then the start of the run's scan generation, or of
 * the next one (now). 0 or s's failure. */
static int job_state(struct shared *s, struct dry *d)
{
        char *sel = NULL;
        bool has_limit = false;
        int64_t limit = -1;
        int rc = ferry_pg_dry_job_state(s->pg, &d->over, &sel, &has_limit,
                                        &limit);
        if (rc)
                rc = shared_pg_fail(s, rc);
        if (!rc && !d->over)
                rc = shared_select_dry(s, sel);
        if (!rc && !d->over && has_limit && s->opt->delete_removed)
                rc = shared_delete_limit_check(s, limit);
        free(sel);
        d->cc.written_since =
                d->over ? (int64_t)time(NULL) : ferry_pg_job_created(s->pg);
        return rc;
}

/* SRC, and DST when it exists (a dry run makes none). */
static int open_roots(struct shared *s)
{
        struct ferry_stat st, dt;
        s->srcfd = open(s->opt->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->srcfd < 0 || ferry_fsio_fstat(s->srcfd, &st))
                return shared_fail(s, FERRY_EPATH, "cannot open SRC '%s': %s",
                                   s->opt->src, strerror(errno));
        s->src_dev = st.dev;
        s->dstfd = open(s->opt->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dstfd < 0 && errno != ENOENT)
                return shared_fail(s, FERRY_EPATH, "cannot open DST '%s': %s",
                                   s->opt->dst, strerror(errno));
        if (s->dstfd >= 0 && !ferry_fsio_fstat(s->dstfd, &dt) &&
            dt.dev == st.dev && dt.ino == st.ino)
                return shared_fail(s, FERRY_EPATH,
                                   "SRC and DST are the same directory");
        return 0;
}

int shared_dry_run(struct shared *s)
{
        struct dry d = {
                .cc = {.meta = {.times = s->opt->times},
                       .adopt = s->opt->adopt,
                       .fence = &never},
        };
        if (open_roots(s) || find_job(s, &d))
                return s->code;
        if (d.job && job_state(s, &d))
                return s->code;
        d.delete = d.job && s->opt->delete_removed;
        int prc = d.delete ? ferry_pg_dry_seen_begin(s->pg) : 0;
        if (prc)
                return shared_pg_fail(s, prc);
        int rc = d.job && !d.over ? under_way(s, &d)
                 : push(&d, "", 0)
                         ? shared_fail(s, FERRY_EINTERNAL, "out of memory")
                         : 0;
        while (!rc && !s->code && d.n) {
                char *path = d.stack[--d.n];
                d.path = path;
                d.path_len = strlen(path);
                int e = atomic_load(s->stop)
                                ? ECANCELED
                                : shared_list_dir(s, path, d.path_len,
                                                  on_listing, &d);
                if (e == ENOMEM)
                        rc = shared_fail(s, FERRY_EINTERNAL, "out of memory");
                else if (e == ECANCELED && !s->code)
                        rc = shared_fail(s, FERRY_EINTR, "%s", "");
                else if ((e == ENOENT || e == ENOTDIR) && d.path_len) {
                        /* gone since its row was made: as a run's
                         * listing finds it (scan.c), not an error */
                        char why[300];
                        snprintf(why, sizeof(why), "gone from SRC: %s",
                                 strerror(e));
                        d.vanished = true;
                        shared_event(s, FERRY_EV_VANISHED, path, d.path_len, "",
                                     0, why, NULL);
                } else if (e && !s->code) {
                        /* as a run's listing that fails: said, the rest goes
                         * on */
                        char why[300];
                        snprintf(why, sizeof(why), "cannot list: %s",
                                 strerror(e));
                        s->sum->scan_errors++;
                        shared_event(s, FERRY_EV_WARNING, path, d.path_len, "",
                                     0, why, NULL);
                }
                free(path);
        }
        while (d.n)
                free(d.stack[--d.n]);
        free(d.stack);
        free(d.ino);
        if (!s->code && d.delete)
                shared_dry_delete(s, d.over, d.new_done);
        if (s->code)
                return s->code;
        /* before 23, as a run's (run.c) */
        if (s->delete_refused || s->delete_held)
                return FERRY_EDELETE;
        return s->sum->files_failed || s->sum->scan_errors ? FERRY_EPARTIAL
               : d.vanished                                ? FERRY_EVANISHED
                                                           : FERRY_OK;
}
