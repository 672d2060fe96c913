/*
 * gentree - deterministic generator of realistic directory trees, used by
 * ferry's tests and benchmarks (in the spirit of zstd's datagen).
 *
 *   gentree [--seed S] [--files N] [--dirs-fanout MIN-MAX] [--depth D]
 *           [--median BYTES] [--max-size BYTES] [--odd-names] [--no-links]
 *           [--sparse] [--force] DIR
 *       Create N non-directory entries under DIR (regular files, a few
 *       symlinks, some dangling, and hardlinks) in nested directories with
 *       MIN..MAX files each, up to D levels deep, plus some empty dirs.
 *       Sizes are log-normal around the median with a long tail up to
 *       --max-size; about 2% of the files are empty. --odd-names adds names
 *       with spaces, a newline, invalid UTF-8, a leading dash, glob and quote
 *       characters, and 255-byte names. --sparse adds sparse files.
 *
 *   gentree --mutate PCT [--add N] [--delete-pct P] [--seed S] DIR
 *       Change an existing tree for incremental tests: rewrite the content
 *       and mtime of PCT% of the regular files, add N new files, delete P%.
 *
 * Everything (shape, names, sizes, content, modes, nanosecond mtimes) comes
 * from a seeded xoshiro256** PRNG, so the same seed and options give a
 * byte-identical tree; --mutate on identical trees gives identical results.
 * Directory times are set last, children before parents. One summary line
 * is printed on stdout. Exit status: 0 ok, 1 usage error, 2 I/O error.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define KIB         1024ULL
#define MIB         (1024ULL * KIB)
#define BUF_SIZE    (1 * MIB)
#define SIGMA       1.1          /* log-normal shape of the file sizes */
#define TIME_BASE   1577836800LL /* 2020-01-01, generated mtimes */
#define TIME_MUTATE 1704067200LL /* 2024-01-01, mutated mtimes */
#define TIME_SPAN   (3LL * 365 * 86400)

enum { EXIT_USAGE = 1, EXIT_IO = 2 };

struct opts {
        uint64_t seed;
        uint64_t files;
        unsigned fan_min, fan_max;
        unsigned depth;
        uint64_t median, max_size;
        bool odd_names, links, sparse, force;
        bool mutate;
        uint64_t mutate_ppm, delete_ppm, add;
        const char *dir;
};

struct rng {
        uint64_t s[4];
};

struct stats {
        uint64_t regular, empty, hardlinks, symlinks, dirs, bytes;
        uint64_t changed, added, deleted;
};

struct gdir {
        size_t parent;
        unsigned depth;
        uint64_t seq; /* next name number inside this directory */
        char *path;   /* relative to the root fd, "." for the root */
};

struct gen {
        const struct opts *o;
        int root;
        struct rng rng;
        struct gdir *dirs;
        size_t ndirs, cap;
        uint64_t budget;   /* entries still to create */
        uint64_t file_no;  /* global counter, seeds each file's content */
        unsigned odd_next; /* next guaranteed odd name kind */
        char link_cand[PATH_MAX]; /* a regular file for hardlinks, "" if none */
        unsigned char *buf;
        struct stats st;
};

/* ---- PRNG ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
        uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c)
{
        uint64_t x = a;
        x = splitmix64(&x) ^ b;
        x = splitmix64(&x) ^ c;
        return splitmix64(&x);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
        uint64_t x = seed;
        for (int i = 0; i < 4; i++)
                r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
        return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
        uint64_t *s = r->s;
        uint64_t result = rotl(s[1] * 5, 7) * 9;
        uint64_t t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return result;
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
        return n ? rng_next(r) % n : 0;
}

static double rng_unit(struct rng *r)
{
        return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static double rng_normal(struct rng *r)
{
        double u1 = 1.0 - rng_unit(r); /* (0, 1] */
        double u2 = rng_unit(r);
        return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

static uint64_t fnv1a(const char *s)
{
        uint64_t h = 0xcbf29ce484222325ULL;
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
        return h;
}

/* ---- small helpers ------------------------------------------------- */

static void fail(const char *what, const char *path)
{
        fprintf(stderr, "gentree: %s '%s': %s\n", what, path, strerror(errno));
}

static uint64_t pick_size(struct rng *r, const struct opts *o)
{
        uint64_t roll = rng_below(r, 1000);
        double sz;
        if (roll < 20)
                return 0;
        if (roll < 21) { /* the long tail: log-uniform in [max/32, max] */
                double hi = (double)o->max_size, lo = hi / 32.0;
                sz = lo * exp(rng_unit(r) * log(hi / lo));
        } else {
                sz = (double)o->median * exp(SIGMA * rng_normal(r));
        }
        if (sz < 1.0)
                sz = 1.0;
        if (sz > (double)o->max_size)
                sz = (double)o->max_size;
        return (uint64_t)sz;
}

/* A time in [base, base + span of 3 years, or 1 year for mutations). */
static struct timespec pick_time(struct rng *r, long long base)
{
        struct timespec ts;
        long long span = base == TIME_MUTATE ? TIME_SPAN / 3 : TIME_SPAN;
        ts.tv_sec = (time_t)(base + (long long)rng_below(r, (uint64_t)span));
        ts.tv_nsec = (long)rng_below(r, 1000000000);
        return ts;
}

static mode_t pick_file_mode(struct rng *r)
{
        uint64_t roll = rng_below(r, 100);
        if (roll < 80)
                return 0644;
        if (roll < 88)
                return 0600;
        if (roll < 96)
                return 0755;
        return 0444;
}

static mode_t pick_dir_mode(struct rng *r)
{
        uint64_t roll = rng_below(r, 100);
        return roll < 85 ? 0755 : roll < 93 ? 0700 : 0750;
}

static int join(char *out, const char *dir, const char *name)
{
        int n = strcmp(dir, ".") == 0
                        ? snprintf(out, PATH_MAX, "%s", name)
                        : snprintf(out, PATH_MAX, "%s/%s", dir, name);
        if (n < 0 || n >= PATH_MAX) {
                errno = ENAMETOOLONG;
                return -1;
        }
        return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -1;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

static void fill(struct rng *r, unsigned char *buf, size_t n)
{
        for (size_t i = 0; i < n; i += 8) {
                uint64_t v = rng_next(r);
                for (size_t k = 0; k < 8 && i + k < n; k++)
                        buf[i + k] = (unsigned char)(v >> (8 * k));
        }
}

/* Writes size bytes of content from r; sparse files get 64 KiB of data
 * per MiB and holes in between. */
static int write_content(int fd, struct rng *r, unsigned char *buf,
                         uint64_t size, bool sparse)
{
        uint64_t step = sparse ? MIB : BUF_SIZE;
        uint64_t chunk = sparse ? 64 * KIB : BUF_SIZE;
        for (uint64_t off = 0; off < size; off += step) {
                size_t n = (size_t)(size - off < chunk ? size - off : chunk);
                fill(r, buf, n);
                if (sparse && lseek(fd, (off_t)off, SEEK_SET) < 0)
                        return -1;
                if (write_all(fd, buf, n) < 0)
                        return -1;
        }
        return sparse ? ftruncate(fd, (off_t)size) : 0;
}

/* Opens path for writing; a read-only file is made writable for a moment
 * (the caller restores the mode with fchmod). */
static int open_for_write(int root, const char *path, int flags)
{
        int fd = openat(root, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | flags,
                        0600);
        if (fd < 0 && errno == EACCES && fchmodat(root, path, 0600, 0) == 0)
                fd = openat(root, path,
                            O_WRONLY | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
        return fd;
}

/* Writes a whole regular file: content, mode, mtime. */
static int make_file(struct gen *g, int root, const char *path, uint64_t size,
                     uint64_t content_seed, mode_t mode, struct timespec mtime,
                     bool sparse)
{
        struct rng r;
        struct timespec ts[2] = {mtime, mtime};
        int fd = open_for_write(root, path, O_CREAT | O_TRUNC);
        if (fd < 0) {
                fail("cannot create", path);
                return -1;
        }
        rng_seed(&r, content_seed);
        if (write_content(fd, &r, g->buf, size, sparse) < 0 ||
            fchmod(fd, mode) < 0 || futimens(fd, ts) < 0) {
                fail("cannot write", path);
                close(fd);
                return -1;
        }
        if (close(fd) < 0) {
                fail("cannot close", path);
                return -1;
        }
        return 0;
}

/* ---- names --------------------------------------------------------- */

enum odd_kind {
        ODD_SPACE,
        ODD_NEWLINE,
        ODD_BADUTF8,
        ODD_DASH,
        ODD_LONG,
        ODD_UTF8,
        ODD_GLOB,
        ODD_COUNT
};

static const char *const file_words[] = {
        "report", "photo",  "data",  "notes", "invoice", "backup", "scan",
        "draft",  "log",    "index", "thumb", "track",   "mail",   "budget",
        "readme", "config", "table", "image", "chapter", "summary"};
static const char *const exts[] = {".txt",  ".jpg", ".pdf",  ".dat",
                                   ".csv",  ".png", ".docx", ".log",
                                   ".json", ".bin", ""};
static const char *const dir_words[] = {"projects", "archive", "photos", "src",
                                        "home",     "shared",  "misc",   "2019",
                                        "clients",  "scans",   "music",  "old",
                                        "build",    "docs",    "mail"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void odd_name(char *out, enum odd_kind kind, uint64_t seq)
{
        static const char *const pre[] = {
                [ODD_SPACE] = "my file ",
                [ODD_NEWLINE] = "line\nbreak ",
                [ODD_BADUTF8] = "bad\xff\xfe-caf\xe9 ",
                [ODD_DASH] = "-rf ",
                [ODD_LONG] = "long-",
                [ODD_UTF8] = "caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-",
                [ODD_GLOB] = "star*quest?back\\slash'quote\"",
        };
        static const char *const post[] = {
                [ODD_SPACE] = " (copy) .txt",
                [ODD_NEWLINE] = ".txt",
                [ODD_BADUTF8] = ".txt",
                [ODD_DASH] = "",
                [ODD_LONG] = "-",
                [ODD_UTF8] = ".txt",
                [ODD_GLOB] = "",
        };
        int n = snprintf(out, NAME_MAX + 1, "%s%05" PRIu64 "%s", pre[kind], seq,
                         post[kind]);
        if (kind == ODD_LONG && n > 0) {
                memset(out + n, 'x', (size_t)(NAME_MAX - n));
                out[NAME_MAX] = '\0';
        }
}

static void file_name(struct gen *g, struct gdir *d, char *out)
{
        uint64_t seq = d->seq++;
        if (g->o->odd_names && g->odd_next < ODD_COUNT) {
                odd_name(out, (enum odd_kind)g->odd_next++, seq);
                return;
        }
        if (g->o->odd_names && rng_below(&g->rng, 100) == 0) {
                odd_name(out, (enum odd_kind)rng_below(&g->rng, ODD_COUNT),
                         seq);
                return;
        }
        snprintf(out, NAME_MAX + 1, "%s-%05" PRIu64 "%s",
                 file_words[rng_below(&g->rng, COUNT(file_words))], seq,
                 exts[rng_below(&g->rng, COUNT(exts))]);
}

static void dir_name(struct gen *g, struct gdir *parent, char *out)
{
        static const enum odd_kind dir_odd[] = {
                ODD_SPACE, ODD_NEWLINE, ODD_BADUTF8, ODD_DASH, ODD_UTF8};
        uint64_t seq = parent->seq++;
        size_t n = g->ndirs;
        if (g->o->odd_names &&
            (n == 2 || n == 3 || rng_below(&g->rng, 40) == 0)) {
                odd_name(out,
                         dir_odd[n < 4 ? n - 2
                                       : rng_below(&g->rng, COUNT(dir_odd))],
                         seq);
                char *dot = strrchr(out, '.');
                if (dot)
                        *dot = '\0';
                return;
        }
        snprintf(out, NAME_MAX + 1, "%s_%03" PRIu64,
                 dir_words[rng_below(&g->rng, COUNT(dir_words))], seq);
}

/* ---- generation ---------------------------------------------------- */

static int push_dir(struct gen *g, size_t parent, unsigned depth, char *path)
{
        if (g->ndirs == g->cap) {
                size_t cap = g->cap ? 2 * g->cap : 256;
                struct gdir *d = realloc(g->dirs, cap * sizeof(*d));
                if (!d)
                        return -1;
                g->dirs = d;
                g->cap = cap;
        }
        g->dirs[g->ndirs++] = (struct gdir){parent, depth, 0, path};
        return 0;
}

static int make_dir(struct gen *g, size_t parent)
{
        char name[NAME_MAX + 1], path[PATH_MAX];
        dir_name(g, &g->dirs[parent], name);
        if (join(path, g->dirs[parent].path, name) < 0) {
                fail("path too long", name);
                return -1;
        }
        if (mkdirat(g->root, path, 0700) < 0 && errno != EEXIST) {
                fail("cannot create directory", path);
                return -1;
        }
        char *copy = strdup(path);
        if (!copy || push_dir(g, parent, g->dirs[parent].depth + 1, copy) < 0) {
                free(copy);
                fprintf(stderr, "gentree: out of memory\n");
                return -1;
        }
        g->st.dirs++;
        return 0;
}

/* The first D directories form a chain so the full depth always exists;
 * later ones hang below a random directory that is not too deep. */
static size_t pick_parent(struct gen *g)
{
        size_t last = g->ndirs - 1;
        if (g->dirs[last].depth < g->o->depth && g->ndirs <= g->o->depth)
                return last;
        size_t p = (size_t)rng_below(&g->rng, g->ndirs);
        if (g->dirs[p].depth >= g->o->depth)
                p = g->dirs[p].parent;
        return p;
}

static int remove_existing(int root, const char *path)
{
        if (unlinkat(root, path, 0) < 0 && errno != ENOENT) {
                fail("cannot replace", path);
                return -1;
        }
        return 0;
}

/* target = "../" repeated depth times, then path; false if too long. */
static bool up_path(char *target, unsigned depth, const char *path)
{
        size_t len = 0;
        for (unsigned i = 0; i < depth && len + 3 < PATH_MAX; i++, len += 3)
                memcpy(target + len, "../", 3);
        int n = snprintf(target + len, PATH_MAX - len, "%s", path);
        return n >= 0 && (size_t)n < PATH_MAX - len;
}

/* Symlink targets: a sibling file, a dangling relative or absolute path,
 * or a file elsewhere in the tree through "../". The first two symlinks of
 * a tree are a valid one and a dangling one. */
static void symlink_target(struct gen *g, const struct gdir *d, char *target,
                           const char *sibling)
{
        uint64_t kind =
                g->st.symlinks < 2 ? g->st.symlinks : rng_below(&g->rng, 4);
        if (kind == 0 && sibling[0])
                snprintf(target, PATH_MAX, "%s", sibling);
        else if (kind == 2)
                snprintf(target, PATH_MAX,
                         "/nonexistent/ferry-gentree/%" PRIu64, g->file_no);
        else if (kind != 3 || !g->link_cand[0] ||
                 !up_path(target, d->depth, g->link_cand))
                snprintf(target, PATH_MAX, "missing-%" PRIu64, g->file_no);
}

static int make_symlink(struct gen *g, const struct gdir *d, const char *path,
                        const char *sibling)
{
        char target[PATH_MAX];
        symlink_target(g, d, target, sibling);
        struct timespec ts[2];
        ts[0] = ts[1] = pick_time(&g->rng, TIME_BASE);
        if (remove_existing(g->root, path) < 0)
                return -1;
        if (symlinkat(target, g->root, path) < 0 ||
            utimensat(g->root, path, ts, AT_SYMLINK_NOFOLLOW) < 0) {
                fail("cannot create symlink", path);
                return -1;
        }
        g->st.symlinks++;
        return 0;
}

static int make_hardlink(struct gen *g, const char *path)
{
        if (remove_existing(g->root, path) < 0)
                return -1;
        if (linkat(g->root, g->link_cand, g->root, path, 0) < 0) {
                fail("cannot create hardlink", path);
                return -1;
        }
        g->st.hardlinks++;
        return 0;
}

static int make_regular(struct gen *g, const char *path, bool force_sparse)
{
        uint64_t size = pick_size(&g->rng, g->o);
        bool sparse = g->o->sparse &&
                      (force_sparse ||
                       (size >= 256 * KIB && rng_below(&g->rng, 4) == 0));
        mode_t mode = pick_file_mode(&g->rng);
        struct timespec mtime = pick_time(&g->rng, TIME_BASE);
        if (force_sparse)
                size = g->o->max_size;
        if (make_file(g, g->root, path, size, mix3(g->o->seed, g->file_no, 0),
                      mode, mtime, sparse) < 0)
                return -1;
        g->st.regular++;
        g->st.empty += size == 0;
        g->st.bytes += size;
        if (size > 0 && (!g->link_cand[0] || rng_below(&g->rng, 10) == 0))
                snprintf(g->link_cand, sizeof(g->link_cand), "%s", path);
        return 0;
}

/* Entry numbers (g->file_no) that are always of one kind, so that even a
 * small tree has each case; they follow the --odd-names entries (2..8).
 * Past SPECIAL_END, 1% are symlinks and 1% hardlinks. */
enum {
        SYMLINK_VALID = 10,
        SYMLINK_DANGLING = 11,
        HARDLINK_FIRST = 12,
        SPARSE_FIRST = 13,
        SPECIAL_END = 16
};

/* Creates one non-directory entry in d; kind is chosen at random, except
 * for the special entry numbers above. */
static int make_entry(struct gen *g, size_t di, char *sibling)
{
        char name[NAME_MAX + 1], path[PATH_MAX];
        struct gdir *d = &g->dirs[di];
        uint64_t roll = rng_below(&g->rng, 1000);
        uint64_t n = g->file_no;
        bool links = g->o->links;
        file_name(g, d, name);
        if (join(path, d->path, name) < 0) {
                fail("path too long", name);
                return -1;
        }
        g->budget--;
        int rc;
        bool random = n > SPECIAL_END;
        if (links && (n == SYMLINK_VALID || n == SYMLINK_DANGLING ||
                      (random && roll < 10)))
                rc = make_symlink(g, d, path, sibling);
        else if (links && g->link_cand[0] &&
                 (n == HARDLINK_FIRST || (random && roll < 20)))
                rc = make_hardlink(g, path);
        else {
                rc = make_regular(g, path, g->o->sparse && n == SPARSE_FIRST);
                if (rc == 0)
                        snprintf(sibling, NAME_MAX + 1, "%s", name);
        }
        g->file_no++;
        return rc;
}

static int make_empty_file(struct gen *g)
{
        char path[PATH_MAX];
        struct timespec mtime = pick_time(&g->rng, TIME_BASE);
        snprintf(path, sizeof(path), "empty-%05" PRIu64 ".txt",
                 g->dirs[0].seq++);
        if (make_file(g, g->root, path, 0, 0, 0644, mtime, false) < 0)
                return -1;
        g->budget--;
        g->file_no++;
        g->st.regular++;
        g->st.empty++;
        return 0;
}

static int fill_dir(struct gen *g, size_t di)
{
        const struct opts *o = g->o;
        char sibling[NAME_MAX + 1] = "";
        uint64_t n =
                o->fan_min + rng_below(&g->rng, o->fan_max - o->fan_min + 1);
        if (di > 0 && rng_below(&g->rng, 100) < 3)
                n = 0; /* now and then a directory holds only subdirectories */
        for (uint64_t i = 0; i < n && g->budget > 0; i++)
                if (make_entry(g, di, sibling) < 0)
                        return -1;
        return 0;
}

static int set_dir_times(struct gen *g)
{
        struct rng r;
        rng_seed(&r, mix3(g->o->seed, 0x646972, 0));
        for (size_t i = g->ndirs; i-- > 0;) {
                const char *path = g->dirs[i].path;
                struct timespec ts[2];
                ts[0] = ts[1] = pick_time(&r, TIME_BASE);
                if (fchmodat(g->root, path, pick_dir_mode(&r), 0) < 0 ||
                    utimensat(g->root, path, ts, AT_SYMLINK_NOFOLLOW) < 0) {
                        fail("cannot set times of", path);
                        return -1;
                }
        }
        return 0;
}

static int generate(struct gen *g)
{
        char *root = strdup(".");
        if (!root || push_dir(g, 0, 0, root) < 0) {
                free(root);
                return -1;
        }
        g->budget = g->o->files;
        g->file_no = 1;
        if (g->budget > 0 && make_empty_file(g) < 0)
                return -1;
        if (fill_dir(g, 0) < 0)
                return -1;
        while (g->budget > 0)
                if (make_dir(g, pick_parent(g)) < 0 ||
                    fill_dir(g, g->ndirs - 1) < 0)
                        return -1;
        size_t leaves = g->ndirs / 30 + 1; /* empty leaf directories */
        for (size_t i = 0; i < leaves; i++)
                if (make_dir(g, pick_parent(g)) < 0)
                        return -1;
        return set_dir_times(g);
}

static void print_summary(const struct stats *st)
{
        printf("gentree: %" PRIu64 " files (%" PRIu64 " regular, %" PRIu64
               " empty, %" PRIu64 " hardlinks, %" PRIu64 " symlinks), %" PRIu64
               " dirs, %" PRIu64 " bytes\n",
               st->regular + st->hardlinks + st->symlinks, st->regular,
               st->empty, st->hardlinks, st->symlinks, st->dirs, st->bytes);
}

/* ---- mutation ------------------------------------------------------ */

struct list {
        char **v;
        size_t n, cap;
};

static int list_add(struct list *l, const char *s)
{
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 1024;
                char **v = realloc(l->v, cap * sizeof(*v));
                if (!v)
                        return -1;
                l->v = v;
                l->cap = cap;
        }
        if (!(l->v[l->n] = strdup(s)))
                return -1;
        l->n++;
        return 0;
}

static void list_free(struct list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i]);
        free(l->v);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects the regular files and directories below dir (relative to root). */
static int walk(int root, const char *dir, struct list *files,
                struct list *dirs)
{
        int fd = openat(root, dir,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *dp = fd < 0 ? NULL : fdopendir(fd);
        if (!dp) {
                fail("cannot open directory", dir);
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        int rc = list_add(dirs, dir);
        struct dirent *e;
        while (rc == 0 && (e = readdir(dp)) != NULL) {
                char path[PATH_MAX];
                struct stat st;
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (join(path, dir, e->d_name) < 0 ||
                    fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        fail("cannot stat", e->d_name);
                        rc = -1;
                } else if (S_ISDIR(st.st_mode))
                        rc = walk(root, path, files, dirs);
                else if (S_ISREG(st.st_mode))
                        rc = list_add(files, path);
        }
        closedir(dp);
        return rc;
}

static int rewrite_file(struct gen *g, const char *path, uint64_t h)
{
        struct stat st;
        struct rng r;
        if (fstatat(g->root, path, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                fail("cannot stat", path);
                return -1;
        }
        rng_seed(&r, h);
        uint64_t size =
                rng_below(&r, 2) ? (uint64_t)st.st_size : pick_size(&r, g->o);
        struct timespec mtime = pick_time(&r, TIME_MUTATE);
        if (make_file(g, g->root, path, size, rng_next(&r), st.st_mode & 07777,
                      mtime, false) < 0)
                return -1;
        g->st.changed++;
        g->st.bytes += size;
        return 0;
}

static void parent_of(const char *path, char *out)
{
        const char *slash = strrchr(path, '/');
        if (slash)
                snprintf(out, PATH_MAX, "%.*s", (int)(slash - path), path);
        else
                snprintf(out, PATH_MAX, ".");
}

static int mutate_one(struct gen *g, const char *path, struct list *touched)
{
        uint64_t ph = fnv1a(path);
        uint64_t hm = mix3(g->o->seed, ph, 1), hd = mix3(g->o->seed, ph, 2);
        if (hd % 1000000 < g->o->delete_ppm) {
                char parent[PATH_MAX];
                if (unlinkat(g->root, path, 0) < 0) {
                        fail("cannot delete", path);
                        return -1;
                }
                g->st.deleted++;
                parent_of(path, parent);
                return list_add(touched, parent);
        }
        if (hm % 1000000 < g->o->mutate_ppm)
                return rewrite_file(g, path, hm);
        return 0;
}

static int add_files(struct gen *g, const struct list *dirs,
                     struct list *touched)
{
        for (uint64_t i = 0; i < g->o->add; i++) {
                char name[NAME_MAX + 1], path[PATH_MAX];
                const char *dir = dirs->v[rng_below(&g->rng, dirs->n)];
                snprintf(name, sizeof(name),
                         "added-%" PRIx64 "-%05" PRIu64 ".dat", g->o->seed, i);
                if (join(path, dir, name) < 0) {
                        fail("path too long", name);
                        return -1;
                }
                uint64_t size = pick_size(&g->rng, g->o);
                struct timespec mtime = pick_time(&g->rng, TIME_MUTATE);
                if (make_file(g, g->root, path, size, rng_next(&g->rng), 0644,
                              mtime, false) < 0 ||
                    list_add(touched, dir) < 0)
                        return -1;
                g->st.added++;
                g->st.bytes += size;
        }
        return 0;
}

/* Adding and deleting changed the mtime of some directories to "now":
 * give them a deterministic one instead. */
static int retime_dirs(struct gen *g, struct list *touched)
{
        qsort(touched->v, touched->n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < touched->n; i++) {
                struct rng r;
                struct timespec ts[2];
                rng_seed(&r, mix3(g->o->seed, fnv1a(touched->v[i]), 3));
                ts[0] = ts[1] = pick_time(&r, TIME_MUTATE);
                if (utimensat(g->root, touched->v[i], ts, AT_SYMLINK_NOFOLLOW) <
                    0) {
                        fail("cannot set times of", touched->v[i]);
                        return -1;
                }
        }
        return 0;
}

static int mutate(struct gen *g)
{
        struct list files = {0}, dirs = {0}, touched = {0};
        int rc = walk(g->root, ".", &files, &dirs);
        if (rc == 0) {
                qsort(files.v, files.n, sizeof(char *), cmp_str);
                qsort(dirs.v, dirs.n, sizeof(char *), cmp_str);
        }
        for (size_t i = 0; rc == 0 && i < files.n; i++)
                rc = mutate_one(g, files.v[i], &touched);
        if (rc == 0)
                rc = add_files(g, &dirs, &touched);
        if (rc == 0)
                rc = retime_dirs(g, &touched);
        if (rc == 0)
                printf("gentree: %" PRIu64 " files changed, %" PRIu64
                       " added, %" PRIu64 " deleted, %" PRIu64
                       " bytes written\n",
                       g->st.changed, g->st.added, g->st.deleted, g->st.bytes);
        list_free(&files);
        list_free(&dirs);
        list_free(&touched);
        return rc;
}

/* ---- command line -------------------------------------------------- */

static void usage(FILE *f)
{
        fputs("usage: gentree [--seed S] [--files N] [--dirs-fanout MIN-MAX] "
              "[--depth D]\n"
              "               [--median BYTES] [--max-size BYTES] "
              "[--odd-names]\n"
              "               [--no-links] [--sparse] [--force] DIR\n"
              "       gentree --mutate PCT [--add N] [--delete-pct PCT] "
              "[--seed S]\n"
              "               [--median BYTES] [--max-size BYTES] DIR\n"
              "BYTES accept a K, M or G suffix (binary). Defaults: --seed 1 "
              "--files 1000\n"
              "--dirs-fanout 20-50 --depth 6 --median 4K --max-size 8M.\n",
              f);
}

static int parse_u64(const char *s, uint64_t *out)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        uint64_t mul = 1;
        if (*end == 'K' || *end == 'k')
                mul = KIB, end++;
        else if (*end == 'M' || *end == 'm')
                mul = MIB, end++;
        else if (*end == 'G' || *end == 'g')
                mul = 1024 * MIB, end++;
        if (errno || end == s || *end || s[0] == '-' || v > UINT64_MAX / mul)
                return -1;
        *out = (uint64_t)v * mul;
        return 0;
}

static int parse_pct(const char *s, uint64_t *ppm)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || !(v >= 0.0 && v <= 100.0))
                return -1;
        *ppm = (uint64_t)(v * 10000.0 + 0.5);
        return 0;
}

static int parse_fanout(const char *s, struct opts *o)
{
        unsigned a, b;
        char tail;
        if (sscanf(s, "%u-%u%c", &a, &b, &tail) != 2 || a > b || b == 0 ||
            b > 100000)
                return -1;
        o->fan_min = a;
        o->fan_max = b;
        return 0;
}

enum {
        OPT_SEED = 256,
        OPT_FILES,
        OPT_FANOUT,
        OPT_DEPTH,
        OPT_MEDIAN,
        OPT_MAX,
        OPT_ODD,
        OPT_NOLINKS,
        OPT_SPARSE,
        OPT_FORCE,
        OPT_MUTATE,
        OPT_ADD,
        OPT_DELETE,
        OPT_HELP
};

static const struct option long_opts[] = {
        {"seed", required_argument, NULL, OPT_SEED},
        {"files", required_argument, NULL, OPT_FILES},
        {"dirs-fanout", required_argument, NULL, OPT_FANOUT},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"median", required_argument, NULL, OPT_MEDIAN},
        {"max-size", required_argument, NULL, OPT_MAX},
        {"odd-names", no_argument, NULL, OPT_ODD},
        {"no-links", no_argument, NULL, OPT_NOLINKS},
        {"sparse", no_argument, NULL, OPT_SPARSE},
        {"force", no_argument, NULL, OPT_FORCE},
        {"mutate", required_argument, NULL, OPT_MUTATE},
        {"add", required_argument, NULL, OPT_ADD},
        {"delete-pct", required_argument, NULL, OPT_DELETE},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0}};

static int apply_opt(int c, const char *arg, struct opts *o)
{
        uint64_t v = 0;
        switch (c) {
        case OPT_SEED: return parse_u64(arg, &o->seed);
        case OPT_FILES: return parse_u64(arg, &o->files);
        case OPT_FANOUT: return parse_fanout(arg, o);
        case OPT_DEPTH:
                if (parse_u64(arg, &v) < 0 || v > 64)
                        return -1;
                o->depth = (unsigned)v;
                return 0;
        case OPT_MEDIAN: return parse_u64(arg, &o->median);
        case OPT_MAX:
                return parse_u64(arg, &o->max_size) < 0 || o->max_size == 0 ? -1
                                                                            : 0;
        case OPT_ODD: o->odd_names = true; return 0;
        case OPT_NOLINKS: o->links = false; return 0;
        case OPT_SPARSE: o->sparse = true; return 0;
        case OPT_FORCE: o->force = true; return 0;
        case OPT_MUTATE:
                o->mutate = true;
                return parse_pct(arg, &o->mutate_ppm);
        case OPT_ADD: return parse_u64(arg, &o->add);
        case OPT_DELETE: return parse_pct(arg, &o->delete_ppm);
        default: return -1;
        }
}

static int parse_args(int argc, char **argv, struct opts *o)
{
        int c;
        *o = (struct opts){.seed = 1,
                           .files = 1000,
                           .fan_min = 20,
                           .fan_max = 50,
                           .depth = 6,
                           .median = 4 * KIB,
                           .max_size = 8 * MIB,
                           .links = true};
        while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
                if (c == 'h' || c == OPT_HELP) {
                        usage(stdout);
                        exit(0);
                }
                if (apply_opt(c, optarg, o) < 0) {
                        if (c != '?')
                                fprintf(stderr,
                                        "gentree: bad value for --%s: '%s'\n",
                                        long_opts[c - OPT_SEED].name, optarg);
                        return -1;
                }
        }
        if (optind != argc - 1) {
                fprintf(stderr, "gentree: expected exactly one DIR\n");
                return -1;
        }
        o->dir = argv[optind];
        return 0;
}

/* ---- main ---------------------------------------------------------- */

static int mkdir_p(const char *dir)
{
        char path[PATH_MAX];
        if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path)) {
                errno = ENAMETOOLONG;
                return -1;
        }
        for (char *p = path + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        return -1;
                *p = '/';
        }
        return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int is_empty_dir(int fd)
{
        int dup_fd = dup(fd);
        DIR *dp = dup_fd < 0 ? NULL : fdopendir(dup_fd);
        struct dirent *e;
        int empty = 1;
        if (!dp)
                return -1;
        while ((e = readdir(dp)) != NULL)
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                        empty = 0;
        closedir(dp);
        return empty;
}

static int open_root(const struct opts *o)
{
        if (!o->mutate && mkdir_p(o->dir) < 0) {
                fail("cannot create", o->dir);
                return -1;
        }
        int fd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                fail("cannot open", o->dir);
                return -1;
        }
        if (!o->mutate && !o->force && is_empty_dir(fd) != 1) {
                fprintf(stderr,
                        "gentree: '%s' is not empty (use --force to write into "
                        "it)\n",
                        o->dir);
                close(fd);
                return -1;
        }
        return fd;
}

int main(int argc, char **argv)
{
        struct opts o;
        struct gen g = {0};
        int rc;
        if (parse_args(argc, argv, &o) < 0) {
                usage(stderr);
                return EXIT_USAGE;
        }
        g.o = &o;
        rng_seed(&g.rng, mix3(o.seed, o.mutate ? 0x6d7574 : 0x67656e, 0));
        g.buf = malloc(BUF_SIZE);
        g.root = open_root(&o);
        if (!g.buf || g.root < 0) {
                free(g.buf);
                return EXIT_IO;
        }
        rc = o.mutate ? mutate(&g) : generate(&g);
        if (rc == 0 && !o.mutate)
                print_summary(&g.st);
        for (size_t i = 0; i < g.ndirs; i++)
                free(g.dirs[i].path);
        free(g.dirs);
        free(g.buf);
        close(g.root);
        return rc == 0 ? 0 : EXIT_IO;
}
