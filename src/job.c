/*
 * job.c - the public API of include/ferry.h.
 *
 * Owns what a job needs before and after the coordinator runs: checking the
 * options and that SRC and DST do not overlap, opening the manifest (under
 * the job lock, job_lock.c, at the path job_paths.c finds), learning which
 * names DST can hold, and the descriptors of SRC and DST that every other
 * module works relative to. Reading a job's status is job_status.c's.
 *
 * Descriptors: a job raises the soft RLIMIT_NOFILE to the hard limit
 * before it opens anything, and once SRC, DST and the manifest are open it
 * fits the workers and scan threads into what is left (fdlimit.h), saying
 * so once when that means fewer than asked.
 */
#define _GNU_SOURCE
#include "ferry.h"
#include "job.h"
#include "control.h"

#include "fdlimit.h"
#include "tune.h"
#include "fsio.h"
#include "coord.h"
#include "manifest.h"
#include "names.h"
#include "overlap.h"
#include "select.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ferry_job {
        struct ferry_options opt;
        char *src, *dst, *manifest_path, *lock_path;
        bool dst_exists;
        int srcfd, dstfd, lockfd;
        struct ferry_manifest *m;
        struct ferry_select *select; /* NULL: everything */
        struct ferry_names *names;   /* what DST can hold; NULL: anything */
        struct ferry_own *own;       /* DST's root and the manifest's files */
        unsigned long fd_limit;      /* the soft RLIMIT_NOFILE, raised */
        unsigned jobs_cap;           /* -j auto: the most that fit; -j N: how
                                        far `ferry set -j` may raise it */
};

static atomic_bool stop_requested;

void ferry_request_stop(void)
{
        atomic_store(&stop_requested, true);
}

/* here, not in src/shared/: the command line asks it without libpq */
bool ferry_manifest_is_shared(const char *manifest)
{
        return manifest && (!strncmp(manifest, "postgresql://", 13) ||
                            !strncmp(manifest, "postgres://", 11));
}

atomic_bool *ferry_job_stop_flag(void)
{
        return &stop_requested;
}

void ferry_options_init(struct ferry_options *opt)
{
        memset(opt, 0, sizeof(*opt));
        opt->jobs = 0; /* -j auto */
        opt->scanners = 64;
        opt->retries = 3;
        opt->durability = FERRY_DURABLE_BATCH;
        opt->hard_links = true;
        opt->perms = true;
        opt->owner = true;
        opt->times = true;
        opt->xattrs = true;
        opt->acls = true;
        opt->specials = true;
        opt->devices = true;
        opt->max_delete = -1;
        opt->min_size = opt->max_size = -1;
        opt->window_start = opt->window_end = -1; /* no --window */
}

const char *ferry_code_str(int code)
{
        switch (code) {
        case FERRY_OK: return "success";
        case FERRY_EUSAGE: return "usage error";
        case FERRY_EPATH: return "source or destination unusable";
        case FERRY_EMANIFEST: return "manifest error";
        case FERRY_ELOCKED: return "job locked by another run";
        case FERRY_EVERIFY: return "verify found differences";
        case FERRY_EINTERNAL: return "internal error";
        case FERRY_EOUTPUT: return "cannot write standard output";
        case FERRY_ENOSPC: return "destination full";
        case FERRY_EDSTFAIL: return "destination failed";
        case FERRY_EINTR: return "interrupted";
        case FERRY_EPARTIAL: return "some files failed";
        case FERRY_EVANISHED: return "some source files vanished";
        case FERRY_EDELETE: return "deletion refused or stopped";
        case FERRY_EMETA: return "some metadata could not be applied";
        default: return "unknown";
        }
}

int ferry_job_errf(struct ferry_error *err, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return code;
}

static int check_options(const struct ferry_options *opt,
                         struct ferry_error *err)
{
        if (!opt->src || !opt->dst)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "SRC and DST are required");
        /* a verify reads the job as it is: it never re-points one */
        if (opt->adopt && opt->verify)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "--adopt goes with a copy, not with "
                                      "--verify");
        if (opt->jobs > 1024) /* 0: -j auto */
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "jobs must be 1 to 1024, or 0 (auto)");
        return 0;
}

/* DST inside SRC or SRC inside DST, under any name (overlap.h). */
static int check_overlap(struct ferry_job *job, struct ferry_error *err)
{
        char *parent = NULL;
        if (!job->dst_exists) { /* where DST will be made */
                char *slash = strrchr(job->dst, '/');
                parent = slash ? strndup(job->dst, (size_t)(slash - job->dst) +
                                                           (slash == job->dst))
                               : NULL;
                if (!parent)
                        return ferry_job_errf(err, FERRY_EINTERNAL,
                                              "out of memory");
        }
        enum ferry_overlap how = ferry_overlap_trees(
                job->src, parent ? parent : job->dst, job->dst_exists);
        free(parent);
        switch (how) {
        case OVERLAP_NONE: return 0;
        case OVERLAP_SAME:
                return ferry_job_errf(
                        err, FERRY_EPATH,
                        "destination '%s' is the source '%s' itself "
                        "(DST must not be inside SRC)",
                        job->dst, job->src);
        case OVERLAP_DST_IN_SRC:
                return ferry_job_errf(
                        err, FERRY_EPATH,
                        "destination '%s' is inside the source '%s' "
                        "(by path, symlink or bind mount): each run "
                        "would copy the last copy again",
                        job->dst, job->src);
        case OVERLAP_SRC_IN_DST:
                return ferry_job_errf(
                        err, FERRY_EPATH,
                        "source '%s' is inside the destination '%s' "
                        "(by path, symlink or bind mount): the copy "
                        "would write into the source",
                        job->src, job->dst);
        }
        return 0;
}

/* path is a regular file of 0 bytes. */
static bool empty_file(const char *path)
{
        struct stat st;
        return !stat(path, &st) && S_ISREG(st.st_mode) && st.st_size == 0;
}

/* path is a directory with no entry but . and .. (false when it cannot
 * be read). */
static bool empty_dir(const char *path)
{
        DIR *d = opendir(path);
        if (!d)
                return false;
        const struct dirent *e;
        bool empty = true;
        while (empty && (e = readdir(d)))
                empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        closedir(d);
        return empty;
}

static int resolve_paths(struct ferry_job *job, struct ferry_error *err)
{
        int rc = ferry_job_resolve_src(job->opt.src, &job->src, err);
        if (!rc)
                rc = ferry_job_resolve_dst(job->opt.dst, &job->dst,
                                           &job->dst_exists, err);
        if (rc)
                return rc;
        rc = check_overlap(job, err);
        if (rc)
                return rc;
        if (job->opt.verify && !job->dst_exists)
                return ferry_job_errf(err, FERRY_EPATH,
                                      "destination '%s' does not exist",
                                      job->opt.dst);
        const char *probe = job->dst;
        char *parent = NULL;
        if (!job->dst_exists) {
                parent = strdup(job->dst);
                if (!parent)
                        return ferry_job_errf(err, FERRY_EINTERNAL,
                                              "out of memory");
                char *slash = strrchr(parent, '/');
                if (slash)
                        slash[slash == parent] = '\0';
                probe = parent;
        }
        int writable = access(probe, W_OK | X_OK);
        free(parent);
        if (writable && !job->opt.verify && !job->opt.dry_run)
                return ferry_job_errf(err, FERRY_EPATH,
                                      "destination '%s' is not writable",
                                      job->opt.dst);
        return 0;
}

static int open_manifest(struct ferry_job *job, struct ferry_error *err)
{
        int rc = job->opt.manifest
                         ? ((job->manifest_path = strdup(job->opt.manifest))
                                    ? 0
                                    : ferry_job_errf(err, FERRY_EINTERNAL,
                                                     "out of memory"))
                         : ferry_job_default_manifest(job->src, job->dst, true,
                                                      &job->manifest_path, err);
        if (rc)
                return rc;
        bool exists = access(job->manifest_path, F_OK) == 0;
        /* --adopt --manifest FILE takes over the job FILE records (a moved
         * one): as rsync's --read-batch or robocopy's /JOB, a file named to
         * be read must be there. Made anew, a typo would start a second,
         * empty job that reads all of both trees while the real one is
         * left behind. */
        if (job->opt.adopt && job->opt.manifest && !exists)
                return ferry_job_errf(
                        err, FERRY_EMANIFEST,
                        "--adopt: no manifest at '%s': nothing changed "
                        "(`ferry status` lists the jobs and their "
                        "manifests; to adopt DST into a new job, leave out "
                        "--manifest)",
                        job->manifest_path);
        if (job->opt.verify && !exists)
                return ferry_job_errf(
                        err, FERRY_EMANIFEST,
                        "no manifest at '%s': nothing was copied yet",
                        job->manifest_path);
        /* a plain run reads the manifest through beside its scan (a dry
         * run commits nothing, so its check comes first) */
        int flags = MF_CREATE | (job->opt.verify    ? MF_THOROUGH
                                 : job->opt.dry_run ? 0
                                                    : MF_CHECK_BESIDE);
        if (!job->opt.verify && !job->opt.dry_run &&
            (!job->dst_exists ||
             (empty_file(job->manifest_path) && empty_dir(job->dst))))
                flags |= MF_EMPTY_NEW;
        if (job->opt.dry_run && !exists)
                flags = MF_MEMORY; /* a dry run creates nothing */
        else if ((rc = ferry_job_lock_take(job->manifest_path, job->opt.verify,
                                           &job->lockfd, &job->lock_path, err)))
                return rc;
        rc = ferry_manifest_open(job->manifest_path, flags, &job->m, err);
        bool moved = false; /* a dry run's: the manifest still says not */
        if (!rc && job->opt.adopt) {
                struct ferry_job_files f = {
                        &job->opt,       job->src,
                        job->dst,        &job->manifest_path,
                        &job->lock_path, &job->lockfd,
                        &job->m,
                };
                rc = ferry_job_repoint(&f, &moved, err);
        }
        if (!rc && !moved &&
            ferry_manifest_bind_job(job->m, job->src, job->dst))
                rc = ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                    ferry_manifest_errmsg(job->m));
        return rc;
}

/* The rules as "DEV:INO " + 256 refused flags + trailing dot, trailing
 * space and case flags, '0' or '1' each. */
static void rules_text(const struct ferry_name_rules *r, const char *id,
                       char *buf, size_t size)
{
        size_t n = (size_t)snprintf(buf, size, "%s ", id);
        for (int c = 0; c < 256 && n + 1 < size; c++)
                buf[n++] = r->refused[c] ? '1' : '0';
        bool flags[3] = {r->no_trailing_dot, r->no_trailing_space,
                         r->case_insensitive};
        for (int i = 0; i < 3 && n + 1 < size; i++)
                buf[n++] = flags[i] ? '1' : '0';
        buf[n] = '\0';
}

/* id NULL: whatever DST the rules were learned on */
static bool rules_parse(const char *text, const char *id,
                        struct ferry_name_rules *r)
{
        const char *sp = strchr(text, ' ');
        if (!sp || strlen(sp + 1) != 259 ||
            (id && ((size_t)(sp - text) != strlen(id) ||
                    strncmp(text, id, strlen(id)))))
                return false;
        const char *p = sp + 1;
        for (int c = 0; c < 256; c++)
                r->refused[c] = p[c] == '1';
        r->no_trailing_dot = p[256] == '1';
        r->no_trailing_space = p[257] == '1';
        r->case_insensitive = p[258] == '1';
        return true;
}

/*
 * Learns which names DST can hold, before a copy writes anything. The
 * probe creates files in DST's root, so its answer is kept in the manifest
 * for this DST (device and inode of its root): a no-change re-run touches
 * nothing in DST.
 */
static int probe_names(struct ferry_job *job, struct ferry_error *err)
{
        if (job->opt.verify || !job->m)
                return 0;
        struct ferry_name_rules rules;
        struct stat st; /* not through fsio: its fault counts stay put */
        char id[64], text[512];
        id[0] = '\0';
        if (!fstat(job->dstfd, &st))
                snprintf(id, sizeof(id), "%llu:%llu",
                         (unsigned long long)st.st_dev,
                         (unsigned long long)st.st_ino);
        memset(&rules, 0, sizeof(rules));
        if (ferry_manifest_note(job->m, "dst_names", text, sizeof(text)))
                return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                      ferry_manifest_errmsg(job->m));
        /* a dry run writes nothing, not even probes: it goes by the last
         * rules learned (exfat-fuse gives DST's root a new inode number
         * when it is mounted again) */
        bool known = job->opt.dry_run ? rules_parse(text, NULL, &rules)
                                      : id[0] && rules_parse(text, id, &rules);
        /* none learned yet: a dry run learns only that names are compared
         * without case, from what DST holds (--adopt must not take the
         * copy of another spelling, as the run would not) */
        if (!known && job->opt.dry_run) {
                if (ferry_names_probe_case(job->dstfd) != 1)
                        return 0;
                rules.case_insensitive = known = true; /* nothing kept */
        }
        if (!known) {
                /* kept only when the probe could make its files: rules
                 * learned on a full or read-only DST say "anything goes",
                 * and a case-insensitive DST taken for good as a
                 * case-sensitive one loses files */
                if (ferry_probe_begin(job->m, job->dstfd))
                        return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                              ferry_manifest_errmsg(job->m));
                bool probed = ferry_names_probe(job->dstfd, &rules) == 0;
                rules_text(&rules, id, text, sizeof(text));
                if (id[0] && probed &&
                    ferry_manifest_set_note(job->m, "dst_names", text))
                        return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                              ferry_manifest_errmsg(job->m));
        }
        if (ferry_names_new(&rules, &job->names))
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        return 0;
}

static int open_trees(struct ferry_job *job, struct ferry_error *err)
{
        job->srcfd = open(job->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (job->srcfd < 0)
                return ferry_job_errf(err, FERRY_EPATH, "source '%s': %s",
                                      job->opt.src, strerror(errno));
        if (job->opt.dry_run && !job->dst_exists)
                return 0;
        if (!job->dst_exists && mkdir(job->dst, 0700) && errno != EEXIST)
                return ferry_job_errf(err, FERRY_EPATH,
                                      "cannot create destination '%s': %s",
                                      job->opt.dst, strerror(errno));
        job->dstfd = open(job->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (job->dstfd < 0)
                return ferry_job_errf(err, FERRY_EPATH, "destination '%s': %s",
                                      job->opt.dst, strerror(errno));
        return probe_names(job, err);
}

/* What the scan leaves out and --delete never removes: DST itself, and
 * the manifest with its companions, wherever they lie. */
static int note_own(struct ferry_job *job, struct ferry_error *err)
{
        if (ferry_own_new(job->manifest_path, job->dstfd, &job->own))
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        return 0;
}

/* How far `ferry set -j` may raise a run's -j n (coord/control.c): to what
 * -j auto could reach beside the scan threads it runs with, or n. */
static unsigned raise_cap(const struct ferry_job *job, unsigned n,
                          unsigned scanners)
{
        struct ferry_fd_fit up;
        ferry_fdlimit_fit(job->fd_limit, ferry_fdlimit_in_use(), FERRY_TUNE_MAX,
                          scanners, &up);
        return up.jobs > n && up.scanners == scanners ? up.jobs : n;
}

/* Fewer workers and scan threads when the descriptors cannot hold what
 * was asked; one warning says so. -j auto asks for its cap and warns only
 * when what fits is below AUTO_WARN_BELOW (it rarely needs the cap). */
#define AUTO_WARN_BELOW 32
static void fit_threads(struct ferry_job *job)
{
        struct ferry_fd_fit fit;
        bool autoj = job->opt.jobs == 0;
        unsigned asked = autoj ? FERRY_TUNE_MAX : job->opt.jobs;
        ferry_fdlimit_fit(job->fd_limit, ferry_fdlimit_in_use(), asked,
                          job->opt.scanners, &fit);
        job->jobs_cap =
                autoj ? fit.jobs : raise_cap(job, fit.jobs, fit.scanners);
        if (!fit.reduced || (autoj && fit.jobs >= AUTO_WARN_BELOW &&
                             fit.scanners == job->opt.scanners)) {
                job->opt.scanners = fit.scanners;
                return;
        }
        char why[256], scan[64] = "", req[32] = "auto";
        if (fit.scanners != job->opt.scanners)
                snprintf(scan, sizeof(scan), " and %u scan thread%s",
                         fit.scanners, fit.scanners == 1 ? "" : "s");
        if (!autoj)
                snprintf(req, sizeof(req), "%u", job->opt.jobs);
        snprintf(why, sizeof(why),
                 "-j %s needs about %lu open files but the limit is %lu: "
                 "using -j %u%s%s",
                 req, fit.need, job->fd_limit, fit.jobs,
                 autoj ? " at most" : "", scan);
        if (!autoj)
                job->opt.jobs = fit.jobs;
        job->opt.scanners = fit.scanners;
        if (job->opt.event)
                job->opt.event(FERRY_EV_WARNING, "", 0, why, NULL,
                               job->opt.cb_arg);
}

/* A row the scan did not see that the selection leaves out is kept
 * (manifest.h, ferry_manifest_set_keep). */
static bool keep_row(void *arg, const char *dir, size_t dlen, const char *name,
                     size_t nlen, int type, uint64_t size, bool may_stat)
{
        const struct ferry_job *job = arg;
        return ferry_select_keeps(job->select, job->srcfd, dir, dlen, name,
                                  nlen, type, size, may_stat);
}

int ferry_job_open(const struct ferry_options *opt, struct ferry_job **out,
                   struct ferry_error *err)
{
        *out = NULL;
        int rc = check_options(opt, err);
        if (rc)
                return rc;
        struct ferry_job *job = calloc(1, sizeof(*job));
        if (!job)
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        job->opt = *opt;
        job->srcfd = job->dstfd = job->lockfd = -1;
        job->fd_limit = ferry_fdlimit_raise();
        ferry_fsio_fd_reset();
        rc = resolve_paths(job, err);
        if (!rc)
                rc = ferry_select_new(opt, &job->select, err);
        if (!rc)
                rc = open_manifest(job, err);
        if (!rc)
                rc = open_trees(job, err);
        if (!rc && job->select &&
            ferry_manifest_set_keep(job->m, keep_row, job))
                rc = ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                    ferry_manifest_errmsg(job->m));
        if (!rc)
                rc = note_own(job, err);
        if (!rc)
                fit_threads(job);
        if (rc) {
                ferry_job_close(job);
                return rc;
        }
        *out = job;
        return 0;
}

static void coord_cfg(struct ferry_job *job, struct ferry_coord_cfg *cfg,
                      const char *command)
{
        memset(cfg, 0, sizeof(*cfg));
        cfg->m = job->m;
        cfg->srcfd = job->srcfd;
        cfg->dstfd = job->dstfd;
        cfg->opt = &job->opt;
        cfg->select = job->select;
        cfg->stop = &stop_requested;
        cfg->command = command;
        cfg->names = job->names;
        cfg->own = job->own;
        cfg->jobs_cap = job->jobs_cap;
        cfg->manifest_path = job->manifest_path;
}

int ferry_job_run(struct ferry_job *job, struct ferry_summary *sum,
                  struct ferry_error *err)
{
        struct ferry_coord_cfg cfg;
        coord_cfg(job, &cfg, job->opt.dry_run ? "dry-run" : "copy");
        err->msg[0] = '\0';
        int rc = ferry_coord_copy(&cfg, sum, err);
        /* after a whole scan: what --files-from lists and SRC lacks is
         * reported, as a vanished file is (exit 24), not fatal */
        bool whole = rc == FERRY_OK || rc == FERRY_EMETA ||
                     rc == FERRY_EVANISHED ||
                     (rc == FERRY_EPARTIAL && !sum->scan_errors);
        if (whole && ferry_select_missing(job->select, &job->opt) &&
            (rc == FERRY_OK || rc == FERRY_EMETA))
                rc = FERRY_EVANISHED;
        return rc;
}

int ferry_job_verify(struct ferry_job *job, enum ferry_verify_mode mode,
                     struct ferry_summary *sum, struct ferry_error *err)
{
        struct ferry_coord_cfg cfg;
        coord_cfg(job, &cfg, "verify");
        err->msg[0] = '\0';
        return ferry_coord_verify(&cfg, mode, sum, err);
}

const char *ferry_job_manifest(const struct ferry_job *job)
{
        return job->manifest_path;
}

void ferry_job_close(struct ferry_job *job)
{
        if (!job)
                return;
        ferry_manifest_close(job->m);
        ferry_select_free(job->select);
        ferry_names_free(job->names);
        ferry_own_free(job->own);
        if (job->srcfd >= 0)
                close(job->srcfd);
        if (job->dstfd >= 0)
                close(job->dstfd);
        if (job->lockfd >= 0)
                close(job->lockfd); /* releases the lock */
        free(job->src);
        free(job->dst);
        free(job->manifest_path);
        free(job->lock_path);
        free(job);
}
