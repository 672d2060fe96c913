/*
 * copy_dst.c - what the copier puts in DST, and how (copier.h).
 *
 * Temp names, DST directories (made, opened, given back owner access),
 * temp files, what counts as a metadata shortfall (data in place, some
 * metadata not), files too big for DST, times set again after the rename
 * on a DST whose rename does not keep them, and rule 9 (DESIGN.md; a special
 * file is ferry's when its kind and device number are what ferry made
 * too): a copy is renamed over an existing entry only when that entry is
 * ferry's (ferry_copy_matches, ferry_copy_is_ours); anything else is left
 * alone with the reason why (c->why, FERRY_STEP_NOT_OURS).
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"
#include "manifest_types.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Whether s (len bytes) is well-formed UTF-8: lead bytes C2..F4, each
 * followed by as many continuation bytes as it says. */
static bool is_utf8(const unsigned char *s, size_t len)
{
        for (size_t i = 0; i < len;) {
                unsigned char b = s[i];
                size_t more = b < 0x80                ? 0
                              : b >= 0xc2 && b < 0xe0 ? 1
                              : b >= 0xe0 && b < 0xf0 ? 2
                              : b >= 0xf0 && b < 0xf5 ? 3
                                                      : SIZE_MAX;
                if (more == SIZE_MAX || len - i - 1 < more)
                        return false;
                for (size_t k = 1; k <= more; k++)
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                i += more + 1;
        }
        return true;
}

/* A name too long for its temp name is cut; a UTF-8 name on a character
 * boundary (exFAT and others store UTF-16 and refuse a cut character with
 * EILSEQ), any other by bytes. */
void ferry_copy_temp_name(const char *name, int64_t id, char *out)
{
        char suffix[40];
        int slen = snprintf(suffix, sizeof(suffix), ".%lld.ferry-part",
                            (long long)id);
        size_t keep = strlen(name);
        size_t room = NAME_MAX - 1 - (size_t)slen;
        if (keep > room) {
                const unsigned char *u = (const unsigned char *)name;
                bool utf8 = is_utf8(u, keep);
                keep = room;
                while (utf8 && keep && (u[keep] & 0xc0) == 0x80)
                        keep--;
        }
        out[0] = '.';
        memcpy(out + 1, name, keep);
        memcpy(out + 1 + keep, suffix, (size_t)slen + 1);
}

int ferry_copy_open_dst_dir(int dstfd, const char *path, bool create, int *fd)
{
        int rc = create ? ferry_fsio_make_dirs(dstfd, path, fd)
                        : ferry_fsio_open_dir(dstfd, path, fd);
        if (rc != EACCES || geteuid() == 0 || !path[0])
                return rc;
        /* an earlier run gave the directory a mode without owner access
         * (the source's): take it back, the end of the run restores it */
        struct ferry_stat st;
        if (ferry_fsio_statat(dstfd, path, &st) || st.uid != geteuid() ||
            !S_ISDIR(st.mode) ||
            ferry_fsio_fchmodat(dstfd, path, (st.mode & 07777) | S_IRWXU))
                return rc;
        return create ? ferry_fsio_make_dirs(dstfd, path, fd)
                      : ferry_fsio_open_dir(dstfd, path, fd);
}

int ferry_copy_make_dst_dir(const struct ferry_copy_dirs *d, const char *path,
                            int *fd, char *why, size_t size)
{
        why[0] = '\0';
        if (ferry_names_dir_refused(d->names, path, why, size))
                return EINVAL;
        bool clash = false;
        int rc = ferry_names_dir_clash(d->names, d->dstfd, d->srcfd, path,
                                       &clash, why, size);
        if (!rc && !clash)
                rc = ferry_copy_open_dst_dir(d->dstfd, path, true, fd);
        /* again for the components that only an EACCES fix-up could make
         * (the others are known fine by now: no system call) */
        if (!rc && !clash)
                rc = ferry_names_dir_clash(d->names, d->dstfd, d->srcfd, path,
                                           &clash, why, size);
        if (rc || clash)
                ferry_fsio_close(fd);
        return clash ? EEXIST : rc;
}

/* Creates the temp file for it; a leftover of a crashed run is removed. */
/* Not root and the destination directory is read-only (its mode came from
 * the source on an earlier run): give the owner write access back; the
 * directory's own mode is applied again at the end of the run. */
static bool make_dir_writable(struct ferry_copier *c)
{
        struct ferry_stat st;
        if (c->root || ferry_fsio_fstat(c->dst_dir, &st) ||
            st.uid != geteuid() || (st.mode & S_IWUSR))
                return false;
        return ferry_fsio_fchmod(c->dst_dir,
                                 (st.mode & 07777) | S_IWUSR | S_IXUSR) == 0;
}

/* The temp file's mode: private until its own mode is applied; with
 * --no-perms (or a DST that keeps no modes) none is applied, and the
 * umask makes it what cp's would be (readable meanwhile, as cp's are). */
int ferry_copier_create_temp(struct ferry_copier *c, const char *tmp, int *fd)
{
        return ferry_copier_create_temp_as(c, tmp, O_WRONLY, fd);
}

#ifdef FERRY_TESTING
/* Test builds: with FERRY_TEST_CREATE_STOP=PATH, the first temp file's
 * creation makes PATH and stops the whole process (SIGSTOP: no lease is
 * renewed either) until a SIGCONT (t96: a host stalled here past its
 * lease while another copies the file). */
static void create_wait(void)
{
        static atomic_bool done;
        const char *p = getenv("FERRY_TEST_CREATE_STOP");
        if (!p || atomic_exchange(&done, true))
                return;
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
                close(fd);
        raise(SIGSTOP);
}
#else
static void create_wait(void)
{
}
#endif

int ferry_copier_create_temp_as(struct ferry_copier *c, const char *tmp,
                                int access, int *fd)
{
        create_wait();
        /* a shared job's claim past its fence may be another's: the name
         * may be that claim's temp, neither replaced nor made again */
        if (ferry_copier_fenced(&c->cfg))
                return ECANCELED;
        const int flags = access | O_CREAT | O_EXCL | O_NOFOLLOW;
        mode_t mode = c->cfg.meta.perms ? 0600 : 0666 & ~c->cfg.meta.umask;
        int rc = ferry_fsio_openat(c->dst_dir, tmp, flags, mode, fd);
        if (rc == EACCES && make_dir_writable(c))
                rc = ferry_fsio_openat(c->dst_dir, tmp, flags, mode, fd);
        if (rc != EEXIST)
                return rc;
        if (ferry_copier_fenced(&c->cfg))
                return ECANCELED;
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        return ferry_fsio_openat(c->dst_dir, tmp, flags, mode, fd);
}

bool ferry_copy_meta_shortfall(int dstfd, int err)
{
        /* transient: retried as a copy is (then a failure, as today) */
        if (ferry_fsio_out_of_fds(err) || err == ENOSPC || err == EDQUOT ||
            ferry_copy_transient(err))
                return false;
        return !(ferry_copy_dst_suspect(err) && ferry_copy_dst_failed(dstfd));
}

bool ferry_copier_meta_failed(struct ferry_copier *c, struct ferry_item *it,
                              int err, enum ferry_step step)
{
        if (!ferry_copy_meta_shortfall(c->cfg.dstfd, err))
                return false;
        it->meta_fail = (struct ferry_failure){FERRY_SIDE_DST, step, err};
        return true;
}

bool ferry_copier_too_big(struct ferry_copier *c, const struct ferry_item *it)
{
        uint64_t max = c->cfg.meta.caps.max_size;
        if (!max || it->type != FT_REG || it->st.size <= max) /* 0: unset */
                return false;
        c->why_step = FERRY_STEP_TOO_BIG;
        if (max == 0xffffffffULL)
                snprintf(c->why, sizeof(c->why),
                         "larger than the destination can hold (4 GiB - 1 on "
                         "FAT32)");
        else
                snprintf(c->why, sizeof(c->why),
                         "larger than the destination can hold (%llu bytes)",
                         (unsigned long long)max);
        return true;
}

/* Coarsest mtime a destination keeps: FAT's 2 s (exFAT 10 ms, exfat-fuse
 * whole seconds). */
#define MTIME_SLACK_NS 2000000000LL

static bool is_type(const struct ferry_stat *st, enum ferry_ftype t)
{
        return t == FT_REG ? S_ISREG(st->mode)
               : t == FT_LINK
                       ? S_ISLNK(st->mode)
                       : t == FT_SPECIAL && ferry_copy_is_special(st->mode);
}

uint64_t ferry_copy_dst_size(enum ferry_ftype t, const struct ferry_stat *d)
{
        return t == FT_SPECIAL ? ferry_copy_special_id(d->mode, d->rdev)
                               : d->size;
}

static bool near_time(struct ferry_time a, struct ferry_time b)
{
        return ferry_time_near(a, b, MTIME_SLACK_NS);
}

bool ferry_copy_matches(const struct ferry_dst_rec *rec,
                        const struct ferry_stat *d)
{
        return rec->type && is_type(d, rec->type) &&
               ferry_copy_dst_size(rec->type, d) == rec->size &&
               near_time(d->mtime, rec->mtime);
}

bool ferry_copy_is_ours(const struct ferry_copy_cfg *cfg,
                        const struct ferry_item *it,
                        const struct ferry_stat *src,
                        const struct ferry_stat *d)
{
        if (ferry_copy_matches(&it->dst, d))
                return true;
        if (!is_type(d, it->type))
                return false;
        if (cfg->meta.times && ferry_copy_same_version(cfg, it->type, src, d))
                return true;
        /* a shared job (a fence): only a row a claim of which ended
         * without a done outcome; else no host wrote it unmarked */
        return cfg->written_since && (!cfg->fence || it->unmarked) &&
               d->ctime.sec >= cfg->written_since;
}

bool ferry_copy_same_version(const struct ferry_copy_cfg *cfg,
                             enum ferry_ftype t, const struct ferry_stat *src,
                             const struct ferry_stat *d)
{
        return is_type(d, t) &&
               ferry_copy_dst_size(t, d) == ferry_copy_dst_size(t, src) &&
               (!cfg->meta.times || near_time(d->mtime, src->mtime));
}

const char *ferry_copy_kind(const struct ferry_stat *d)
{
        return S_ISREG(d->mode)   ? "file"
               : S_ISLNK(d->mode) ? "symlink"
               : S_ISDIR(d->mode) ? "directory"
                                  : "special file";
}

void ferry_copy_refusal(const struct ferry_item *it, const struct ferry_stat *d,
                        char *why, size_t size)
{
        snprintf(why, size,
                 "not replaced: the destination has a %s here that %s",
                 ferry_copy_kind(d),
                 it->dst.type ? "was changed since ferry copied it"
                              : "ferry did not write (another job's or a "
                                "user's)");
}

/* Puts tmp in place as name under rule 9: a new name with no-replace, an
 * entry that is ferry's over it; an entry that is not is left alone
 * (EEXIST, c->why says why), a directory goes to the coordinator (EISDIR). */
static int place(struct ferry_copier *c, const struct ferry_item *it,
                 const struct ferry_stat *src, const char *tmp,
                 const char *name)
{
        int rc = ferry_fsio_rename_noreplace(c->dst_dir, tmp, name);
        if (rc != EEXIST)
                return rc;
        struct ferry_stat d, t;
        if ((rc = ferry_fsio_statat(c->dst_dir, name, &d)))
                return rc == ENOENT ? EAGAIN : rc; /* gone meanwhile: again */
        if (S_ISDIR(d.mode))
                return EISDIR;
        /* a hardlink follower's name that already links to the copy */
        bool linked = it->link_off && !ferry_fsio_statat(c->dst_dir, tmp, &t) &&
                      t.ino == d.ino && t.dev == d.dev;
        if (!linked && !ferry_copy_is_ours(&c->cfg, it, src, &d)) {
                /* on a case-insensitive DST it may be the copy of a row
                 * of another spelling: the coordinator knows (ENOTUNIQ) */
                if (ferry_names_case_insensitive(c->cfg.names))
                        return ENOTUNIQ;
                ferry_copy_refusal(it, &d, c->why, sizeof(c->why));
                c->why_step = FERRY_STEP_NOT_OURS;
                return EEXIST;
        }
        return ferry_fsio_renameat(c->dst_dir, tmp, name);
}

bool ferry_fence_passed(const _Atomic int64_t *fence)
{
        if (!fence)
                return false;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        return now > atomic_load(fence);
}

bool ferry_copier_fenced(const struct ferry_copy_cfg *cfg)
{
        return ferry_fence_passed(cfg->fence);
}

/* Renames tmp over name (place). On a case-insensitive DST, the copy of
 * another source file whose name differs only by case is not replaced:
 * EEXIST, and c->why says so. Past a shared job's fence nothing is put in
 * place: ECANCELED. */
int ferry_copier_install(struct ferry_copier *c, const struct ferry_item *it,
                         const struct ferry_stat *src, const char *tmp,
                         const char *name)
{
        if (ferry_copier_fenced(&c->cfg))
                return ECANCELED;
        bool clash = false;
        ferry_names_lock(c->cfg.names, it->dir_id, name);
        int rc = ferry_names_clash(c->cfg.names, c->dst_dir, c->src_dir, name,
                                   src, &clash, c->why, sizeof(c->why));
        if (!rc && clash)
                rc = EEXIST;
        else if (!rc)
                rc = place(c, it, src, tmp, name);
        ferry_names_unlock(c->cfg.names, it->dir_id, name);
        if (!rc)
                ferry_fsio_crashpoint("after_rename");
        return rc;
}

int ferry_copier_times_again(struct ferry_copier *c, struct ferry_item *it,
                             const struct ferry_stat *st, const char *name,
                             const struct step **step)
{
        const struct ferry_meta_cfg *mc = &c->cfg.meta;
        if (mc->caps.times_survive_rename || !(it->applied & MF_AP_TIMES))
                return 0;
        int rc = ferry_fsio_utimensat(c->dst_dir, name, st->atime, st->mtime,
                                      AT_SYMLINK_NOFOLLOW);
        if (!rc)
                return 0;
        it->applied &= ~(uint32_t)MF_AP_TIMES;
        enum ferry_step fs =
                S_ISLNK(st->mode) ? FERRY_STEP_LUTIMES : FERRY_STEP_UTIMES;
        struct ferry_failure first = it->meta_fail; /* the one said, if any */
        if (ferry_copier_meta_failed(c, it, rc, fs)) {
                if (first.step != FERRY_STEP_NONE)
                        it->meta_fail = first;
                return 0; /* the entry is in place: a shortfall */
        }
        *step = ferry_copier_dst_step(fs);
        return rc;
}

/* What the copy left in DST, for the manifest (rule 9): the source's size
 * (a special's kind and device number) and mtime, or with --no-times (or
 * a metadata shortfall, which may have left the times unset) the mtime DST
 * gave it. */
void ferry_copier_record_dst(struct ferry_copier *c, struct ferry_item *it,
                             const char *name)
{
        struct ferry_stat d;
        it->dst.type = it->type;
        it->dst.size = ferry_copy_dst_size(it->type, &it->st);
        it->dst.mtime = it->st.mtime;
        if (!c->cfg.meta.times || it->meta_fail.step) {
                if (ferry_fsio_statat(c->dst_dir, name, &d))
                        it->dst.type = 0; /* unknown: not claimed */
                else
                        it->dst.mtime = d.mtime;
        }
}
