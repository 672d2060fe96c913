/*
 * names.c - names the destination cannot hold, and names that collide
 * there only by case (names.h).
 *
 * Owns the rules (probed by names_probe.c), the refusals they make, the
 * case-insensitive comparison, and the striped locks that the workers
 * share.
 *
 * Collisions by case (case-insensitive DST only): the rename that installs
 * a file would silently replace a file whose name differs only by case. So
 * before the rename, under a lock that every name folding to the same key
 * shares, the worker looks the name up in DST; when something is there, it
 * reads the directory for the spelling stored there. The exact spelling is
 * this name's own earlier copy (replace it). Another spelling V that the
 * source directory holds as another file is the copy of that file: a
 * clash, this file fails. The source tells, not the manifest, so the check
 * works across listing chunks, batches and runs, and costs nothing unless
 * the name exists in DST already. Folding is by simple upper case of each
 * UTF-8 character (ferry_names_casecmp), as exFAT's up-case table does; a
 * stored spelling that the file system folds otherwise is not found in the
 * directory and counts as a clash with an unnamed file.
 *
 * Directories collide too: SRC's "Docs/a" and "DOCS/a" would land in one
 * DST directory, and a directory "Docs" would find the file "docs" where
 * it should be (a type change, which would remove it). So before a worker
 * (or the end of the run) makes or enters a DST directory, each component
 * of its path is made with mkdirat: when that creates it, the spelling is
 * ours. When it exists, the parent is read for the stored spelling, as for
 * a file: another spelling V that SRC's parent holds as another directory
 * or file is a clash, and nothing is made in, removed from or entered
 * below it; a V that SRC no longer has was renamed by case (a directory is
 * used as it is, anything else is replaced). Components found fine are
 * remembered by the hash of their path in a small lossy table, so that a
 * directory costs at most one read of its parent per run, and none when
 * this run made it.
 */
#define _GNU_SOURCE
#include "names.h"

#include "buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wctype.h>

#define NAME_LOCKS   64
#define DIR_OK_SLOTS 4096

struct ferry_names {
        struct ferry_name_rules rules;
        pthread_mutex_t locks[NAME_LOCKS];
        /* hashes of directory paths found to be stored under their own
         * spelling (or one SRC no longer has): a bounded, lossy cache */
        _Atomic uint64_t dir_ok[DIR_OK_SLOTS];
};

/* ---- the rules ---------------------------------------------------------- */

int ferry_names_new(const struct ferry_name_rules *rules,
                    struct ferry_names **out)
{
        struct ferry_names *n = calloc(1, sizeof(*n));
        if (!n)
                return ENOMEM;
        n->rules = *rules;
        for (int i = 0; i < NAME_LOCKS; i++)
                pthread_mutex_init(&n->locks[i], NULL);
        *out = n;
        return 0;
}

void ferry_names_free(struct ferry_names *n)
{
        if (!n)
                return;
        for (int i = 0; i < NAME_LOCKS; i++)
                pthread_mutex_destroy(&n->locks[i]);
        free(n);
}

bool ferry_names_case_insensitive(const struct ferry_names *n)
{
        return n && n->rules.case_insensitive;
}

/* True when name (len bytes) is refused; why gets "contains ':'" or the like.
 */
static bool why_refused(const struct ferry_name_rules *r, const char *name,
                        size_t len, char *why, size_t size)
{
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)name[i];
                if (!r->refused[ch])
                        continue;
                if (ch < 0x20 || ch == 0x7f)
                        snprintf(why, size,
                                 "contains control character \\x%02x", ch);
                else
                        snprintf(why, size, "contains '%s%c'",
                                 ch == '\\' ? "\\" : "", ch);
                return true;
        }
        if (len && name[len - 1] == '.' && r->no_trailing_dot) {
                snprintf(why, size, "ends with '.'");
                return true;
        }
        if (len && name[len - 1] == ' ' && r->no_trailing_space) {
                snprintf(why, size, "ends with a space");
                return true;
        }
        return false;
}

bool ferry_names_refused(const struct ferry_names *n, const char *name,
                         char *why, size_t size)
{
        char detail[64];
        if (!n ||
            !why_refused(&n->rules, name, strlen(name), detail, sizeof(detail)))
                return false;
        snprintf(why, size,
                 "name not allowed on the destination file system (%s)",
                 detail);
        return true;
}

bool ferry_names_dir_refused(const struct ferry_names *n, const char *dir,
                             char *why, size_t size)
{
        char detail[64];
        while (n && *dir) {
                size_t len = strcspn(dir, "/");
                if (why_refused(&n->rules, dir, len, detail, sizeof(detail))) {
                        struct ferry_buf b = FERRY_BUF_INIT;
                        ferry_buf_adds(&b, "directory ");
                        ferry_buf_add_quoted(&b, dir, len, FERRY_ESC_QUOTE);
                        ferry_buf_addf(&b,
                                       " not allowed on the destination file "
                                       "system (%s)",
                                       detail);
                        ferry_buf_move_to(&b, why, size);
                        return true;
                }
                dir += len;
                dir += *dir == '/';
        }
        return false;
}

/* ---- collisions by case ------------------------------------------------- */

/* The next character of a name: a code point of valid UTF-8 (the
 * shortest form, no surrogate), else the byte itself above Unicode's
 * range, so that invalid bytes fold to nothing but themselves. */
static uint32_t next_char(const unsigned char **p)
{
        const unsigned char *s = *p;
        uint32_t c = s[0];
        int len = c < 0x80                 ? 1
                  : c >= 0xc2 && c <= 0xdf ? 2
                  : c >= 0xe0 && c <= 0xef ? 3
                  : c >= 0xf0 && c <= 0xf4 ? 4
                                           : 0;
        if (len == 1) {
                *p = s + 1;
                return c;
        }
        uint32_t cp = len ? c & (0x7f >> len) : 0;
        for (int i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80) {
                        len = 0;
                        break;
                }
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (len == 0 || (len == 3 && cp < 0x800) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff)) {
                *p = s + 1;
                return 0x110000 + c;
        }
        *p = s + len;
        return cp;
}

static locale_t utf8_locale;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;

static void utf8_init(void)
{
        utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* A character as a case-insensitive file system compares it: its simple
 * upper case within the Basic Multilingual Plane, as the up-case tables of
 * exFAT and NTFS map it; ASCII only where the C library has no UTF-8
 * locale. */
static uint32_t fold_char(uint32_t c)
{
        if (c < 0x80)
                return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
        if (c > 0xffff || !utf8_locale)
                return c; /* up-case tables cover 16-bit characters only */
        uint32_t up = (uint32_t)towupper_l((wint_t)c, utf8_locale);
        /* dotless i and long s: exFAT's table keeps them as they are */
        return up < 0x80 ? c : up;
}

int ferry_names_casecmp(const char *a, const char *b)
{
        pthread_once(&utf8_once, utf8_init);
        const unsigned char *p = (const unsigned char *)a;
        const unsigned char *q = (const unsigned char *)b;
        while (*p && *q) {
                uint32_t x = fold_char(next_char(&p));
                uint32_t y = fold_char(next_char(&q));
                if (x != y)
                        return x < y ? -1 : 1;
        }
        return (*p != 0) - (*q != 0);
}

/* The stripe of (dir_id, name): FNV-1a of the directory and of each
 * character of the name folded as ferry_names_casecmp folds it, so that
 * two names it takes for one share the stripe. */
static pthread_mutex_t *stripe(struct ferry_names *n, int64_t dir_id,
                               const char *name)
{
        uint64_t h = 1469598103934665603ULL;
        for (int i = 0; i < 8; i++)
                h = (h ^ (uint8_t)((uint64_t)dir_id >> (8 * i))) *
                    1099511628211ULL;
        pthread_once(&utf8_once, utf8_init);
        for (const unsigned char *p = (const unsigned char *)name; *p;) {
                uint32_t c = fold_char(next_char(&p));
                for (int i = 0; i < 4; i++)
                        h = (h ^ (uint8_t)(c >> (8 * i))) * 1099511628211ULL;
        }
        return &n->locks[h % NAME_LOCKS];
}

void ferry_names_lock(struct ferry_names *n, int64_t dir_id, const char *name)
{
        if (ferry_names_case_insensitive(n))
                pthread_mutex_lock(stripe(n, dir_id, name));
}

void ferry_names_unlock(struct ferry_names *n, int64_t dir_id, const char *name)
{
        if (ferry_names_case_insensitive(n))
                pthread_mutex_unlock(stripe(n, dir_id, name));
}

enum spelling { SP_NONE, SP_EXACT, SP_OTHER };

/* How dirfd stores name: exactly, as other (another case), or not found. */
static int stored_spelling(int dirfd, const char *name, char *other,
                           size_t size, enum spelling *sp)
{
        int fd = -1;
        int rc = ferry_fsio_openat(dirfd, ".", O_RDONLY | O_DIRECTORY, 0, &fd);
        if (rc)
                return rc;
        DIR *d = fdopendir(fd);
        if (!d) {
                rc = errno;
                ferry_fsio_close(&fd);
                return rc;
        }
        *sp = SP_NONE;
        struct dirent *e;
        errno = 0;
        while ((e = readdir(d))) {
                if (!strcmp(e->d_name, name)) {
                        *sp = SP_EXACT;
                        break;
                }
                if (*sp == SP_NONE && !ferry_names_casecmp(e->d_name, name)) {
                        snprintf(other, size, "%s", e->d_name);
                        *sp = SP_OTHER;
                }
                errno = 0;
        }
        rc = e || !errno ? 0 : errno;
        closedir(d);
        return rc;
}

int ferry_names_other_spelling(const struct ferry_names *n, int dstdir,
                               const char *name, char *other, size_t size)
{
        other[0] = '\0';
        if (!ferry_names_case_insensitive(n))
                return 0;
        enum spelling sp = SP_NONE;
        int rc = stored_spelling(dstdir, name, other, size, &sp);
        if (rc || sp != SP_OTHER)
                other[0] = '\0';
        return rc;
}

int ferry_names_clash(const struct ferry_names *n, int dstdir, int srcdir,
                      const char *name, const struct ferry_stat *src,
                      bool *clash, char *why, size_t size)
{
        *clash = false;
        if (!ferry_names_case_insensitive(n))
                return 0;
        struct ferry_stat st;
        if (ferry_fsio_statat(dstdir, name, &st))
                return 0; /* nothing there; the rename reports other errors */
        char other[NAME_MAX + 1];
        enum spelling sp = SP_NONE;
        int rc = stored_spelling(dstdir, name, other, sizeof(other), &sp);
        if (rc || sp == SP_EXACT)
                return rc;
        if (sp == SP_OTHER) {
                rc = ferry_fsio_statat(srcdir, other, &st);
                if (rc == ENOENT || rc == ENOTDIR)
                        return 0; /* not a source file's copy: replace it */
                if (rc || (st.dev == src->dev && st.ino == src->ino))
                        return rc; /* the source folds case too: same file */
                struct ferry_buf b = FERRY_BUF_INIT;
                ferry_buf_adds(&b, "name collides with ");
                ferry_buf_add_quoted(&b, other, strlen(other), FERRY_ESC_QUOTE);
                ferry_buf_adds(&b, " on the case-insensitive destination (the "
                                   "names differ only by case)");
                ferry_buf_move_to(&b, why, size);
        } else
                snprintf(why, size,
                         "name collides with another name on the "
                         "case-insensitive destination (the names differ "
                         "only by case)");
        *clash = true;
        return 0;
}

/* ---- collisions of directories by case --------------------------------- */

static uint64_t path_hash(const char *s, size_t len)
{
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
        return h | 1; /* never 0, the empty slot */
}

static bool dir_known_ok(struct ferry_names *n, uint64_t h)
{
        return atomic_load_explicit(&n->dir_ok[h % DIR_OK_SLOTS],
                                    memory_order_relaxed) == h;
}

static void dir_remember_ok(struct ferry_names *n, uint64_t h)
{
        atomic_store_explicit(&n->dir_ok[h % DIR_OK_SLOTS], h,
                              memory_order_relaxed);
}

/* Opens the first len bytes of path (a directory, "" for the root) under
 * rootfd. */
static int open_prefix(int rootfd, const char *path, size_t len, int *fd)
{
        char *p = strndup(path, len);
        if (!p)
                return ENOMEM;
        int rc = ferry_fsio_open_dir(rootfd, p, fd);
        free(p);
        return rc;
}

/* "directory 'a/DOCS' collides with 'a/Docs' on the ..." */
static void dir_clash_why(const char *dir, size_t start, size_t end,
                          const char *other, char *why, size_t size)
{
        static const char tail[] = " on the case-insensitive destination "
                                   "(the names differ only by case)";
        struct ferry_buf b = FERRY_BUF_INIT, v = FERRY_BUF_INIT;
        ferry_buf_adds(&b, "directory ");
        ferry_buf_add_quoted(&b, dir, end, FERRY_ESC_QUOTE);
        if (!other[0]) {
                ferry_buf_addf(&b, " collides with another name%s", tail);
                ferry_buf_move_to(&b, why, size);
                return;
        }
        ferry_buf_adds(&b, " collides with ");
        ferry_buf_add(&v, dir, start); /* other's parent is dir's */
        ferry_buf_adds(&v, other);
        ferry_buf_add_quoted(&b, v.buf, v.len, FERRY_ESC_QUOTE);
        ferry_buf_release(&v);
        ferry_buf_adds(&b, tail);
        ferry_buf_move_to(&b, why, size);
}

/* DST's parent pfd has name under the other spelling other: whether SRC's
 * parent (dir up to start) holds other as something else than name. */
static int src_holds_other(int srcfd, const char *dir, size_t start,
                           const char *name, const char *other, bool *holds)
{
        int sfd = -1;
        *holds = false;
        int rc = open_prefix(srcfd, dir, start, &sfd);
        if (rc)
                return rc == ENOENT || rc == ENOTDIR ? 0 : rc;
        struct ferry_stat theirs, ours;
        rc = ferry_fsio_statat(sfd, other, &theirs);
        if (rc == ENOENT || rc == ENOTDIR)
                rc = 0; /* renamed by case in SRC: not another's copy */
        else if (!rc)
                *holds = ferry_fsio_statat(sfd, name, &ours) ||
                         ours.dev != theirs.dev || ours.ino != theirs.ino;
        ferry_fsio_close(&sfd);
        return rc;
}

/* Makes or checks component [start, end) of dir in DST; *stop when the
 * walk cannot go on (make_dirs reports why). */
static int check_component(int dstfd, int srcfd, const char *dir, size_t start,
                           size_t end, bool *clash, bool *stop, char *why,
                           size_t size)
{
        char name[NAME_MAX + 1], other[NAME_MAX + 1];
        int pfd = -1, rc;
        if (end - start > NAME_MAX || open_prefix(dstfd, dir, start, &pfd)) {
                *stop = true;
                return 0;
        }
        memcpy(name, dir + start, end - start);
        name[end - start] = '\0';
        rc = ferry_fsio_mkdirat(pfd, name, 0700);
        if (rc != EEXIST) {
                *stop = rc != 0;
                ferry_fsio_close(&pfd);
                return 0;
        }
        enum spelling sp = SP_NONE;
        other[0] = '\0';
        rc = stored_spelling(pfd, name, other, sizeof(other), &sp);
        bool holds = sp == SP_NONE;
        if (!rc && sp == SP_OTHER)
                rc = src_holds_other(srcfd, dir, start, name, other, &holds);
        struct ferry_stat st;
        if (!rc && sp == SP_OTHER && !holds &&
            !ferry_fsio_statat(pfd, other, &st) && !S_ISDIR(st.mode)) {
                /* a file that SRC renamed by case and made a directory:
                 * replace it, as a file's copy is replaced */
                rc = ferry_fsio_unlinkat(pfd, other, 0);
                if (!rc)
                        rc = ferry_fsio_mkdirat(pfd, name, 0700);
        }
        ferry_fsio_close(&pfd);
        if (rc || !holds)
                return rc;
        *clash = true;
        dir_clash_why(dir, start, end, other, why, size);
        return 0;
}

int ferry_names_dir_clash(struct ferry_names *n, int dstfd, int srcfd,
                          const char *dir, bool *clash, char *why, size_t size)
{
        *clash = false;
        if (!ferry_names_case_insensitive(n))
                return 0;
        size_t start = 0;
        while (dir[start]) {
                size_t end = start + strcspn(dir + start, "/");
                uint64_t h = path_hash(dir, end);
                bool stop = false;
                if (end > start && !dir_known_ok(n, h)) {
                        int rc = check_component(dstfd, srcfd, dir, start, end,
                                                 clash, &stop, why, size);
                        if (rc || *clash)
                                return rc;
                        if (stop)
                                return 0;
                        dir_remember_ok(n, h);
                }
                start = end + (dir[end] == '/');
        }
        return 0;
}
