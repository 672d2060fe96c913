/*
 * copy.c - one row at a time: copy, link or verify (copy.h).
 *
 * Owns the per-worker buffer, the XXH3 state and the cached descriptors of
 * the current source and destination directories. The hash always covers
 * the logical content (holes hash as zeros), so `xxhsum -H2` of the copy
 * gives the manifest's value.
 */
#define _GNU_SOURCE
#include "config.h"
#include "copy.h"

#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define BUF_SIZE (128 * 1024)

struct ferry_copier {
        struct ferry_copy_cfg cfg;
        XXH3_state_t *xxh;
        char *buf;
        bool root;
        int64_t dir_id; /* the directory the fds below belong to */
        int src_dir, dst_dir;
        int src_err, dst_err; /* why a descriptor is missing */
        char dir_why[384];    /* the reason for dst_err (names), or "" */
        char why[384];        /* the current item's own reason (names), or "" */
};

static const char zeros[64 * 1024];

/* The tree a step works on. Decisions (a full or failed DST, a vanished
 * source file) go by side and errno, never by the words of a message. */
enum side { SIDE_SRC = 1, SIDE_DST };

/* A step of a copy or verify that can fail: the words its failure gives
 * (it->what), and its side. */
struct step {
        const char *what;
        enum side side;
};

static const struct step S_COPY = {"copy", SIDE_DST};
static const struct step S_OPEN_SRC = {"open source", SIDE_SRC};
static const struct step S_OPEN_SRC_DIR = {"open source directory", SIDE_SRC};
static const struct step S_READ_SRC = {"read source", SIDE_SRC};
static const struct step S_READ_SRC_LINK = {"read source link", SIDE_SRC};
static const struct step S_STAT_SRC = {"stat source", SIDE_SRC};
static const struct step S_MAKE_DIR = {"create destination directory",
                                       SIDE_DST};
static const struct step S_CREATE = {"create destination", SIDE_DST};
static const struct step S_CREATE_LINK = {"create destination link", SIDE_DST};
static const struct step S_WRITE = {"write destination", SIDE_DST};
static const struct step S_FSYNC = {"fsync destination", SIDE_DST};
static const struct step S_CLOSE = {"close destination", SIDE_DST};
static const struct step S_OWNER = {"set owner", SIDE_DST};
static const struct step S_MODE = {"set mode", SIDE_DST};
static const struct step S_TIMES = {"set times", SIDE_DST};
static const struct step S_LINK_OWNER = {"set link owner", SIDE_DST};
static const struct step S_LINK_TIMES = {"set link times", SIDE_DST};
static const struct step S_LINK = {"link to first name", SIDE_DST};
static const struct step S_RENAME = {"rename into place", SIDE_DST};
static const struct step S_VERIFY_DST = {"destination", SIDE_DST};
static const struct step S_VERIFY_SRC = {"source", SIDE_SRC};

int ferry_copier_new(const struct ferry_copy_cfg *cfg,
                     struct ferry_copier **out)
{
        struct ferry_copier *c = calloc(1, sizeof(*c));
        if (!c)
                return ENOMEM;
        c->cfg = *cfg;
        c->xxh = XXH3_createState();
        c->buf = malloc(BUF_SIZE);
        if (!c->xxh || !c->buf) {
                ferry_copier_free(c);
                return ENOMEM;
        }
        c->root = geteuid() == 0;
        c->dir_id = -1;
        c->src_dir = c->dst_dir = -1;
        *out = c;
        return 0;
}

static void leave_dir(struct ferry_copier *c)
{
        ferry_fsio_close(&c->src_dir);
        ferry_fsio_close(&c->dst_dir);
        c->dir_id = -1;
}

void ferry_copier_free(struct ferry_copier *c)
{
        if (!c)
                return;
        leave_dir(c);
        if (c->xxh)
                XXH3_freeState(c->xxh);
        free(c->buf);
        free(c);
}

bool ferry_copy_transient(int err)
{
        switch (err) {
        case EIO:
        case EAGAIN:
        case ETIMEDOUT:
        case ESTALE:
        case EHOSTDOWN:
        case EHOSTUNREACH:
        case ECONNRESET:
        case ECONNABORTED:
        case ENOTCONN:
        case EBUSY: return true;
        default: return false;
        }
}

bool ferry_copy_dst_suspect(int err)
{
        switch (err) {
        case EIO:
        case ENODEV:
        case ENXIO:
        case ESHUTDOWN:
        case EROFS:
        case ENOTCONN:
        case ESTALE:
        case ENOENT: /* DST's root removed: nothing can be made in it */
        case ETIMEDOUT:
        case EHOSTDOWN:
        case EHOSTUNREACH:
        case ECONNRESET:
        case ECONNABORTED: return true;
        default: return false;
        }
}

int ferry_copy_dst_failed(int dstfd)
{
        if (dstfd < 0)
                return 0;
        /* what the probe may also meet on a live DST (no O_TMPFILE, no
         * room, no permission) tells nothing */
        int err = ferry_fsio_probe_dir(dstfd);
        return ferry_copy_dst_suspect(err) ? err : 0;
}

void ferry_copy_temp_name(const char *name, int64_t id, char *out)
{
        char suffix[40];
        int slen = snprintf(suffix, sizeof(suffix), ".%lld.ferry-part",
                            (long long)id);
        size_t keep = strlen(name);
        size_t room = NAME_MAX - 1 - (size_t)slen;
        if (keep > room)
                keep = room;
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

/* Opens the directories of it (source, destination or both) unless cached. */
static void enter_dir(struct ferry_copier *c, const struct ferry_batch *b,
                      const struct ferry_item *it)
{
        if (c->dir_id == it->dir_id)
                return;
        leave_dir(c);
        const char *dir = ferry_batch_at(b, it->dir_off);
        c->src_err = c->dst_err = 0;
        c->dir_why[0] = '\0';
        if (b->work & (WORK_COPY | WORK_VERIFY_SRC))
                c->src_err =
                        ferry_fsio_open_dir(c->cfg.srcfd, dir, &c->src_dir);
        struct ferry_copy_dirs d = {c->cfg.srcfd, c->cfg.dstfd, c->cfg.names};
        if (b->work & WORK_COPY)
                c->dst_err = ferry_copy_make_dst_dir(
                        &d, dir, &c->dst_dir, c->dir_why, sizeof(c->dir_why));
        else if (b->work & WORK_VERIFY_DST)
                c->dst_err = ferry_copy_open_dst_dir(c->cfg.dstfd, dir, false,
                                                     &c->dst_dir);
        /* no descriptor is no answer about the directory: not kept */
        c->dir_id = ferry_fsio_out_of_fds(c->src_err) ||
                                    ferry_fsio_out_of_fds(c->dst_err)
                            ? -1
                            : it->dir_id;
}

/* A full destination stops the run (R_NOSPACE); ENOSPC or EDQUOT from a
 * step on SRC says nothing about DST and fails only this file. No
 * descriptor after fsio's wait (EMFILE, ENFILE) is no file's fault either:
 * it stops the run too (R_NOFDS), on either side. */
static void set_result(struct ferry_item *it, int err, const struct step *s)
{
        it->err = err;
        it->what = s->what;
        if (ferry_fsio_out_of_fds(err))
                it->result = R_NOFDS;
        else if ((err == ENOSPC || err == EDQUOT) && s->side == SIDE_DST)
                it->result = R_NOSPACE;
        else
                it->result = R_FAILED;
}

/* Step s failed with err: when that may be DST's own failure and DST's
 * root no longer answers, it is R_DSTFAIL (err: why DST failed) and true:
 * nothing is retried, the run stops. */
static bool dst_gone(struct ferry_copier *c, struct ferry_item *it, int err,
                     const struct step *s)
{
        if (s->side != SIDE_DST || !ferry_copy_dst_suspect(err))
                return false;
        int why = ferry_copy_dst_failed(c->cfg.dstfd);
        if (!why)
                return false;
        it->result = R_DSTFAIL;
        it->err = why;
        it->what = s->what;
        return true;
}

static void hash_zeros(XXH3_state_t *xxh, uint64_t n)
{
        while (n) {
                size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
                XXH3_128bits_update(xxh, zeros, k);
                n -= k;
        }
}

static void hash_final(XXH3_state_t *xxh, uint8_t out[16])
{
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(xxh));
        memcpy(out, canon.digest, 16);
}

/* Reads fd to EOF, hashing; writes to out unless out < 0. */
static int stream(struct ferry_copier *c, int in, int out, uint64_t *total,
                  const struct step **step)
{
        for (;;) {
                size_t got;
                int rc = ferry_fsio_read(in, c->buf, BUF_SIZE, &got);
                if (rc) {
                        *step = &S_READ_SRC;
                        return rc;
                }
                if (!got)
                        return 0;
                XXH3_128bits_update(c->xxh, c->buf, got);
                if (out >= 0 && (rc = ferry_fsio_write(out, c->buf, got))) {
                        *step = &S_WRITE;
                        return rc;
                }
                *total += got;
                if (got < BUF_SIZE)
                        return 0;
                if (atomic_load(c->cfg.stop)) {
                        *step = &S_COPY;
                        return ECANCELED;
                }
        }
}

/* Copies the data ranges of a sparse file; holes stay holes. */
static int stream_sparse(struct ferry_copier *c, int in, int out, uint64_t size,
                         uint64_t *total, const struct step **step)
{
        off_t off = 0, end = (off_t)size;
        *step = &S_READ_SRC;
        while (off < end) {
                off_t data = lseek(in, off, SEEK_DATA);
                if (data < 0 && errno != ENXIO)
                        return errno;
                if (data < 0 || data > end)
                        data = end;
                hash_zeros(c->xxh, (uint64_t)(data - off));
                off = data;
                if (off >= end)
                        break;
                off_t hole = lseek(in, off, SEEK_HOLE);
                if (hole < 0)
                        return errno;
                if (hole > end)
                        hole = end;
                while (off < hole) {
                        size_t want = (size_t)(hole - off) < BUF_SIZE
                                              ? (size_t)(hole - off)
                                              : BUF_SIZE;
                        size_t got;
                        int rc = ferry_fsio_pread(in, c->buf, want, off, &got);
                        if (rc)
                                return rc;
                        if (!got)
                                return 0; /* shrank: the fstat after sees it */
                        XXH3_128bits_update(c->xxh, c->buf, got);
                        if ((rc = ferry_fsio_pwrite(out, c->buf, got, off))) {
                                *step = &S_WRITE;
                                return rc;
                        }
                        off += (off_t)got;
                }
        }
        *total = size;
        *step = &S_WRITE;
        return ferry_fsio_ftruncate(out, end);
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

static int create_temp(struct ferry_copier *c, const char *tmp, int *fd)
{
        int rc = ferry_fsio_openat(c->dst_dir, tmp,
                                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                                   0600, fd);
        if (rc == EACCES && make_dir_writable(c))
                rc = ferry_fsio_openat(c->dst_dir, tmp,
                                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                                       0600, fd);
        if (rc != EEXIST)
                return rc;
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        return ferry_fsio_openat(c->dst_dir, tmp,
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600,
                                 fd);
}

static bool same_file(const struct ferry_stat *a, const struct ferry_stat *b)
{
        return a->size == b->size && ferry_time_eq(a->mtime, b->mtime) &&
               ferry_time_eq(a->ctime, b->ctime) && a->ino == b->ino &&
               a->dev == b->dev;
}

static int apply_file_meta(struct ferry_copier *c, int fd,
                           const struct ferry_stat *st,
                           const struct step **step)
{
        int rc = 0;
        if (c->cfg.owner && c->root &&
            (rc = ferry_fsio_fchown(fd, st->uid, st->gid))) {
                *step = &S_OWNER;
                return rc;
        }
        mode_t mode =
                c->cfg.perms ? (st->mode & 07777) : (0666 & ~c->cfg.umask);
        if ((rc = ferry_fsio_fchmod(fd, mode))) {
                *step = &S_MODE;
                return rc;
        }
        if (c->cfg.times &&
            (rc = ferry_fsio_futimens(fd, st->atime, st->mtime))) {
                *step = &S_TIMES;
                return rc;
        }
        return 0;
}

/* Coarsest mtime a destination keeps: FAT's 2 s (exFAT 10 ms, exfat-fuse
 * whole seconds). */
#define MTIME_SLACK_NS 2000000000LL

static bool is_type(const struct ferry_stat *st, enum ferry_ftype t)
{
        return t == FT_REG ? S_ISREG(st->mode)
                           : t == FT_LINK && S_ISLNK(st->mode);
}

static bool near_time(struct ferry_time a, struct ferry_time b)
{
        return ferry_time_near(a, b, MTIME_SLACK_NS);
}

bool ferry_copy_matches(const struct ferry_dst_rec *rec,
                        const struct ferry_stat *d)
{
        return rec->type && is_type(d, rec->type) && d->size == rec->size &&
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
        if (d->size == src->size && cfg->times &&
            near_time(d->mtime, src->mtime))
                return true;
        return cfg->written_since && d->ctime.sec >= cfg->written_since;
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
 * (EEXIST, c->why says why), a directory goes to the journal (EISDIR). */
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
                 * of another spelling: the journal knows (ENOTUNIQ) */
                if (ferry_names_case_insensitive(c->cfg.names))
                        return ENOTUNIQ;
                ferry_copy_refusal(it, &d, c->why, sizeof(c->why));
                return EEXIST;
        }
        return ferry_fsio_renameat(c->dst_dir, tmp, name);
}

/* Renames tmp over name (place). On a case-insensitive DST, the copy of
 * another source file whose name differs only by case is not replaced:
 * EEXIST, and c->why says so. */
static int install(struct ferry_copier *c, const struct ferry_item *it,
                   const struct ferry_stat *src, const char *tmp,
                   const char *name)
{
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

static int open_source(struct ferry_copier *c, const char *name, int *fd)
{
        /* O_NONBLOCK: a file turned FIFO must not hang the worker; it means
         * nothing for the regular files we read */
        int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK;
#ifdef HAVE_O_NOATIME
        int rc = ferry_fsio_openat(c->src_dir, name, flags | O_NOATIME, 0, fd);
        if (rc != EPERM)
                return rc;
#endif
        return ferry_fsio_openat(c->src_dir, name, flags, 0, fd);
}

/* Writes the data and metadata of one attempt into tmp; *changed when the
 * source moved under us. */
static int copy_data(struct ferry_copier *c, int in, int out,
                     const struct ferry_stat *before, struct ferry_item *it,
                     bool *changed, const struct step **step)
{
        uint64_t total = 0;
        XXH3_128bits_reset(c->xxh);
        bool sparse =
                before->size > BUF_SIZE && before->blocks * 512 < before->size;
#ifdef HAVE_POSIX_FADVISE
        if (before->size > BUF_SIZE)
                posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        int rc = sparse ? stream_sparse(c, in, out, before->size, &total, step)
                        : stream(c, in, out, &total, step);
        if (rc)
                return rc;
        struct ferry_stat after;
        if ((rc = ferry_fsio_fstat(in, &after))) {
                *step = &S_STAT_SRC;
                return rc;
        }
        *changed = !same_file(before, &after) || total != after.size;
        if (*changed)
                return 0;
        hash_final(c->xxh, it->hash);
        it->st = after;
        it->bytes = total;
        return apply_file_meta(c, out, before, step);
}

static int copy_once(struct ferry_copier *c, const char *name,
                     struct ferry_item *it, bool *changed,
                     const struct step **step)
{
        int in = -1, out = -1, rc;
        char tmp[NAME_MAX + 1];
        *changed = false;
        *step = &S_OPEN_SRC;
        if ((rc = open_source(c, name, &in)))
                return rc == ELOOP ? (*changed = true, 0) : rc;
        struct ferry_stat before;
        if ((rc = ferry_fsio_fstat(in, &before)))
                goto out;
        if (!S_ISREG(before.mode)) {
                *changed = true;
                goto out;
        }
        ferry_copy_temp_name(name, it->id, tmp);
        *step = &S_CREATE;
        if ((rc = create_temp(c, tmp, &out)))
                goto out;
        rc = copy_data(c, in, out, &before, it, changed, step);
        if (!rc && !*changed && c->cfg.fsync_each &&
            (rc = ferry_fsio_fsync(out)))
                *step = &S_FSYNC;
        int crc = ferry_fsio_close(&out);
        if (!rc && crc) {
                rc = crc;
                *step = &S_CLOSE;
        }
        if (!rc && !*changed) {
                ferry_fsio_crashpoint("after_write");
                *step = &S_RENAME;
                rc = install(c, it, &before, tmp, name);
        }
        if (rc || *changed)
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
out:
        ferry_fsio_close(&out);
        ferry_fsio_close(&in);
        return rc;
}

static int copy_symlink_once(struct ferry_copier *c, const char *name,
                             struct ferry_item *it, bool *changed,
                             const struct step **step)
{
        char *target = NULL;
        size_t len = 0;
        char tmp[NAME_MAX + 1];
        struct ferry_stat st;
        *changed = false;
        *step = &S_READ_SRC_LINK;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (!rc && !S_ISLNK(st.mode)) {
                *changed = true;
                return 0;
        }
        if (!rc)
                rc = ferry_fsio_readlinkat(c->src_dir, name, &target, &len);
        if (rc)
                return rc == EINVAL ? (*changed = true, 0) : rc;
        ferry_copy_temp_name(name, it->id, tmp);
        *step = &S_CREATE_LINK;
        rc = ferry_fsio_symlinkat(target, c->dst_dir, tmp);
        if (rc == EEXIST) {
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
                rc = ferry_fsio_symlinkat(target, c->dst_dir, tmp);
        }
        if (!rc && c->cfg.owner && c->root &&
            (rc = ferry_fsio_lchownat(c->dst_dir, tmp, st.uid, st.gid)))
                *step = &S_LINK_OWNER;
        if (!rc && c->cfg.times &&
            (rc = ferry_fsio_utimensat(c->dst_dir, tmp, st.atime, st.mtime,
                                       AT_SYMLINK_NOFOLLOW)))
                *step = &S_LINK_TIMES;
        if (!rc) {
                *step = &S_RENAME;
                rc = install(c, it, &st, tmp, name);
        }
        if (rc)
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        else {
                XXH128_canonical_t canon;
                XXH128_canonicalFromHash(&canon, XXH3_128bits(target, len));
                memcpy(it->hash, canon.digest, 16);
                it->st = st;
        }
        free(target);
        return rc;
}

/* Links the leader's copy ("dir/name" under DST) to tmp; the leader's
 * directory is opened on its own, so paths beyond PATH_MAX work too. */
static int link_leader(struct ferry_copier *c, const char *leader,
                       const char *tmp)
{
        const char *slash = strrchr(leader, '/');
        if (!slash)
                return ferry_fsio_linkat(c->cfg.dstfd, leader, c->dst_dir, tmp);
        char *dir = strndup(leader, (size_t)(slash - leader));
        if (!dir)
                return ENOMEM;
        int dfd = -1, rc = ferry_fsio_open_dir(c->cfg.dstfd, dir, &dfd);
        free(dir);
        if (!rc)
                rc = ferry_fsio_linkat(dfd, slash + 1, c->dst_dir, tmp);
        ferry_fsio_close(&dfd);
        return rc;
}

/* A hardlink follower: link to the leader's copy. ENOENT: copy instead. */
static int link_once(struct ferry_copier *c, const struct ferry_batch *b,
                     const char *name, struct ferry_item *it,
                     const struct step **step)
{
        char tmp[NAME_MAX + 1];
        struct ferry_stat st;
        *step = &S_STAT_SRC;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (rc)
                return rc;
        ferry_copy_temp_name(name, it->id, tmp);
        *step = &S_LINK;
        rc = link_leader(c, ferry_batch_at(b, it->link_off), tmp);
        if (rc == EEXIST) {
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
                rc = link_leader(c, ferry_batch_at(b, it->link_off), tmp);
        }
        if (rc)
                return rc;
        *step = &S_RENAME;
        rc = install(c, it, &st, tmp, name);
        /* rename() does nothing when name already is a link to the same
         * inode (a re-run after a crash): the temp name must still go */
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        it->st = st;
        return rc;
}

void ferry_copy_backoff(unsigned attempt)
{
        long ms = 50L << (attempt < 6 ? attempt : 6);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int copy_attempt(struct ferry_copier *c, const struct ferry_batch *b,
                        const char *name, struct ferry_item *it, bool *changed,
                        const struct step **step)
{
        if (it->type == FT_LINK)
                return copy_symlink_once(c, name, it, changed, step);
        *changed = false;
        if (it->link_off) {
                int rc = link_once(c, b, name, it, step);
                if (rc != ENOENT && rc != EXDEV && rc != EMLINK &&
                    rc != ENAMETOOLONG)
                        return rc;
                it->link_off = 0; /* leader's copy unusable: copy data */
        }
        return copy_once(c, name, it, changed, step);
}

/* Whether a failed enter_dir is worth another try: a transient error (an
 * EIO from mkdir on a flaky share) or ENOENT on DST (someone removes what
 * ferry made there, perhaps DST's root: rm -rf), unless DST's root no
 * longer answers. */
static bool retry_dir(struct ferry_copier *c)
{
        if (ferry_copy_transient(c->src_err))
                return true;
        if (!ferry_copy_transient(c->dst_err) && c->dst_err != ENOENT)
                return false;
        return !(ferry_copy_dst_suspect(c->dst_err) &&
                 ferry_copy_dst_failed(c->cfg.dstfd));
}

/* Enters the item's directories, retrying transient errors like those of
 * the copy itself. */
static void enter_dir_retrying(struct ferry_copier *c, struct ferry_batch *b,
                               struct ferry_item *it)
{
        enter_dir(c, b, it);
        for (unsigned attempt = 0; attempt < c->cfg.retries &&
                                   !atomic_load(c->cfg.stop) && retry_dir(c);
             attempt++) {
                leave_dir(c);
                ferry_copy_backoff(attempt);
                enter_dir(c, b, it);
        }
}

/* Fails it with the reason in c->why, which goes into b's arena (so
 * pointers into the arena are stale afterwards). */
static void fail_why(struct ferry_copier *c, struct ferry_batch *b,
                     struct ferry_item *it)
{
        it->result = R_FAILED;
        it->err = 0;
        if (ferry_batch_str(b, c->why, strlen(c->why), &it->why_off))
                it->what = "name not allowed or taken on the destination";
}

/* What the copy left in DST, for the manifest (rule 9): the source's size
 * and mtime, or with --no-times the mtime DST gave it. */
static void record_dst(struct ferry_copier *c, struct ferry_item *it,
                       const char *name)
{
        struct ferry_stat d;
        it->dst.type = it->type;
        it->dst.size = it->st.size;
        it->dst.mtime = it->st.mtime;
        if (!c->cfg.times) {
                if (ferry_fsio_statat(c->dst_dir, name, &d))
                        it->dst.type = 0; /* unknown: not claimed */
                else
                        it->dst.mtime = d.mtime;
        }
}

static void copy_item(struct ferry_copier *c, struct ferry_batch *b,
                      struct ferry_item *it)
{
        c->why[0] = '\0';
        /* a name DST cannot hold fails before anything is read */
        if (ferry_names_refused(c->cfg.names, ferry_batch_at(b, it->name_off),
                                c->why, sizeof(c->why))) {
                fail_why(c, b, it);
                return;
        }
        enter_dir_retrying(c, b, it);
        if (ferry_fsio_out_of_fds(c->src_err)) {
                set_result(it, c->src_err, &S_OPEN_SRC_DIR);
                return;
        }
        /* the run stops (a signal, a full or failed DST): an error that
         * would have been retried fails nobody; the row stays pending */
        if ((c->src_err || c->dst_err) && atomic_load(c->cfg.stop) &&
            retry_dir(c)) {
                it->result = R_NONE;
                return;
        }
        if (c->src_err) {
                it->result = c->src_err == ENOENT ? R_VANISHED : R_FAILED;
                it->err = c->src_err;
                it->what = S_OPEN_SRC_DIR.what;
                return;
        }
        if (c->dst_err == ENOTDIR) { /* a file where SRC has a directory */
                it->result = R_IN_WAY;
                it->err = ENOTDIR;
                return;
        }
        if (c->dst_err) {
                if (c->dir_why[0]) { /* a refused or colliding directory */
                        memcpy(c->why, c->dir_why, sizeof(c->why));
                        fail_why(c, b, it);
                } else if (!dst_gone(c, it, c->dst_err, &S_MAKE_DIR))
                        set_result(it, c->dst_err, &S_MAKE_DIR);
                return;
        }
        const char *name = ferry_batch_at(b, it->name_off);
        for (unsigned attempt = 0;; attempt++) {
                bool changed = false;
                const struct step *step = &S_COPY;
                int rc = copy_attempt(c, b, name, it, &changed, &step);
                if (!rc && !changed) {
                        it->result = R_DONE;
                        record_dst(c, it, name);
                        return;
                }
                if (rc == EISDIR) { /* a directory where SRC has a file */
                        it->result = R_IN_WAY;
                        it->err = EISDIR;
                        return;
                }
                if (rc == ENOTUNIQ) { /* another spelling's entry? */
                        it->result = R_IN_WAY;
                        it->err = EEXIST;
                        return;
                }
                if (c->why[0]) { /* a clash by case: never retried */
                        fail_why(c, b, it);
                        return;
                }
                if (rc == ECANCELED) {
                        it->result = R_NONE;
                        return;
                }
                if (rc && dst_gone(c, it, rc, step))
                        return;
                /* ENOENT on DST: someone removes what ferry made, perhaps
                 * DST's root (rm -rf), which the next probe tells */
                bool again = changed || ferry_copy_transient(rc) ||
                             (rc == ENOENT && step->side == SIDE_DST);
                if (again && atomic_load(c->cfg.stop)) {
                        it->result = R_NONE; /* as for enter_dir above */
                        return;
                }
                if (again && attempt < c->cfg.retries) {
                        ferry_copy_backoff(attempt);
                        continue;
                }
                if (rc == ENOENT && step->side == SIDE_SRC) {
                        it->result = R_VANISHED;
                        return;
                }
                if (changed) {
                        it->result = R_CHANGED;
                        it->what = "source changed while copied";
                        it->err = 0;
                        return;
                }
                set_result(it, rc, step);
                return;
        }
}

/* No descriptor for it (R_NOFDS): let go of the cached directories, which
 * another worker may need to finish its file, wait, and start the item
 * over, its attempts not counted; false when the wait ran out (the run
 * stops) or a stop was asked (then the item is not attempted). */
static bool wait_for_fds(struct ferry_copier *c, struct ferry_item *it,
                         int64_t *since)
{
        if (it->result != R_NOFDS)
                return false;
        leave_dir(c);
        if (!atomic_load(c->cfg.stop) && ferry_fsio_fd_wait(since, it->err))
                return true;
        if (atomic_load(c->cfg.stop))
                it->result = R_NONE;
        return false;
}

void ferry_copier_copy(struct ferry_copier *c, struct ferry_batch *b,
                       struct ferry_item *it)
{
        int64_t since = 0;
        do
                copy_item(c, b, it);
        while (wait_for_fds(c, it, &since));
}

void ferry_copier_rest(struct ferry_copier *c)
{
        leave_dir(c);
}

/* Hashes one side of a verify: the file, or a symlink's target. */
static int hash_side(struct ferry_copier *c, int dirfd, const char *name,
                     enum ferry_ftype type, uint8_t out[16], uint64_t *size)
{
        if (type == FT_LINK) {
                char *target;
                size_t len;
                int rc = ferry_fsio_readlinkat(dirfd, name, &target, &len);
                if (rc)
                        return rc;
                XXH128_canonical_t canon;
                XXH128_canonicalFromHash(&canon, XXH3_128bits(target, len));
                memcpy(out, canon.digest, 16);
                *size = len;
                free(target);
                return 0;
        }
        int fd = -1;
        int rc = ferry_fsio_openat(dirfd, name,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0, &fd);
        if (rc)
                return rc;
        XXH3_128bits_reset(c->xxh);
        const struct step *step;
        *size = 0;
#ifdef HAVE_POSIX_FADVISE
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        rc = stream(c, fd, -1, size, &step);
        ferry_fsio_close(&fd);
        if (!rc)
                hash_final(c->xxh, out);
        return rc;
}

static void verify_side(struct ferry_copier *c, int dirfd, int dir_err,
                        const char *name, struct ferry_item *it,
                        const struct step *side)
{
        uint8_t got[16];
        uint64_t size = 0;
        int rc = dir_err ? dir_err
                         : hash_side(c, dirfd, name, it->type, got, &size);
        if (rc == ENOENT || rc == ENOTDIR || rc == ELOOP) {
                it->result = R_MISSING;
                it->what = side->what;
                return;
        }
        if (rc) {
                if (!dst_gone(c, it, rc, side))
                        set_result(it, rc, side);
                return;
        }
        bool size_ok = it->type == FT_LINK || size == it->st.size;
        if (!size_ok || memcmp(got, it->hash, 16) != 0) {
                it->result = R_MISMATCH;
                it->what = side->what;
        }
}

static void verify_item(struct ferry_copier *c, struct ferry_batch *b,
                        struct ferry_item *it)
{
        enter_dir(c, b, it);
        const char *name = ferry_batch_at(b, it->name_off);
        it->result = R_DONE;
        if (b->work & WORK_VERIFY_DST)
                verify_side(c, c->dst_dir, c->dst_err, name, it, &S_VERIFY_DST);
        if (it->result == R_DONE && (b->work & WORK_VERIFY_SRC))
                verify_side(c, c->src_dir, c->src_err, name, it, &S_VERIFY_SRC);
}

void ferry_copier_verify(struct ferry_copier *c, struct ferry_batch *b,
                         struct ferry_item *it)
{
        int64_t since = 0;
        do
                verify_item(c, b, it);
        while (wait_for_fds(c, it, &since));
}
