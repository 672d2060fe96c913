/*
 * shared/run.c - one host of a job on the shared manifest (issue 14):
 * `ferry --manifest postgresql://... --job-name NAME SRC DST`, the same
 * command on every host that mounts SRC and DST.
 *
 * A host joins the job by its name (the fingerprints of SRC and DST must
 * be the job's: fp.c), makes the job's failed rows pending again, adds
 * SRC's root to the scan queue (once per job), then loops until the job
 * has nothing left: it claims batches of file rows under a lease and hands
 * them to its worker pool, lists claimed directories in between (scan.c),
 * takes batches back, runs the DST barrier (syncfs) and only then
 * completes them with their claim's token (rule 1; a claim whose lease ran
 * out and was taken by another host is refused, and nothing of it is
 * marked), and renews the leases of what it holds every third of a lease
 * (lease.c).
 * When no row is pending in the whole job, not even under another host's
 * lease, it applies directories' metadata (finish.c), and the job's counts
 * give the exit code.
 *
 * Live control (`ferry set`: pause, resume, -j, --bwlimit, --window) is
 * read about once a second (control.c). A dry run is dryrun.c's (with
 * --delete, dry_delete.c's after it). --adopt keeps
 * what DST holds equal to SRC, as on a single host (copy_adopt.c), each
 * host for the rows it claims; a shared job is never re-pointed (its
 * fingerprints, not its paths, say which SRC and DST it is). A big file
 * is copied in chunks by one host, each chunk recorded for the next claim
 * of its row to resume (chunks.c; batches.c, put_plan). Hard
 * links: a name of a link group is handed out once the scan is over, linked to
 * the copy of its group's first name (claims.c, 008_links.sql). --verify is
 * verify.c.
 *
 * A job that is over is run again by the next host that joins it
 * (ferry_pg_rerun: a new scan generation; SRC changed at its top level is
 * taken when most of it is still there, ferry_pg_job_new_src): each
 * listing makes changed files pending again, with rule 9's record of
 * what the last copy left in DST, and finish.c marks the rows this scan
 * did not see removed; with --delete, delete.c deletes their copies.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "bufpool.h"
#include "dstcaps.h"
#include "failure.h"
#include "job.h"
#include "manifest_types.h"
#include "meta.h"
#include "workers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEASE_S 60
/* How often a paused host looks again. */
#define PAUSED_WAIT_MS 300
/* How often a host with nothing to claim looks again (shared_idle): soon
 * at first, as another host's listing may add rows at any moment, then
 * less often (bench/shared, 12,000 files, medians of 5: 2 hosts took
 * 12.71 s waiting 300 ms each time, 12.42 s with this). */
#define IDLE_WAIT_MIN_MS 10
#define IDLE_WAIT_MAX_MS 100

void shared_idle(int *ms)
{
        if (*ms < IDLE_WAIT_MIN_MS)
                *ms = IDLE_WAIT_MIN_MS;
        struct timespec w = {*ms / 1000, (long)(*ms % 1000) * 1000000L};
        nanosleep(&w, NULL);
        *ms = *ms * 2 > IDLE_WAIT_MAX_MS ? IDLE_WAIT_MAX_MS : *ms * 2;
}

double shared_now(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int shared_fail(struct shared *s, int code, const char *fmt, ...)
{
        if (s->code)
                return s->code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err->msg, sizeof(s->err->msg), fmt, ap);
        va_end(ap);
        s->code = code;
        return code;
}

int shared_pg_fail(struct shared *s, int rc)
{
        return shared_fail(s, rc == FERRY_EPATH ? FERRY_EPATH : FERRY_EMANIFEST,
                           "%s", ferry_pg_errmsg(s->pg));
}

void shared_event(struct shared *s, enum ferry_event ev, const char *dir,
                  size_t dir_len, const char *name, size_t name_len,
                  const char *detail, const struct ferry_failure *fail)
{
        if (!s->opt->event)
                return;
        char *p = NULL;
        int n = asprintf(&p, "%.*s%s%.*s", (int)dir_len, dir,
                         dir_len && name_len ? "/" : "", (int)name_len, name);
        if (n < 0)
                return;
        s->opt->event(ev, p, (size_t)n, detail, fail, s->opt->cb_arg);
        free(p);
}

/* ---- the loop ------------------------------------------------------- */

static void progress(struct shared *s, bool scanning, bool final)
{
        double now = shared_now();
        if (!s->opt->progress || (!final && now - s->last_progress < 1.0))
                return;
        s->last_progress = now;
        struct ferry_pg_counts c;
        if (ferry_pg_counts(s->pg, &c))
                return;
        struct ferry_progress p = {
                .files_total = c.files,
                .files_done = c.files_done + c.files_failed,
                .bytes_total = c.bytes,
                .bytes_done = c.bytes_done,
                .errors = c.files_failed + c.dirs_failed,
                .elapsed = now - s->t0,
                .scanning = scanning,
                .paused = s->paused,
                .resume_at = s->set_paused ? -1 : s->resume_at,
                .final = final,
        };
        s->opt->progress(&p, s->opt->cb_arg);
}

/* Whether the whole job has nothing pending (leased to another host or
 * not). */
static int job_over(struct shared *s, bool *over)
{
        uint64_t dp, dl, fp, flv;
        int rc = ferry_pg_remaining(s->pg, PG_DIRS, &dp, &dl);
        if (!rc)
                rc = ferry_pg_remaining(s->pg, PG_FILES, &fp, &flv);
        if (rc)
                return shared_pg_fail(s, rc);
        *over = dp == 0 && fp == 0;
        return 0;
}

static int copy_loop(struct shared *s)
{
        bool files_none = false, dirs_none = false;
        int idle = 0; /* shared_idle's wait */
        for (;;) {
                bool stopping = s->code || atomic_load(s->stop);
                /* every turn (it waits a third of a lease between two):
                 * batches that keep coming back must not starve it */
                if (!stopping)
                        shared_renew(s);
                if (!stopping)
                        shared_control(s);
                stopping = s->code || atomic_load(s->stop);
                /* paused: nothing new is claimed */
                bool claims = !stopping && !s->paused;
                size_t room = 2 * (size_t)s->limit;
                while (claims && !files_none && s->nfl < room &&
                       !shared_hand_out(s, &files_none))
                        ;
                stopping = s->code || atomic_load(s->stop);
                if (claims && !dirs_none && s->nscans < s->nscan)
                        shared_scan_claim(s, &dirs_none);
                stopping = s->code || atomic_load(s->stop) || s->moved;
                bool out = s->nfl || s->nscans;
                if (stopping && !out)
                        break;
                bool busy = claims && !files_none && s->nfl < room;
                void *msg = NULL;
                if (out && !ferry_queue_pop(&s->inbox, &msg, busy ? 0 : 200) &&
                    msg) {
                        bool dirs = false;
                        int kind = ((struct ferry_msg *)msg)->kind;
                        if (kind == MSG_BATCH)
                                shared_take_back(s, msg);
                        else if (kind == MSG_CHUNK)
                                shared_chunk_record(s, msg);
                        else
                                shared_scan_done(s, msg, &dirs);
                        /* rows added (here, or by another host's scan) */
                        files_none = false;
                        dirs_none = dirs_none && !dirs;
                        idle = 0;
                        continue;
                }
                progress(s, !dirs_none || s->nscans, false);
                if (!stopping && !out && s->paused) {
                        struct timespec w = {0, PAUSED_WAIT_MS * 1000000L};
                        nanosleep(&w, NULL);
                        continue;
                }
                if (stopping || out || !files_none || !dirs_none)
                        continue;
                /* nothing to claim: over, or held by other hosts */
                bool over = false;
                if (job_over(s, &over) || over)
                        break;
                shared_idle(&idle);
                files_none = dirs_none = false;
        }
        return s->code;
}

/* ---- start and end -------------------------------------------------- */

int shared_check_options(const struct ferry_options *o, struct ferry_error *e)
{
        /* as on a single host (job.c): a verify reads the job as it is */
        if (o->adopt && o->verify)
                return ferry_job_errf(e, FERRY_EUSAGE,
                                      "--adopt goes with a copy, not with "
                                      "--verify");
        if (!o->job_name || !o->job_name[0])
                return ferry_job_errf(e, FERRY_EUSAGE,
                                      "a PostgreSQL manifest needs --job-name "
                                      "NAME (the same on every host)");
        return 0;
}

int shared_open_roots(struct shared *s, bool make_dst)
{
        const struct ferry_options *o = s->opt;
        s->srcfd = open(o->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->srcfd < 0)
                return shared_fail(s, FERRY_EPATH, "cannot open SRC '%s': %s",
                                   o->src, strerror(errno));
        if (make_dst && mkdir(o->dst, 0777) && errno != EEXIST)
                return shared_fail(s, FERRY_EPATH, "cannot make DST '%s': %s",
                                   o->dst, strerror(errno));
        s->dstfd = open(o->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dstfd < 0)
                return shared_fail(s, FERRY_EPATH, "cannot open DST '%s': %s",
                                   o->dst, strerror(errno));
        struct ferry_stat a, b;
        if (ferry_fsio_fstat(s->srcfd, &a) || ferry_fsio_fstat(s->dstfd, &b))
                return shared_fail(s, FERRY_EPATH, "cannot stat SRC or DST");
        if (a.dev == b.dev && a.ino == b.ino)
                return shared_fail(s, FERRY_EPATH,
                                   "SRC and DST are the same directory");
        s->src_dev = a.dev;
        return 0;
}

int shared_connect(struct shared *s)
{
        struct ferry_error err = {""};
        int rc = ferry_pg_connect(s->opt->manifest, SHARED_PG_WAIT_S, &s->pg,
                                  &err);
        return rc ? shared_fail(s, rc, "%s", err.msg) : 0;
}

static int join(struct shared *s)
{
        char src_fp[SHARED_FP_LEN], dst_fp[SHARED_FP_LEN], host[300];
        bool made = false;
        char **names = NULL;
        size_t nnames = 0;
        if (shared_src_fp(s, src_fp, &names, &nnames) ||
            shared_dst_fp(s, dst_fp, &made)) {
                shared_names_free(names, nnames);
                return s->code;
        }
        char name[256] = "";
        gethostname(name, sizeof(name) - 1);
        snprintf(host, sizeof(host), "%s:%ld", name, (long)getpid());
        int rc = ferry_pg_job_join(s->pg, s->opt->job_name, src_fp, dst_fp,
                                   host, s->lease);
        /* SRC changed at its top level since the job's scan: a job that
         * is over takes it when most of its top level is still there (or
         * another host of this SRC took it meanwhile: join again) */
        char why[sizeof(s->err->msg)] = "";
        if (rc == FERRY_EPATH && ferry_pg_src_differs(s->pg)) {
                bool taken = false;
                rc = ferry_pg_job_new_src(s->pg, s->opt->job_name, src_fp,
                                          dst_fp, (const char *const *)names,
                                          nnames, &taken);
                if (!rc && !taken) /* why not, if the join fails again */
                        snprintf(why, sizeof(why), "%s",
                                 ferry_pg_errmsg(s->pg));
                if (!rc)
                        rc = ferry_pg_job_join(s->pg, s->opt->job_name, src_fp,
                                               dst_fp, host, s->lease);
        }
        shared_names_free(names, nnames);
        if (rc) {
                if (made) /* a DST this refused job marked: as it was */
                        unlinkat(s->dstfd, SHARED_MARK, 0);
                if (rc == FERRY_EPATH && why[0])
                        return shared_fail(s, FERRY_EPATH, "%s", why);
                return shared_pg_fail(s, rc);
        }
        /* a job that is over (with failures or not) scans SRC again;
         * one that is not goes on where it stopped; failed rows are
         * tried again either way */
        uint64_t again = 0;
        rc = ferry_pg_rerun(s->pg);
        if (!rc)
                rc = ferry_pg_retry_failed(s->pg, &again);
        if (rc)
                return shared_pg_fail(s, rc);
        return shared_select_join(s) || shared_delete_join(s)
                       ? s->code
                       : shared_add_root(s);
}

static int start_pool(struct shared *s)
{
        const struct ferry_options *o = s->opt;
        struct ferry_dst_caps k;
        if (ferry_dst_caps_probe(s->dstfd, &k))
                ferry_dst_caps_all(&k);
        mode_t um = umask(0);
        umask(um);
        struct ferry_meta_cfg m = {
                .perms = o->perms && k.perms,
                .owner = o->owner && k.owner,
                .times = o->times,
                .xattrs = o->xattrs && (k.xattrs_user || k.xattrs_other),
                .acls = o->acls && k.acls,
                .atimes = o->atimes,
                .root = geteuid() == 0,
                .umask = um,
        };
        m.caps = k;
        if (!m.root)
                ferry_meta_cfg_groups(&m);
        if (shared_control_start(s))
                return s->code;
        s->ccfg = (struct ferry_copy_cfg){
                .srcfd = s->srcfd,
                .dstfd = s->dstfd,
                .meta = m,
                .specials = o->specials && k.specials,
                .devices = o->devices && k.specials,
                .trust_mtime = o->trust_mtime,
                .fsync_each = o->durability == FERRY_DURABLE_FILE,
                .retries = o->retries,
                /* any host may have died after a rename, before its mark
                 * (only rows a claim of which ended without a done
                 * outcome: item->unmarked) */
                .written_since = ferry_pg_job_created(s->pg),
                .stop = s->stop,
                .no_sync = o->durability == FERRY_DURABLE_NONE,
                .fence = &s->fence,
                .foreign_rows = true,
                .adopt = o->adopt,
                .rate = s->rate,
                /* a large file's chunks, recorded (chunks.c) */
                .chunk_inbox = &s->inbox,
        };
        s->max_jobs = s->jobs > SHARED_JOBS_MAX ? s->jobs : SHARED_JOBS_MAX;
        s->limit = s->jobs;
        size_t cap = 2 * (size_t)s->max_jobs;
        s->fl = calloc(cap, sizeof(*s->fl));
        /* the inbox holds every batch and listing in flight at once, and
         * chunks reported meanwhile (a stream waits while it is full) */
        if (!s->fl || ferry_queue_init(&s->work, cap + 1) ||
            ferry_queue_init(&s->inbox, cap + SHARED_SCANNERS + 1 + 64))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        if (ferry_workers_start(&s->ccfg, s->max_jobs, s->jobs, &s->work,
                                &s->inbox, &s->pool))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        return shared_scan_start(s);
}

static int end_code(struct shared *s)
{
        if (s->code)
                return s->code == FERRY_EINTR ? FERRY_EINTR : s->code;
        /* the job this host joined is over: another host began the next
         * (which retries what failed); what this one did is marked */
        if (s->moved)
                return FERRY_OK;
        /* before 23, as a single host's: the same command would not
         * delete either */
        if (s->delete_refused || s->delete_held)
                return FERRY_EDELETE;
        struct ferry_pg_counts c;
        int rc = ferry_pg_counts(s->pg, &c);
        if (rc)
                return shared_pg_fail(s, rc);
        /* after a whole scan (no directory failed to list): what
         * --files-from lists and no host found is said, and exits as a
         * vanished file does (rsync's 24), as on a single host (job.c) */
        uint64_t missing = s->over && !c.dirs_failed && s->opt->files_from
                                   ? shared_select_missing(s)
                                   : 0;
        if (s->code)
                return s->code;
        if (c.files_failed || c.dirs_failed)
                return FERRY_EPARTIAL;
        /* gone from SRC between its listing and its copy: the job's copy
         * lacks them, as a single host's run says (rsync's 24); so does a
         * directory gone between its parent's listing and its own */
        uint64_t dirs_gone = 0;
        if (!c.files_vanished &&
            (rc = ferry_pg_dirs_vanished(s->pg, &dirs_gone)))
                return shared_pg_fail(s, rc);
        if (c.files_vanished || dirs_gone || missing)
                return FERRY_EVANISHED;
        /* a file's metadata shortfall is this host's to tell (its row is
         * done: the data arrived) */
        return c.meta_failed || s->sum->meta_failed ? FERRY_EMETA : FERRY_OK;
}

/* A host's state before anything is opened. */
static struct shared begin(const struct ferry_options *opt,
                           struct ferry_summary *sum, struct ferry_error *err)
{
        return (struct shared){
                .opt = opt,
                .sum = sum,
                .err = err,
                .srcfd = -1,
                .dstfd = -1,
                .stop = ferry_job_stop_flag(),
                .lease = opt->lease ? (int)opt->lease : LEASE_S,
                .jobs = opt->jobs ? opt->jobs : SHARED_JOBS,
                .t0 = shared_now(),
        };
}

/* What begin's state holds at the end: the selection, the connection,
 * SRC's and DST's descriptors; and the run's time. */
static void end(struct shared *s)
{
        s->sum->seconds = shared_now() - s->t0;
        shared_select_free(s);
        ferry_pg_close(s->pg);
        if (s->srcfd >= 0)
                close(s->srcfd);
        if (s->dstfd >= 0)
                close(s->dstfd);
}

/* ferry -n: dryrun.c's, on a connection of its own (no job joined). */
static int dry_run(const struct ferry_options *opt, struct ferry_summary *sum,
                   struct ferry_error *err)
{
        struct shared s = begin(opt, sum, err);
        int rc = shared_select_open(&s) || shared_connect(&s)
                         ? s.code
                         : shared_dry_run(&s);
        end(&s);
        return rc;
}

int ferry_shared_copy(const struct ferry_options *opt,
                      struct ferry_summary *sum, struct ferry_error *err)
{
        if (opt->verify) /* the job as it is, nothing copied */
                return ferry_shared_verify(opt, opt->verify, sum, err);
        memset(sum, 0, sizeof(*sum));
        err->msg[0] = '\0';
        int rc = shared_check_options(opt, err);
        if (rc)
                return rc;
        if (opt->dry_run)
                return dry_run(opt, sum, err);
        struct shared s = begin(opt, sum, err);
        /* first of all the manifest: one that cannot be reached (or no
         * libpq) leaves SRC and DST untouched */
        if (!shared_select_open(&s) && !shared_connect(&s) &&
            !shared_open_roots(&s, true) && !join(&s) && !start_pool(&s)) {
                copy_loop(&s);
                if (!s.code && atomic_load(s.stop))
                        shared_fail(&s, FERRY_EINTR, "%s", "");
                bool over = false;
                if (!s.code && !s.moved && !job_over(&s, &over) && over) {
                        /* no copy is left: the pool's threads serve the
                         * metadata pass (its reads of SRC's xattrs and
                         * ACLs are round trips on a share) */
                        ferry_queue_close(&s.work);
                        ferry_workers_idle(s.pool);
                        shared_finish_dirs(&s);
                        s.over = true;
                }
                if (!s.code && atomic_load(s.stop)) /* during the finish */
                        shared_fail(&s, FERRY_EINTR, "%s", "");
        }
        shared_scan_end(&s);
        if (s.pool) {
                ferry_queue_close(&s.work);
                ferry_workers_join(s.pool);
                s.sum->workers = s.jobs;
                /* what came back after the loop ended (a failure) */
                void *msg;
                while (!ferry_queue_try_pop(&s.inbox, &msg) && msg)
                        if (((struct ferry_msg *)msg)->kind == MSG_BATCH)
                                ferry_batch_free(msg);
                        else if (((struct ferry_msg *)msg)->kind == MSG_CHUNK)
                                free(msg); /* unrecorded: copied again */
                        else
                                shared_scan_drop(msg);
                ferry_queue_release(&s.work);
                ferry_queue_release(&s.inbox);
        }
        shared_control_release(&s); /* the copies are over */
        /* what this host claimed and did not finish goes back now, not
         * when its lease runs out (a stop, a failure); not after the
         * manifest itself failed */
        uint64_t back = 0;
        if (s.pg && ferry_pg_job_created(s.pg) && s.code != FERRY_EMANIFEST)
                ferry_pg_release(s.pg, &back);
        if (s.pg && !s.code)
                progress(&s, false, true);
        rc = s.pg ? end_code(&s) : s.code;
        if (s.pg && ferry_pg_job_created(s.pg) && s.code != FERRY_EMANIFEST)
                ferry_pg_leave(s.pg, rc);
        sum->jobs_peak = s.jobs;
        free(s.fl);
        end(&s);
        return rc;
}
