/*
 * shared/fp.c - what makes two hosts' SRC and DST the job's: not their
 * paths (each host mounts them where it likes) but what they hold.
 *
 * SRC's fingerprint is the XXH3-128 of its root directory's entries, sorted
 * by name: each name with its type and, for a regular file, its size (not
 * its times: two clients of one share may see them at other precisions).
 * A source whose top level changes while hosts join is refused until it
 * is still; that is the price of needing nothing written into SRC.
 *
 * DST's is the job's mark: the file SHARED_MARK in DST's root, holding a
 * random 128-bit id, made by the first host (written, fsynced, linked into
 * place without replacing: of two hosts making it at once one wins, and
 * the other reads the winner's). A DST that another job marked carries
 * that mark for every job on it.
 */
#define _GNU_SOURCE
#include "shared/internal.h"

#include "thread.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <xxhash.h>

struct ent {
        char *name;
        char kind;
        bool gone; /* vanished before its stat: not part of it */
        uint64_t size;
};

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct ent *)a)->name,
                      ((const struct ent *)b)->name);
}

static void free_ents(struct ent *e, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(e[i].name);
        free(e);
}

/* Threads that stat the root's entries: on a share each stat is a round
 * trip, and a root of a few hundred entries would hold every host's start
 * for as many (0.13 s for 55 at 2 ms). */
#define FP_STATTERS 16

struct statter {
        int dirfd;
        struct ent *v;
        size_t n;
        atomic_size_t next;
        atomic_int rc; /* the first failure, an errno */
};

static void *stat_some(void *arg)
{
        struct statter *p = arg;
        for (;;) {
                size_t i = atomic_fetch_add(&p->next, 1);
                if (i >= p->n || atomic_load(&p->rc))
                        return NULL;
                struct ferry_stat st;
                int rc = ferry_fsio_statat(p->dirfd, p->v[i].name, &st);
                if (rc == ENOENT) {
                        p->v[i].gone = true;
                        continue;
                }
                if (rc) {
                        int none = 0;
                        atomic_compare_exchange_strong(&p->rc, &none, rc);
                        return NULL;
                }
                p->v[i].kind = S_ISDIR(st.mode)   ? 'd'
                               : S_ISREG(st.mode) ? 'f'
                               : S_ISLNK(st.mode) ? 'l'
                                                  : 's';
                p->v[i].size = S_ISREG(st.mode) ? st.size : 0;
        }
}

/* Stats v[0..n-1] in dirfd, FP_STATTERS at a time; 0 or an errno. */
static int stat_all(int dirfd, struct ent *v, size_t n)
{
        struct statter p = {.dirfd = dirfd, .v = v, .n = n};
        atomic_init(&p.next, 0);
        atomic_init(&p.rc, 0);
        pthread_t t[FP_STATTERS];
        size_t want = n / 4 < FP_STATTERS ? n / 4 : FP_STATTERS, got = 0;
        while (got < want && !ferry_thread_start(&t[got], stat_some, &p))
                got++;
        stat_some(&p); /* this thread too, alone when none started */
        for (size_t i = 0; i < got; i++)
                pthread_join(t[i], NULL);
        return atomic_load(&p.rc);
}

/* The root's entries (names first, one listing; then their stats), or an
 * errno. */
static int read_root(int srcfd, struct ent **out, size_t *nout)
{
        DIR *d;
        int rc = ferry_fsio_opendir(srcfd, &d);
        if (rc)
                return rc;
        struct ent *v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while (!rc && (errno = 0, de = readdir(d))) {
                const char *nm = de->d_name;
                if (!strcmp(nm, ".") || !strcmp(nm, ".."))
                        continue;
                if (n == cap) {
                        cap = cap ? 2 * cap : 64;
                        struct ent *w = realloc(v, cap * sizeof(*v));
                        if (!w) {
                                rc = ENOMEM;
                                break;
                        }
                        v = w;
                }
                v[n] = (struct ent){.name = strdup(nm)};
                if (!v[n].name) {
                        rc = ENOMEM;
                        break;
                }
                n++;
        }
        if (!rc && errno)
                rc = errno;
        if (!rc)
                rc = stat_all(dirfd(d), v, n);
        closedir(d);
        if (rc) {
                free_ents(v, n);
                return rc;
        }
        size_t k = 0; /* those gone meanwhile: not part of it */
        for (size_t i = 0; i < n; i++)
                if (v[i].gone)
                        free(v[i].name);
                else
                        v[k++] = v[i];
        *out = v;
        *nout = k;
        return 0;
}

void shared_names_free(char **names, size_t n)
{
        for (size_t i = 0; names && i < n; i++)
                free(names[i]);
        free(names);
}

int shared_src_fp(struct shared *s, char *out, char ***names, size_t *nnames)
{
        struct ent *v = NULL;
        size_t n = 0;
        int e = read_root(s->srcfd, &v, &n);
        if (e)
                return shared_fail(s, FERRY_EPATH, "cannot read SRC '%s': %s",
                                   s->opt->src, strerror(e));
        qsort(v, n, sizeof(*v), by_name);
        XXH3_state_t *h = XXH3_createState();
        if (!h) {
                free_ents(v, n);
                return shared_fail(s, FERRY_EINTERNAL, "out of memory");
        }
        XXH3_128bits_reset(h);
        for (size_t i = 0; i < n; i++) {
                char tail[32];
                int k = snprintf(tail, sizeof(tail), "%c%llu", v[i].kind,
                                 (unsigned long long)v[i].size);
                XXH3_128bits_update(h, v[i].name, strlen(v[i].name) + 1);
                XXH3_128bits_update(h, tail, (size_t)k + 1);
        }
        XXH128_hash_t x = XXH3_128bits_digest(h);
        XXH3_freeState(h);
        if (names) { /* the names, to the caller */
                *names = malloc((n ? n : 1) * sizeof(char *));
                if (!*names) {
                        free_ents(v, n);
                        return shared_fail(s, FERRY_EINTERNAL, "out of memory");
                }
                for (size_t i = 0; i < n; i++)
                        (*names)[i] = v[i].name;
                *nnames = n;
                free(v);
        } else {
                free_ents(v, n);
        }
        snprintf(out, SHARED_FP_LEN, "src:%016llx%016llx:%zu",
                 (unsigned long long)x.high64, (unsigned long long)x.low64, n);
        return 0;
}

#define MARK_HEAD "ferry shared job "

/* The mark's id into out ("dst:<hex>"), or an errno (ENOENT: none). */
static int read_mark(int dstfd, char *out)
{
        int fd = openat(dstfd, SHARED_MARK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno;
        char buf[128];
        ssize_t got = read(fd, buf, sizeof(buf) - 1);
        int e = got < 0 ? errno : 0;
        close(fd);
        if (e)
                return e;
        /* the head, 32 hex digits, a newline */
        const size_t head = sizeof(MARK_HEAD) - 1, len = head + 33;
        if ((size_t)got != len)
                return EBADMSG;
        buf[len] = '\0';
        if (strncmp(buf, MARK_HEAD, head) || buf[len - 1] != '\n' ||
            strspn(buf + head, "0123456789abcdef") != 32)
                return EBADMSG;
        snprintf(out, SHARED_FP_LEN, "dst:%.32s", buf + head);
        return 0;
}

static int make_mark(int dstfd)
{
        unsigned char r[16];
        if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
                return errno ? errno : EIO;
        char text[64], tmp[64];
        int k = snprintf(text, sizeof(text), MARK_HEAD);
        for (size_t i = 0; i < sizeof(r); i++)
                k += snprintf(text + k, sizeof(text) - (size_t)k, "%02x", r[i]);
        text[k++] = '\n';
        snprintf(tmp, sizeof(tmp), SHARED_MARK ".%ld.tmp", (long)getpid());
        int fd = openat(dstfd, tmp,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0644);
        if (fd < 0)
                return errno;
        int e = ferry_fsio_write(fd, text, (size_t)k);
        if (!e)
                e = ferry_fsio_fsync(fd);
        close(fd);
        if (!e && linkat(dstfd, tmp, dstfd, SHARED_MARK, 0))
                e = errno; /* EEXIST: another host's came first */
        /* a file system without hard links (exFAT, FAT: EPERM): a rename
         * that replaces nothing, as atomic as that file system allows */
        if (e == EPERM || e == ENOTSUP || e == EMLINK)
                e = ferry_fsio_rename_noreplace(dstfd, tmp, SHARED_MARK);
        unlinkat(dstfd, tmp, 0);
        if (!e)
                e = ferry_fsio_fsync(dstfd);
        return e;
}

int shared_dst_fp(struct shared *s, char *out, bool *made)
{
        if (made)
                *made = false;
        int e = read_mark(s->dstfd, out);
        if (e == ENOENT && !made)
                return shared_fail(s, FERRY_EPATH,
                                   "DST '%s' holds no shared job's mark %s: "
                                   "not a copy of a shared job",
                                   s->opt->dst, SHARED_MARK);
        if (e == ENOENT) {
                e = make_mark(s->dstfd);
                *made = !e;
                if (!e || e == EEXIST)
                        e = read_mark(s->dstfd, out);
        }
        if (e == EBADMSG)
                return shared_fail(s, FERRY_EPATH,
                                   "DST '%s' holds a %s that is not a shared "
                                   "job's mark: not touched",
                                   s->opt->dst, SHARED_MARK);
        if (e)
                return shared_fail(s, FERRY_EPATH,
                                   "cannot read or make the job's mark %s in "
                                   "DST '%s': %s",
                                   SHARED_MARK, s->opt->dst, strerror(e));
        return 0;
}
