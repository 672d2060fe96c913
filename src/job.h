/*
 * job.h - what the files of the job (job.c, job_paths.c, job_lock.c) share;
 * private to them.
 *
 * job.c is the public API of include/ferry.h; job_paths.c resolves SRC and
 * DST and finds the default manifest; job_lock.c takes the job lock and
 * names its holder; job_move.c re-points a moved job (--adopt).
 */
#ifndef FERRY_JOB_H
#define FERRY_JOB_H

#include "ferry.h"

#include <stdatomic.h>
#include <stdbool.h>

struct ferry_manifest;

/* The flag ferry_request_stop sets, for a run's threads to watch. */
atomic_bool *ferry_job_stop_flag(void);

/* Formats err->msg and returns code: `return ferry_job_errf(err, ...)`. */
int ferry_job_errf(struct ferry_error *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The real path of SRC, which must be a directory; caller frees *out. */
int ferry_job_resolve_src(const char *src, char **out, struct ferry_error *err);
/* The real path DST has or will have (its parent must exist); *exists
 * says whether it does. Caller frees *out. */
int ferry_job_resolve_dst(const char *dst, char **out, bool *exists,
                          struct ferry_error *err);
/* $XDG_STATE_HOME/ferry/<hash of the pair>.db, else ~/.local/state/...
 * for the resolved src and dst; create: make the directory when missing
 * (a run; status only reads). Caller frees *out. */
int ferry_job_default_manifest(const char *src, const char *dst, bool create,
                               char **out, struct ferry_error *err);
/* What re-pointing a job needs of it (job.c owns them all): the options
 * and resolved paths, lent; the manifest, its path, its lock and the lock
 * file's path, which ferry_job_repoint may replace (closing and freeing
 * the old ones) when the manifest's file moves. */
struct ferry_job_files {
        const struct ferry_options *opt;
        const char *src, *dst;
        char **manifest_path, **lock_path;
        int *lockfd;
        struct ferry_manifest **m;
};
/* job_move.c: --adopt: a manifest of other SRC or DST paths (the job's
 * trees moved) is pointed at f->src and f->dst, its default file renamed
 * to the new pair's (one warning says each). *moved when the paths
 * differed (a dry run: they still do). Refuses swapped arguments
 * (FERRY_EPATH, nothing changed). The job lock of *f->manifest_path is
 * held. */
int ferry_job_repoint(struct ferry_job_files *f, bool *moved,
                      struct ferry_error *err);

/* The manifest of a job for a reader (status, export): manifest when
 * given, else the default one of SRC and DST (resolved, not made). */
int ferry_job_manifest_of(const char *manifest, const char *src,
                          const char *dst, char **out, struct ferry_error *err);

/* ferry_job_lock_holder when a run holds the lock but the lock file names
 * no live process (the holder writes its pid just after taking the lock;
 * a holder in another PID namespace or on another host of a shared file
 * system cannot be seen from here). */
#define FERRY_LOCK_HOLDER_UNKNOWN (-1L)

/* Takes the job lock "<manifest_path>.lock" (one run per manifest) and
 * writes this process's pid and host in it. *lockfd (caller closes: that
 * releases it) and *lock_path (caller frees) are set as soon as they exist,
 * also on failure. verify: the message of a lock that cannot be opened says
 * that
 * --verify needs write access. FERRY_ELOCKED when another run holds it. */
int ferry_job_lock_take(const char *manifest_path, bool verify, int *lockfd,
                        char **lock_path, struct ferry_error *err);
/* Who holds the lock on the lock file open at fd, without taking it: 0
 * when nobody does, the holder's pid, or FERRY_LOCK_HOLDER_UNKNOWN. The
 * host the lock names goes to host (size > 0; "" when it names none or
 * nobody holds it). A pid of another host is taken as named: it cannot be
 * looked at from here. */
long ferry_job_lock_holder(int fd, char *host, size_t size);

#endif
