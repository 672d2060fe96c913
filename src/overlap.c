/*
 * overlap.c - where SRC, DST and ferry's own files meet
 * (overlap.h).
 *
 * ferry_overlap_trees looks twice before a run writes anything:
 *  1. identity: from each tree's root up through ".." to "/", is the other
 *     root's dev:ino on the way? That sees every spelling of a path
 *     (symlinks, "..", a second path to the same mount).
 *  2. mounts: a bind mount shows a directory somewhere else, and ".." of
 *     a mount's root leads to the mount point's parent, not to where the
 *     directory lies in its file system. /proc/self/mountinfo tells, per
 *     mount, its file system (major:minor) and which directory of it is
 *     the mount's root, so each tree gets its place in its file system:
 *     DST's place below SRC's is DST inside SRC, whatever the mounts. And
 *     a mount below SRC's path that shows DST's place (or one above it)
 *     puts DST inside SRC as well; the same both ways.
 * The scanner checks once more as it walks (ferry_own_is_dst), for what
 * neither sees (a mount made after the start, no /proc).
 *
 * The setup calls here are plain system calls, not fsio's: they run once
 * per job and must not move the fault counts of the copy path.
 */
#define _GNU_SOURCE
#include "overlap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- identity: the ".." chains ------------------------------------------ */

enum { MAX_DEPTH = 4096 };

/* Whether the directory target (dev:ino) is fd's directory or above it. */
static bool on_chain(int fd, dev_t dev, ino_t ino)
{
        int cur = dup(fd);
        bool hit = false;
        for (int depth = 0; cur >= 0 && !hit && depth < MAX_DEPTH; depth++) {
                struct stat here, up;
                if (fstat(cur, &here))
                        break;
                hit = here.st_dev == dev && here.st_ino == ino;
                int parent =
                        openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (parent < 0 || fstat(parent, &up) ||
                    (up.st_dev == here.st_dev && up.st_ino == here.st_ino)) {
                        if (parent >= 0)
                                close(parent);
                        break; /* "/" is its own parent */
                }
                close(cur);
                cur = parent;
        }
        if (cur >= 0)
                close(cur);
        return hit;
}

/* ---- mounts ---------------------------------------------------------- */

struct mount {
        int id;
        char dev[32]; /* "major:minor" of its file system */
        char *root;   /* the directory of the file system it shows */
        char *point;  /* where it is mounted */
};

struct mounts {
        struct mount *v;
        size_t n, cap;
};

static void mounts_release(struct mounts *ms)
{
        for (size_t i = 0; i < ms->n; i++) {
                free(ms->v[i].root);
                free(ms->v[i].point);
        }
        free(ms->v);
        memset(ms, 0, sizeof(*ms));
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s)
{
        char *out = malloc(strlen(s) + 1), *o = out;
        if (!out)
                return NULL;
        while (*s) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
                    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
                        *o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
                                      (s[3] - '0'));
                        s += 4;
                } else {
                        *o++ = *s++;
                }
        }
        *o = '\0';
        return out;
}

/* One line: "id parent major:minor root point options ...". */
static int parse_mount(char *line, struct mount *m)
{
        char *save = NULL, *f[5];
        for (int i = 0; i < 5; i++)
                if (!(f[i] = strtok_r(i ? NULL : line, " \n", &save)))
                        return EINVAL;
        m->id = atoi(f[0]);
        snprintf(m->dev, sizeof(m->dev), "%s", f[2]);
        m->root = unescape(f[3]);
        m->point = unescape(f[4]);
        if (m->root && m->point)
                return 0;
        free(m->root);
        free(m->point);
        return ENOMEM;
}

static int read_mounts(struct mounts *ms)
{
        memset(ms, 0, sizeof(*ms));
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return errno;
        char *line = NULL;
        size_t len = 0;
        int rc = 0;
        while (!rc && getline(&line, &len, f) > 0) {
                if (ms->n == ms->cap) {
                        size_t cap = ms->cap ? ms->cap * 2 : 64;
                        struct mount *v = realloc(ms->v, cap * sizeof(*v));
                        if (!v) {
                                rc = ENOMEM;
                                break;
                        }
                        ms->v = v;
                        ms->cap = cap;
                }
                if (parse_mount(line, &ms->v[ms->n]) == 0)
                        ms->n++;
        }
        free(line);
        fclose(f);
        if (rc)
                mounts_release(ms);
        return rc;
}

/* The mount fd lies on, from /proc/self/fdinfo. */
static const struct mount *mount_of(const struct mounts *ms, int fd)
{
        char path[64], *line = NULL;
        size_t len = 0;
        int id = -1;
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        while (id < 0 && getline(&line, &len, f) > 0)
                if (!strncmp(line, "mnt_id:", 7))
                        id = atoi(line + 7);
        free(line);
        fclose(f);
        for (size_t i = 0; i < ms->n; i++)
                if (ms->v[i].id == id)
                        return &ms->v[i];
        return NULL;
}

/* Whether path is dir or below it (both absolute). */
static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (!strcmp(dir, "/"))
                return true;
        return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* Where the real path real, on mount m, lies in m's file system; NULL when
 * it is not below m's mount point (then nothing is known). Caller frees. */
static char *fs_place(const struct mount *m, const char *real)
{
        if (!under(real, m->point))
                return NULL;
        const char *rest =
                strcmp(m->point, "/") ? real + strlen(m->point) : real;
        if (!strcmp(rest, "/"))
                rest = "";
        const char *root = strcmp(m->root, "/") ? m->root : "";
        char *out = NULL;
        if (asprintf(&out, "%s%s", root, rest) < 0)
                return NULL;
        if (!*out) {
                free(out);
                out = strdup("/");
        }
        return out;
}

/* Whether the directory at place (of file system dev) shows through a
 * mount strictly below the real path top. */
static bool mounted_below(const struct mounts *ms, const char *top,
                          const char *dev, const char *place)
{
        for (size_t i = 0; i < ms->n; i++) {
                const struct mount *m = &ms->v[i];
                if (strcmp(m->point, top) && under(m->point, top) &&
                    !strcmp(m->dev, dev) && under(place, m->root))
                        return true;
        }
        return false;
}

struct tree {
        const char *real;
        int fd;
        const struct mount *m;
        char *place;
};

static enum ferry_overlap by_mounts(struct tree *s, struct tree *d,
                                    bool dst_exists)
{
        struct mounts ms;
        enum ferry_overlap how = OVERLAP_NONE;
        if (read_mounts(&ms))
                return how;
        s->m = mount_of(&ms, s->fd);
        d->m = mount_of(&ms, d->fd);
        s->place = s->m ? fs_place(s->m, s->real) : NULL;
        d->place = d->m ? fs_place(d->m, d->real) : NULL;
        if (s->place && d->place) {
                bool same_fs = !strcmp(s->m->dev, d->m->dev);
                if (same_fs && !strcmp(s->place, d->place))
                        how = dst_exists ? OVERLAP_SAME : OVERLAP_DST_IN_SRC;
                else if (same_fs && under(d->place, s->place))
                        how = OVERLAP_DST_IN_SRC;
                else if (same_fs && dst_exists && under(s->place, d->place))
                        how = OVERLAP_SRC_IN_DST;
                else if (mounted_below(&ms, s->real, d->m->dev, d->place))
                        how = OVERLAP_DST_IN_SRC;
                else if (dst_exists &&
                         mounted_below(&ms, d->real, s->m->dev, s->place))
                        how = OVERLAP_SRC_IN_DST;
        }
        free(s->place);
        free(d->place);
        mounts_release(&ms);
        return how;
}

enum ferry_overlap ferry_overlap_trees(const char *src, const char *dst,
                                       bool dst_exists)
{
        struct tree s = {.real = src, .fd = -1}, d = {.real = dst, .fd = -1};
        enum ferry_overlap how = OVERLAP_NONE;
        struct stat ss, ds;
        s.fd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
        d.fd = open(dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (s.fd < 0 || d.fd < 0 || fstat(s.fd, &ss) || fstat(d.fd, &ds))
                goto out;
        if (ss.st_dev == ds.st_dev && ss.st_ino == ds.st_ino)
                how = dst_exists ? OVERLAP_SAME : OVERLAP_DST_IN_SRC;
        else if (on_chain(d.fd, ss.st_dev, ss.st_ino))
                how = OVERLAP_DST_IN_SRC;
        else if (dst_exists && on_chain(s.fd, ds.st_dev, ds.st_ino))
                how = OVERLAP_SRC_IN_DST;
        else
                how = by_mounts(&s, &d, dst_exists);
out:
        if (s.fd >= 0)
                close(s.fd);
        if (d.fd >= 0)
                close(d.fd);
        return how;
}

/* ---- ferry's own files -------------------------------------------------- */

static const char *const companions[] = {"",         "-wal",  "-shm",
                                         "-journal", ".lock", ".control"};
enum { N_OWN = sizeof(companions) / sizeof(companions[0]) };

struct ferry_own {
        bool has_dst, has_dir;
        uint64_t dst_dev, dst_ino;
        uint64_t dir_dev, dir_ino; /* the manifest's directory */
        size_t n_files;
        uint64_t file_dev[N_OWN], file_ino[N_OWN];
        char *names[N_OWN]; /* base name + companion */
};

void ferry_own_free(struct ferry_own *own)
{
        if (!own)
                return;
        for (int i = 0; i < N_OWN; i++)
                free(own->names[i]);
        free(own);
}

int ferry_own_new(const char *manifest, int dstfd, struct ferry_own **out)
{
        *out = NULL;
        struct ferry_own *own = calloc(1, sizeof(*own));
        if (!own)
                return ENOMEM;
        struct stat st;
        if (dstfd >= 0 && !fstat(dstfd, &st)) {
                own->has_dst = true;
                own->dst_dev = (uint64_t)st.st_dev;
                own->dst_ino = (uint64_t)st.st_ino;
        }
        const char *slash = strrchr(manifest, '/');
        const char *base = slash ? slash + 1 : manifest;
        char *dir = slash ? strndup(manifest, (size_t)(slash - manifest) +
                                                      (slash == manifest))
                          : strdup(".");
        if (!dir) {
                ferry_own_free(own);
                return ENOMEM;
        }
        if (!stat(dir, &st)) {
                own->has_dir = true;
                own->dir_dev = (uint64_t)st.st_dev;
                own->dir_ino = (uint64_t)st.st_ino;
        }
        free(dir);
        for (int i = 0; i < N_OWN; i++) {
                char *path = NULL;
                if (asprintf(&own->names[i], "%s%s", base, companions[i]) < 0 ||
                    asprintf(&path, "%s%s", manifest, companions[i]) < 0) {
                        own->names[i] = NULL;
                        ferry_own_free(own);
                        return ENOMEM;
                }
                if (!stat(path, &st) && S_ISREG(st.st_mode)) {
                        own->file_dev[own->n_files] = (uint64_t)st.st_dev;
                        own->file_ino[own->n_files++] = (uint64_t)st.st_ino;
                }
                free(path);
        }
        *out = own;
        return 0;
}

bool ferry_own_is_dst(const struct ferry_own *own, const struct ferry_stat *d)
{
        return own && own->has_dst && d->dev == own->dst_dev &&
               d->ino == own->dst_ino;
}

bool ferry_own_is_file(const struct ferry_own *own,
                       const struct ferry_stat *dir, const char *name,
                       const struct ferry_stat *st)
{
        if (!own || S_ISDIR(st->mode))
                return false;
        for (size_t i = 0; i < own->n_files; i++)
                if (st->dev == own->file_dev[i] && st->ino == own->file_ino[i])
                        return true;
        if (!dir || !own->has_dir || dir->dev != own->dir_dev ||
            dir->ino != own->dir_ino)
                return false;
        for (int i = 0; i < N_OWN; i++)
                if (!strcmp(name, own->names[i]))
                        return true;
        return false;
}
