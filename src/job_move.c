/*
 * job_move.c - --adopt re-points a job whose trees moved (job.h:
 * ferry_job_repoint), and its manifest follows it.
 *
 * `ferry --adopt --manifest OLD NEWSRC NEWDST` points a job at the new
 * paths (manifest/meta.c), after a sanity check: arguments swapped (the
 * new DST is the old SRC, or the new SRC the old DST, by path or by the
 * identity recorded of their roots) are refused, nothing changed.
 *
 * When OLD is the default manifest of the old paths (the state directory's
 * file of that pair), it is renamed to the default manifest of the new
 * ones, so that later runs, `ferry status NEWSRC NEWDST` and `ferry
 * export` find it without --manifest, as they found it before the move.
 * Calling sequence, with the job lock of OLD held (job.c):
 *
 *   take the lock of the new name       (another run has it: skip)
 *   the new name and its -wal, -shm and -journal absent  (else skip: a
 *       stale log there would be replayed into the manifest by SQLite)
 *   close the manifest; none of OLD's companions left   (else skip)
 *   rename, never over an existing file; fsync the directory (failed:
 *       renamed back, skip)
 *   open the manifest at its new name; commit the new paths
 *
 * The rename comes before the commit of the new paths: a crash between
 * leaves the manifest at its new default name with the old paths, which
 * a plain run on the new paths refuses (and names --adopt) instead of
 * starting a second, empty job. A skipped move is said (why, and that
 * --manifest still names the job) and noted in the manifest
 * (MF_NOTE_MOVE_PENDING): the next --adopt run tries again, though its
 * paths match by then. A manifest the user named elsewhere stays where it
 * is.
 */
#define _GNU_SOURCE
#include "job.h"

#include "fsio.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void warn(const struct ferry_job_files *f, const char *why)
{
        if (f->opt->event)
                f->opt->event(FERRY_EV_WARNING, "", 0, why, NULL,
                              f->opt->cb_arg);
}

/* The raw stat calls here go to the state directory, not SRC or DST:
 * no fsio fault counts (the tests' FERRY_FAULT) move. */
static bool same_file(const char *a, const char *b)
{
        struct stat x, y;
        return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev &&
               x.st_ino == y.st_ino;
}

/* "dev:ino" of path's root, "" when it cannot be told. */
static void identity(const char *path, char *buf, size_t size)
{
        struct stat st;
        buf[0] = '\0';
        if (!stat(path, &st))
                snprintf(buf, size, "%llu:%llu", (unsigned long long)st.st_dev,
                         (unsigned long long)st.st_ino);
}

/* Whether path + suffix exists (or cannot be told). */
static bool exists(const char *path, const char *suffix)
{
        char *p = NULL;
        if (asprintf(&p, "%s%s", path, suffix) < 0)
                return true;
        struct stat st;
        bool there = lstat(p, &st) == 0 || errno != ENOENT;
        free(p);
        return there;
}

static bool companions(const char *path)
{
        return exists(path, "-wal") || exists(path, "-shm") ||
               exists(path, "-journal");
}

/* Swapped arguments: the new DST is the job's SRC, or the new SRC its
 * DST, by path or by the identity recorded of their roots. */
static int check_sane(struct ferry_job_files *f, const char *old_src,
                      const char *old_dst, struct ferry_error *err)
{
        char src_was[64], dst_was[64], src_id[64], dst_id[64];
        if (ferry_manifest_note(*f->m, "src_identity", src_was,
                                sizeof(src_was)) ||
            ferry_manifest_note(*f->m, "dst_identity", dst_was,
                                sizeof(dst_was)))
                return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                      ferry_manifest_errmsg(*f->m));
        identity(f->src, src_id, sizeof(src_id));
        identity(f->dst, dst_id, sizeof(dst_id));
        const char *why =
                !strcmp(f->dst, old_src)   ? "the new destination is its source"
                : !strcmp(f->src, old_dst) ? "the new source is its destination"
                : dst_id[0] && !strcmp(dst_id, src_was)
                        ? "the new destination is its source (the same "
                          "directory under another name)"
                : src_id[0] && !strcmp(src_id, dst_was)
                        ? "the new source is its destination (the same "
                          "directory under another name)"
                        : NULL;
        if (!why)
                return 0;
        return ferry_job_errf(err, FERRY_EPATH,
                              "--adopt: not re-pointing the job of '%s' -> "
                              "'%s' at '%s' -> '%s': %s (SRC and DST "
                              "swapped?); nothing changed",
                              old_src, old_dst, f->src, f->dst, why);
}

/* The closed manifest from renamed to to, never over a file, and made
 * durable; 0, or why not (in why) and nothing changed. */
static int move_file(const char *from, const char *to, char *why, size_t size)
{
        if (companions(from)) {
                snprintf(why, size,
                         "SQLite left a -wal, -shm or -journal beside it: a "
                         "reader has it open, or a crash left a log to "
                         "recover");
                return EBUSY;
        }
        int rc = ferry_fsio_rename_noreplace(AT_FDCWD, from, to);
        if (rc) {
                snprintf(why, size, "cannot rename it: %s", strerror(rc));
                return rc;
        }
        char *dir = strdup(to), *slash = dir ? strrchr(dir, '/') : NULL;
        int fd = -1;
        if (!slash)
                rc = ENOMEM;
        else {
                /* the state directory's path may hold symlinks and mount
                 * points, which fsio's openat (made for SRC and DST) will
                 * not cross: a plain open, as job_lock.c's */
                slash[slash == dir] = '\0';
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                rc = fd < 0 ? errno : 0;
        }
        if (!rc)
                rc = ferry_fsio_fsync(fd);
        ferry_fsio_close(&fd);
        free(dir);
        /* not durable: a power cut could bring back either name; back to
         * the old one, which the job's lock still covers */
        if (rc && !ferry_fsio_rename_noreplace(AT_FDCWD, to, from)) {
                snprintf(why, size, "cannot make the rename durable: %s",
                         strerror(rc));
                return rc;
        }
        return 0;
}

/* Moves the manifest to the new pair's default name to (lock taken, none
 * of to and its companions there). 0 when moved; else why says why. */
static int move_to(struct ferry_job_files *f, const char *to, char *why,
                   size_t size, struct ferry_error *err)
{
        int lockfd = -1;
        char *lock_path = NULL;
        struct ferry_error e;
        int rc = ferry_job_lock_take(to, false, &lockfd, &lock_path, &e);
        if (rc)
                snprintf(why, size, "%s", e.msg);
        else if (exists(to, "") || companions(to)) {
                snprintf(why, size,
                         "'%s' or its -wal, -shm or -journal exists: another "
                         "job's, or a crash's leftovers",
                         to);
                rc = EEXIST;
        }
        if (!rc) {
                ferry_manifest_close(*f->m);
                *f->m = NULL;
                rc = move_file(*f->manifest_path, to, why, size);
                /* the lock file that has no manifest beside it now goes,
                 * while its lock is held */
                unlink(rc ? lock_path : *f->lock_path);
        }
        if (!rc) {
                close(*f->lockfd);
                free(*f->lock_path);
                free(*f->manifest_path);
                *f->lockfd = lockfd;
                *f->lock_path = lock_path;
                *f->manifest_path = strdup(to);
                if (!*f->manifest_path)
                        return ferry_job_errf(err, FERRY_EINTERNAL,
                                              "out of memory");
        } else {
                if (lockfd >= 0)
                        close(lockfd);
                free(lock_path);
        }
        if (!*f->m &&
            ferry_manifest_open(*f->manifest_path, MF_CREATE, f->m, err))
                return FERRY_EMANIFEST;
        return rc ? -1 : 0;
}

/* The manifest's file follows the job when it is the default one of the
 * old pair (or an earlier move was skipped) and not yet the new pair's:
 * *pending when that move is still wanted. */
static int follow(struct ferry_job_files *f, const char *old_src,
                  const char *old_dst, bool was_pending, bool *pending,
                  struct ferry_error *err)
{
        char *was = NULL, *to = NULL, why[4400];
        struct ferry_error e;
        *pending = false;
        bool wanted =
                was_pending || (!ferry_job_default_manifest(old_src, old_dst,
                                                            false, &was, &e) &&
                                same_file(*f->manifest_path, was));
        free(was);
        if (!wanted)
                return 0;
        if (ferry_job_default_manifest(f->src, f->dst, true, &to, &e)) {
                warn(f, e.msg);
                *pending = true;
                return 0;
        }
        if (same_file(*f->manifest_path, to)) { /* there already */
                free(to);
                return 0;
        }
        int rc = move_to(f, to, why, sizeof(why), err);
        if (rc > 0) {
                free(to);
                return rc;
        }
        *pending = rc < 0;
        char msg[9000];
        if (*pending)
                snprintf(msg, sizeof(msg),
                         "--adopt: the job's manifest stays '%s', not moved "
                         "to '%s' (%s): --manifest '%s' still names the job, "
                         "and the next --adopt run tries the move again",
                         *f->manifest_path, to, why, *f->manifest_path);
        else
                snprintf(msg, sizeof(msg),
                         "--adopt: the job's manifest is now '%s' (later "
                         "runs find it without --manifest)",
                         *f->manifest_path);
        free(to);
        warn(f, msg);
        return 0;
}

static int repoint(struct ferry_job_files *f, const char *old_src,
                   const char *old_dst, bool *moved, struct ferry_error *err)
{
        char note[8];
        if (ferry_manifest_note(*f->m, MF_NOTE_MOVE_PENDING, note,
                                sizeof(note)))
                return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                      ferry_manifest_errmsg(*f->m));
        bool was_pending = !strcmp(note, "1");
        *moved = strcmp(old_src, f->src) || strcmp(old_dst, f->dst);
        if (!*moved && !was_pending)
                return 0;
        int rc = *moved ? check_sane(f, old_src, old_dst, err) : 0;
        if (rc)
                return rc;
        if (*moved) {
                char why[9000];
                snprintf(why, sizeof(why),
                         "--adopt: the job of '%s' -> '%s' %s '%s' -> '%s'",
                         old_src, old_dst,
                         f->opt->dry_run ? "would copy" : "now copies", f->src,
                         f->dst);
                warn(f, why);
        }
        if (f->opt->dry_run)
                return 0;
        bool pending = false;
        ferry_fsio_crashpoint("repoint-before-move");
        rc = follow(f, old_src, old_dst, was_pending, &pending, err);
        ferry_fsio_crashpoint("repoint-moved");
        if (!rc &&
            ferry_manifest_repoint_job(*f->m, f->src, f->dst,
                                       strcmp(old_dst, f->dst) != 0, pending))
                rc = ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                    ferry_manifest_errmsg(*f->m));
        return rc;
}

int ferry_job_repoint(struct ferry_job_files *f, bool *moved,
                      struct ferry_error *err)
{
        char *old_src = NULL, *old_dst = NULL;
        *moved = false;
        if (ferry_manifest_job_paths(*f->m, &old_src, &old_dst))
                return ferry_job_errf(err, FERRY_EMANIFEST, "%s",
                                      ferry_manifest_errmsg(*f->m));
        /* a new manifest: bind_job records the paths */
        int rc = old_src[0] && old_dst[0]
                         ? repoint(f, old_src, old_dst, moved, err)
                         : 0;
        free(old_src);
        free(old_dst);
        return rc;
}
