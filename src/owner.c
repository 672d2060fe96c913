/*
 * owner.c - what in DST is ferry's (owner.h).
 *
 * Owns the walk that tells whether a DST directory in the way of a file is
 * ferry's whole, and the removal of what is in the way when it is. Reads
 * the manifest (the caller's transaction) and DST; writes only DST.
 */
#define _GNU_SOURCE
#include "config.h"
#include "owner.h"

#include "buf.h"
#include "copy.h"
#include "fsio.h"
#include "names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char temp_suffix[] = ".ferry-part";

/* ferry's own temp names: ".name.<id>.ferry-part" (copy.c) */
static bool is_temp(const char *name)
{
        size_t n = strlen(name), k = sizeof(temp_suffix) - 1;
        return name[0] == '.' && n > k && !strcmp(name + n - k, temp_suffix);
}

/* Whether the manifest has SRC directory path (ferry made it in DST). */
static int dir_known(struct ferry_manifest *m, const char *path, bool *known)
{
        return ferry_manifest_dir_known(m, path, known) ? EIO : 0;
}

/* What ferry last put in DST at dir/name (rec->type 0: nothing). */
static int dst_at(struct ferry_manifest *m, const char *dir, const char *name,
                  struct ferry_dst_rec *rec)
{
        return ferry_manifest_dst_at(m, dir, name, rec) ? EIO : 0;
}

/*
 * Whether DST directory fd, SRC's path, is ferry's whole (owner.h). When it
 * is not, *foreign (caller frees) gets the first entry found that is not.
 */
static int tree_is_ours(struct ferry_manifest *m, int fd, const char *path,
                        bool *ours, char **foreign)
{
        bool known;
        int rc = dir_known(m, path, &known);
        *ours = false;
        if (rc)
                return rc;
        if (!known) {
                *foreign = strdup(path);
                return *foreign ? 0 : ENOMEM;
        }
        int dfd = dup(fd);
        DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
        if (!d) {
                rc = errno;
                if (dfd >= 0)
                        close(dfd);
                return rc;
        }
        *ours = true;
        struct dirent *e;
        while (*ours && !rc && (errno = 0, e = readdir(d))) {
                const char *n = e->d_name;
                if (!strcmp(n, ".") || !strcmp(n, "..") || is_temp(n))
                        continue;
                struct ferry_stat st;
                if ((rc = ferry_fsio_statat(fd, n, &st))) {
                        rc = rc == ENOENT ? 0 : rc;
                        continue;
                }
                char *sub = ferry_buf_join(path, n);
                if (!sub) {
                        rc = ENOMEM;
                        break;
                }
                if (S_ISDIR(st.mode)) {
                        int sfd = -1;
                        rc = ferry_fsio_open_dir(fd, n, &sfd);
                        if (!rc)
                                rc = tree_is_ours(m, sfd, sub, ours, foreign);
                        ferry_fsio_close(&sfd);
                        free(sub);
                        continue;
                }
                struct ferry_dst_rec rec;
                rc = dst_at(m, path, n, &rec);
                if (!rc && !ferry_copy_matches(&rec, &st)) {
                        *ours = false;
                        *foreign = sub;
                        sub = NULL;
                }
                free(sub);
        }
        if (!rc && errno && *ours)
                rc = errno; /* readdir failed */
        closedir(d);
        return rc;
}

/* why = prefix, path quoted, rest */
static void quoted(char *why, size_t size, const char *prefix, const char *path,
                   const char *rest)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        ferry_buf_adds(&b, prefix);
        ferry_buf_add_quoted(&b, path, strlen(path), FERRY_ESC_QUOTE);
        ferry_buf_adds(&b, rest);
        ferry_buf_move_to(&b, why, size);
}

/* The refusal of entry st at path: "not replaced: the destination has a
 * KIND 'PATH'" and rest, in why. Returns EEXIST. */
static int refused(char *why, size_t size, const struct ferry_stat *st,
                   const char *path, const char *rest)
{
        char prefix[128];
        snprintf(prefix, sizeof(prefix),
                 "not replaced: the destination has a %s ",
                 ferry_copy_kind(st));
        quoted(why, size, prefix, path, rest);
        return EEXIST;
}

/* A directory at dir/name where SRC has a file. */
static int dir_in_way(struct ferry_manifest *m, int dstfd, const char *dir,
                      const char *name, bool remove, char **what, char *why,
                      size_t size)
{
        int pfd = -1, fd = -1, rc = ferry_fsio_open_dir(dstfd, dir, &pfd);
        struct ferry_stat st = {0};
        char *full = ferry_buf_join(dir, name), *foreign = NULL;
        bool ours = false;
        if (!full)
                rc = ENOMEM;
        if (!rc && (rc = ferry_fsio_statat(pfd, name, &st)))
                rc = rc == ENOENT ? 0 : rc; /* gone meanwhile: way clear */
        else if (!rc && S_ISDIR(st.mode) &&
                 !(rc = ferry_fsio_open_dir(pfd, name, &fd)))
                rc = tree_is_ours(m, fd, full, &ours, &foreign);
        ferry_fsio_close(&fd);
        if (!rc && S_ISDIR(st.mode) && !ours) {
                if (foreign && !strcmp(foreign, full))
                        snprintf(why, size,
                                 "not replaced: the destination has a "
                                 "directory here that ferry did not create");
                else
                        quoted(why, size,
                               "not replaced: the destination has a "
                               "directory here that holds ",
                               foreign ? foreign : "",
                               ", which ferry did not write");
                rc = EEXIST;
        } else if (!rc && S_ISDIR(st.mode)) {
                if (remove && (rc = ferry_fsio_remove_tree(pfd, name)))
                        snprintf(why, size,
                                 "cannot remove the directory in "
                                 "the way: %s",
                                 strerror(rc));
                if (!rc) {
                        *what = full;
                        full = NULL;
                }
        } else if (rc && rc != EEXIST) {
                snprintf(why, size,
                         "cannot look at the directory in the way: %s",
                         strerror(rc));
        }
        ferry_fsio_close(&pfd);
        free(full);
        free(foreign);
        return rc;
}

/* A non-directory at a component of dir where SRC has a directory. */
static int file_in_way(struct ferry_manifest *m, int dstfd, const char *dir,
                       bool remove, char **what, char *why, size_t size)
{
        char *path = strdup(dir);
        if (!path)
                return ENOMEM;
        int cur = -1, rc = ferry_fsio_open_dir(dstfd, "", &cur);
        char *c = path;
        while (!rc && *c) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                struct ferry_stat st;
                if ((rc = ferry_fsio_statat(cur, c, &st))) {
                        rc = rc == ENOENT ? 0 : rc; /* nothing in the way */
                        break;
                }
                if (S_ISDIR(st.mode)) {
                        int next = -1;
                        rc = ferry_fsio_open_dir(cur, c, &next);
                        ferry_fsio_close(&cur);
                        cur = next;
                        if (!slash)
                                break;
                        *slash = '/';
                        c = slash + 1;
                        continue;
                }
                /* path is now the entry in the way, its parent before c */
                struct ferry_dst_rec rec = {0};
                if (c > path)
                        c[-1] = '\0';
                rc = dst_at(m, c > path ? path : "", c, &rec);
                if (c > path)
                        c[-1] = '/';
                if (!rc && !ferry_copy_matches(&rec, &st))
                        rc = refused(why, size, &st, path,
                                     " where the source has a directory, "
                                     "which ferry did not write");
                else if (!rc && remove &&
                         (rc = ferry_fsio_unlinkat(cur, c, 0))) {
                        snprintf(why, size,
                                 "cannot remove the %s in the way: %s",
                                 ferry_copy_kind(&st), strerror(rc));
                } else if (!rc) {
                        *what = path;
                        path = NULL;
                }
                break;
        }
        if (rc && rc != EEXIST && !why[0])
                snprintf(why, size, "cannot look at the destination: %s",
                         strerror(rc));
        ferry_fsio_close(&cur);
        free(path);
        return rc;
}

/* How a case-insensitive DST spells dir/name: each component as stored
 * (caller frees). *fd gets the directory, open. */
static int stored_path(const struct ferry_names *names, int dstfd,
                       const char *dir, const char *name, char **out, int *fd)
{
        struct ferry_buf real = FERRY_BUF_INIT;
        char *path = strdup(dir);
        char other[NAME_MAX + 1];
        int cur = -1, rc = path ? ferry_fsio_open_dir(dstfd, "", &cur) : ENOMEM;
        for (char *c = path; !rc && c && *c;) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                int next = -1;
                if (!(rc = ferry_names_other_spelling(names, cur, c, other,
                                                      sizeof(other))) &&
                    !(rc = ferry_fsio_open_dir(cur, c, &next)))
                        ferry_buf_add_path(&real, other[0] ? other : c);
                ferry_fsio_close(&cur);
                cur = next;
                c = slash ? slash + 1 : NULL;
        }
        if (!rc && !(rc = ferry_names_other_spelling(names, cur, name, other,
                                                     sizeof(other))))
                ferry_buf_add_path(&real, other[0] ? other : name);
        free(path);
        if (!rc && !(*out = ferry_buf_detach(&real, NULL)))
                rc = ENOMEM;
        if (rc) {
                ferry_fsio_close(&cur);
                ferry_buf_release(&real);
                return rc;
        }
        *fd = cur;
        return 0;
}

/* On a case-insensitive DST, the entry at dir/name where SRC has a file may
 * be the copy of another spelling's row (a file or directory renamed by
 * case in SRC): ferry's when it matches that row's record, which *claim
 * gets (the item then replaces it as its own). */
static int other_in_way(struct ferry_manifest *m, int dstfd,
                        const struct ferry_names *names, const char *dir,
                        const char *name, struct ferry_dst_rec *claim,
                        char *why, size_t size)
{
        char *real = NULL;
        struct ferry_dst_rec rec = {0};
        struct ferry_stat st;
        int fd = -1, rc = stored_path(names, dstfd, dir, name, &real, &fd);
        if (!rc && (rc = ferry_fsio_statat(fd, name, &st)) == ENOENT) {
                rc = 0; /* gone meanwhile: the way is clear */
                goto out;
        }
        char *slash = rc ? NULL : strrchr(real, '/');
        const char *base = slash ? slash + 1 : real;
        if (slash)
                *slash = '\0';
        if (!rc)
                rc = dst_at(m, slash ? real : "", base, &rec);
        if (slash)
                *slash = '/';
        if (!rc && ferry_copy_matches(&rec, &st))
                *claim = rec;
        else if (!rc)
                rc = refused(why, size, &st, real,
                             " here, which ferry did not write (or which was "
                             "changed since ferry copied it)");
out:
        if (rc && rc != EEXIST && !why[0])
                snprintf(why, size, "cannot look at the destination: %s",
                         strerror(rc));
        ferry_fsio_close(&fd);
        free(real);
        return rc;
}

int ferry_owner_clear_way(struct ferry_manifest *m, int dstfd,
                          const struct ferry_names *names, const char *dir,
                          const char *name, int err, bool remove, char **what,
                          struct ferry_dst_rec *claim, char *why, size_t size)
{
        *what = NULL;
        memset(claim, 0, sizeof(*claim));
        why[0] = '\0';
        if (err == EISDIR)
                return dir_in_way(m, dstfd, dir, name, remove, what, why, size);
        if (err == EEXIST)
                return other_in_way(m, dstfd, names, dir, name, claim, why,
                                    size);
        return file_in_way(m, dstfd, dir, remove, what, why, size);
}
