/*
 * shared/scan.c - the shared scan: a host claims directories to list (the
 * dirs queue of the shared manifest) and hands each to its scan threads,
 * which read it whole (readdir, a stat per entry: the round trips of a
 * slow share, several directories in flight at once); the coordinator
 * gets each listing back in its inbox, adds the subdirectories to the
 * queue and the other entries as pending file rows, and completes the
 * directory. Adding is idempotent, so a directory listed twice (its
 * lister's lease ran out) adds nothing new; a directory that cannot be
 * read is completed failed, its error kept. The scan threads touch SRC
 * only: the database and the caller's callbacks are the coordinator's.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "manifest_types.h"
#include "thread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct listing {
        struct ferry_pg_dir *dirs;
        struct ferry_pg_file *files;
        size_t nd, nf, capd, capf;
        char **names; /* what the rows point to, nn of them */
        size_t nn, capn;
};

/* A directory to list, and then its listing (MSG_LISTING in the inbox). */
struct scan_job {
        struct ferry_msg msg;
        int64_t id, token;
        char *path;
        size_t path_len;
        struct listing l;
        int err; /* the directory's errno (ENOMEM: ours), or 0 */
};

static void listing_free(struct listing *l)
{
        for (size_t i = 0; i < l->nn; i++)
                free(l->names[i]);
        free(l->names);
        free(l->dirs);
        free(l->files);
        memset(l, 0, sizeof(*l));
}

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
        if (n < *cap)
                return 0;
        size_t c = *cap ? 2 * *cap : 64;
        void *w = realloc(*v, c * size);
        if (!w)
                return ENOMEM;
        *v = w;
        *cap = c;
        return 0;
}

/* Keeps s (malloc'd) for the rows; ENOMEM frees it. */
static int keep(struct listing *l, char *s)
{
        if (!s || grow((void **)&l->names, &l->capn, l->nn, sizeof(char *))) {
                free(s);
                return ENOMEM;
        }
        l->names[l->nn++] = s;
        return 0;
}

/* Whether the options copy an entry of this mode. */
static bool wanted(const struct shared *s, uint32_t mode)
{
        if (S_ISREG(mode) || S_ISLNK(mode))
                return true;
        if (S_ISCHR(mode) || S_ISBLK(mode))
                return s->opt->devices && ferry_copy_can_make_devices();
        return s->opt->specials;
}

static int add_entry(struct shared *s, struct listing *l, int64_t dir,
                     const char *path, size_t path_len, const char *name,
                     const struct ferry_stat *st)
{
        if (S_ISDIR(st->mode)) {
                if (s->opt->one_file_system && st->dev != s->src_dev)
                        return 0;
                char *p = NULL;
                if (asprintf(&p, "%.*s%s%s", (int)path_len, path,
                             path_len ? "/" : "", name) < 0)
                        p = NULL;
                if (keep(l, p) ||
                    grow((void **)&l->dirs, &l->capd, l->nd, sizeof(*l->dirs)))
                        return ENOMEM;
                l->dirs[l->nd++] = (struct ferry_pg_dir){
                        .parent = dir,
                        .path = p,
                        .path_len = strlen(p),
                        .has_meta = true,
                        .mode = st->mode,
                        .uid = st->uid,
                        .gid = st->gid,
                        .mtime_ns = shared_ns(st->mtime),
                };
                return 0;
        }
        if (!wanted(s, st->mode))
                return 0;
        char *n = strdup(name);
        if (keep(l, n) ||
            grow((void **)&l->files, &l->capf, l->nf, sizeof(*l->files)))
                return ENOMEM;
        l->files[l->nf++] = (struct ferry_pg_file){
                .dir = dir,
                .name = n,
                .name_len = strlen(n),
                .type = S_ISREG(st->mode)   ? MF_FT_REG
                        : S_ISLNK(st->mode) ? MF_FT_LINK
                                            : MF_FT_SPECIAL,
                .size = st->size,
                .mtime_ns = shared_ns(st->mtime),
                .ctime_ns = shared_ns(st->ctime),
                .mode = st->mode,
                .uid = st->uid,
                .gid = st->gid,
                .dev = st->dev,
                .ino = st->ino,
                .rdev = S_ISCHR(st->mode) || S_ISBLK(st->mode) ? st->rdev : 0,
                .nlink = st->nlink,
                /* files and special files, as cp -a and rsync -H link
                 * them; a mount below SRC numbers its inodes apart: its
                 * names are copied apart */
                .lgroup = s->opt->hard_links && !S_ISLNK(st->mode) &&
                          st->nlink > 1 && st->dev == s->src_dev,
        };
        return 0;
}

/* Reads directory j whole into j->l; an errno (the directory's) or 0. */
static int read_dir(struct shared *s, struct scan_job *j)
{
        struct listing *l = &j->l;
        /* a directory the selection leaves out (one whose listing failed
         * in an older run, tried again): listed as empty, never opened;
         * its rows are kept (select.c) */
        if (j->path_len && shared_select_protects(s, j->path, NULL, true))
                return 0;
        int fd = -1;
        int e = j->path_len ? ferry_fsio_open_dir(s->srcfd, j->path, &fd)
                            : ferry_fsio_openat(s->srcfd, ".",
                                                O_RDONLY | O_DIRECTORY, 0, &fd);
        DIR *d = e ? NULL : fdopendir(fd);
        if (!e && !d) {
                e = errno;
                close(fd);
        }
        struct dirent *de;
        while (!e && (errno = 0, de = readdir(d))) {
                const char *nm = de->d_name;
                if (!strcmp(nm, ".") || !strcmp(nm, ".."))
                        continue;
                /* DST's root holds this job's mark under that name: a
                 * SRC that is another shared job's DST keeps its own */
                if (!j->path_len && !strcmp(nm, SHARED_MARK))
                        continue;
                struct ferry_stat st;
                int se = ferry_fsio_statat(dirfd(d), nm, &st);
                if (se == ENOENT)
                        continue; /* gone since readdir */
                if (se) {
                        e = se;
                        break;
                }
                if (shared_select_out(s, j->path, j->path_len, nm, &st))
                        continue; /* a directory: never opened */
                e = add_entry(s, l, j->id, j->path, j->path_len, nm, &st);
                if (!e && atomic_load(s->stop))
                        e = ECANCELED; /* not to be recorded */
        }
        if (!e && errno) /* readdir's own failure */
                e = errno;
        if (d)
                closedir(d);
        return e;
}

int shared_list_dir(struct shared *s, const char *path, size_t path_len,
                    shared_list_fn fn, void *arg)
{
        struct scan_job j = {.path = (char *)path, .path_len = path_len};
        int e = read_dir(s, &j);
        if (!e)
                e = fn(s, j.l.dirs, j.l.nd, j.l.files, j.l.nf, arg);
        listing_free(&j.l);
        return e;
}

static void *scan_main(void *arg)
{
        struct shared *s = arg;
        ferry_thread_quiet();
        void *msg;
        while (ferry_queue_pop(&s->scanq, &msg, -1) == FERRY_QUEUE_OK) {
                struct scan_job *j = msg;
                j->err = read_dir(s, j);
                /* the inbox has room for every job in flight */
                ferry_queue_push(&s->inbox, j);
        }
        return NULL;
}

static void job_free(struct scan_job *j)
{
        if (!j)
                return;
        listing_free(&j->l);
        free(j->path);
        free(j);
}

int shared_scan_start(struct shared *s)
{
        s->nscan = s->jobs < SHARED_SCANNERS ? s->jobs : SHARED_SCANNERS;
        if (ferry_queue_init(&s->scanq, s->nscan))
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        for (unsigned i = 0; i < s->nscan; i++) {
                int e = ferry_thread_start(&s->scanners[i], scan_main, s);
                if (e) {
                        s->nscan = i;
                        return shared_fail(s, FERRY_EINTERNAL,
                                           "cannot start a scan thread: %s",
                                           strerror(e));
                }
        }
        s->scan_started = true;
        return 0;
}

void shared_scan_end(struct shared *s)
{
        if (!s->scan_started)
                return;
        ferry_queue_close(&s->scanq);
        for (unsigned i = 0; i < s->nscan; i++)
                pthread_join(s->scanners[i], NULL);
        void *msg;
        while (ferry_queue_try_pop(&s->scanq, &msg) == FERRY_QUEUE_OK)
                job_free(msg);
        ferry_queue_release(&s->scanq);
        s->scan_started = false;
}

void shared_scan_drop(void *msg)
{
        job_free(msg);
}

int shared_scan_claim(struct shared *s, bool *none)
{
        struct ferry_pg_claim c;
        size_t room = s->nscan - s->nscans;
        if (shared_claim(s, PG_DIRS, room, &c, none) || *none)
                return s->code;
        for (size_t i = 0; i < c.n; i++) {
                const struct ferry_pg_row *r = &c.rows[i];
                struct scan_job *j = calloc(1, sizeof(*j));
                char *path = j ? strndup(r->path, r->path_len) : NULL;
                if (!path) {
                        free(j);
                        shared_fail(s, FERRY_EINTERNAL, "out of memory");
                        break;
                }
                *j = (struct scan_job){.msg = {.kind = MSG_LISTING},
                                       .id = r->id,
                                       .token = c.token,
                                       .path = path,
                                       .path_len = r->path_len};
                if (ferry_queue_push(&s->scanq, j)) {
                        job_free(j);
                        break;
                }
                s->scan_tokens[s->nscans++] = c.token;
        }
        ferry_pg_claim_release(&c);
        return s->code;
}

int shared_scan_done(struct shared *s, void *msg, bool *added_dirs)
{
        struct scan_job *j = msg;
        *added_dirs = false;
        for (size_t i = 0; i < s->nscans; i++)
                if (s->scan_tokens[i] == j->token) {
                        s->scan_tokens[i] = s->scan_tokens[--s->nscans];
                        break;
                }
        if (j->err == ECANCELED || j->err == ENOMEM) {
                if (j->err == ENOMEM)
                        shared_fail(s, FERRY_EINTERNAL, "out of memory");
                job_free(j);
                return s->code;
        }
        struct ferry_pg_outcome o = {.id = j->id, .result = PG_DONE};
        char why[256];
        int rc = 0;
        if (j->err == ENOENT || j->err == ENOTDIR) {
                /* gone from SRC since its parent's listing (or since a
                 * listing that failed): nothing to copy, no directory to
                 * make in DST; its rows of an older scan are removed */
                snprintf(why, sizeof(why), "gone from SRC: %s",
                         strerror(j->err));
                o.result = PG_VANISHED;
                o.error = why;
                shared_event(s, FERRY_EV_VANISHED, j->path, j->path_len, "", 0,
                             why, NULL);
        } else if (j->err) {
                snprintf(why, sizeof(why), "cannot read directory: %s",
                         strerror(j->err));
                o.result = PG_FAILED;
                o.error = why;
                s->sum->scan_errors++;
                shared_event(s, FERRY_EV_FAILED, j->path, j->path_len, "", 0,
                             why, NULL);
        } else {
                /* subdirectories first: a file row names its directory's */
                int64_t gen = ferry_pg_gen(s->pg);
                uint64_t kept = 0;
                rc = ferry_pg_add_dirs(s->pg, gen, j->l.dirs, j->l.nd, NULL);
                if (!rc)
                        rc = ferry_pg_add_files(s->pg, gen, j->l.files, j->l.nf,
                                                &kept);
                s->sum->files_unchanged += kept;
                s->sum->files_seen += j->l.nf;
                *added_dirs = j->l.nd > 0;
        }
        bool refused = false;
        if (!rc)
                rc = ferry_pg_complete(s->pg, PG_DIRS, j->token, &o, 1,
                                       &refused);
        /* refused: another host took it after this lease ran out, and
         * lists it again; what this one added is the same */
        job_free(j);
        return rc ? shared_pg_fail(s, rc) : 0;
}

int shared_add_root(struct shared *s)
{
        struct ferry_stat st;
        int e = ferry_fsio_fstat(s->srcfd, &st);
        if (e)
                return shared_fail(s, FERRY_EPATH, "cannot stat SRC '%s': %s",
                                   s->opt->src, strerror(e));
        struct ferry_pg_dir root = {
                .parent = 0,
                .path = "",
                .path_len = 0,
                .has_meta = true,
                .mode = st.mode,
                .uid = st.uid,
                .gid = st.gid,
                .mtime_ns = shared_ns(st.mtime),
        };
        int rc = ferry_pg_add_dirs(s->pg, ferry_pg_gen(s->pg), &root, 1, NULL);
        return rc ? shared_pg_fail(s, rc) : 0;
}
