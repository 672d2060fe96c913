/*
 * test_fsio.c - the system call wrappers (src/fsio.h): short
 * reads and writes, EINTR, paths longer than PATH_MAX, make_dirs,
 * remove_tree, readlinkat, stat translation, and the fault table read from
 * FERRY_FAULT / FERRY_CRASH, which runs in child processes because the
 * table is read once per process.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "fsio.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

static atomic_int signals_seen;

static void on_signal(int sig)
{
        (void)sig;
        atomic_fetch_add(&signals_seen, 1);
}

/* SIGUSR1 without SA_RESTART: a blocked read or write returns EINTR or
 * a short count, which the wrappers must absorb. */
static void install_interrupting_handler(void)
{
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;
        sigaction(SIGUSR1, &sa, NULL);
}

static void test_errors_are_positive_errno(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int fd = 12345;
        CHECK_EQ(ferry_fsio_openat(root, "missing", O_RDONLY, 0, &fd), ENOENT);
        CHECK_EQ(fd, 12345); /* untouched on failure */
        struct ferry_stat st;
        CHECK_EQ(ferry_fsio_statat(root, "missing", &st), ENOENT);
        CHECK_EQ(ferry_fsio_mkdirat(root, "d", 0755), 0);
        CHECK_EQ(ferry_fsio_mkdirat(root, "d", 0755), EEXIST);
        CHECK_EQ(ferry_fsio_unlinkat(root, "nothing", 0), ENOENT);
        CHECK_EQ(ferry_fsio_renameat(root, "nothing", "x"), ENOENT);
        fd = -1;
        CHECK_EQ(ferry_fsio_close(&fd), 0);
        CHECK_EQ(ferry_fsio_openat(root, "d", O_RDONLY | O_DIRECTORY, 0, &fd),
                 0);
        CHECK(fd >= 0);
        CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0); /* always O_CLOEXEC */
        CHECK_EQ(ferry_fsio_close(&fd), 0);
        CHECK_EQ(fd, -1);
        close(root);
        unit_rmtree(dir);
}

static void test_pread_pwrite_file(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int fd = -1;
        CHECK_EQ(ferry_fsio_openat(root, "f", O_RDWR | O_CREAT | O_EXCL, 0600,
                                   &fd),
                 0);
        size_t len = 3 * 1024 * 1024 + 17;
        char *data = malloc(len), *back = malloc(len + 100);
        unit_fill(data, len, 1);
        CHECK_EQ(ferry_fsio_write(fd, data, len), 0);
        CHECK_EQ(ferry_fsio_pwrite(fd, "XYZ", 3, 10), 0);
        memcpy(data + 10, "XYZ", 3);
        size_t got = 0;
        CHECK_EQ(ferry_fsio_pread(fd, back, len + 100, 0, &got), 0);
        CHECK_EQ(got, len); /* short only at EOF */
        CHECK_MEM(back, data, len);
        CHECK_EQ(ferry_fsio_pread(fd, back, 100, (off_t)len - 5, &got), 0);
        CHECK_EQ(got, 5);
        CHECK_EQ(ferry_fsio_pread(fd, back, 100, (off_t)len + 5, &got), 0);
        CHECK_EQ(got, 0);
        CHECK_EQ(ferry_fsio_ftruncate(fd, 100), 0);
        lseek(fd, 0, SEEK_SET);
        CHECK_EQ(ferry_fsio_read(fd, back, len, &got), 0);
        CHECK_EQ(got, 100);
        CHECK_MEM(back, data, 100);
        CHECK_EQ(ferry_fsio_fsync(fd), 0);
        CHECK_EQ(ferry_fsio_syncfs(fd), 0);
        ferry_fsio_close(&fd);
        free(data);
        free(back);
        close(root);
        unit_rmtree(dir);
}

/* A writer that dribbles bytes into a pipe in small pieces. */
struct dribble {
        int fd;
        const char *data;
        size_t len, chunk;
        pthread_t reader; /* signalled now and then when kick */
        bool kick;
};

static void *dribble_thread(void *arg)
{
        struct dribble *d = arg;
        for (size_t off = 0; off < d->len; off += d->chunk) {
                size_t n = d->len - off < d->chunk ? d->len - off : d->chunk;
                if (write(d->fd, d->data + off, n) != (ssize_t)n)
                        break;
                if (d->kick && (off / d->chunk) % 8 == 0)
                        pthread_kill(d->reader, SIGUSR1);
                if ((off / d->chunk) % 16 == 0)
                        unit_sleep_ms(1);
        }
        close(d->fd);
        return NULL;
}

static void test_short_reads_loop(void)
{
        install_interrupting_handler();
        int p[2];
        CHECK_EQ(pipe(p), 0);
        size_t len = 300 * 1024 + 7;
        char *data = malloc(len), *back = malloc(len);
        unit_fill(data, len, 2);
        struct dribble d = {p[1],         data,           len,
                            7 * 1024 + 3, pthread_self(), true};
        pthread_t t;
        atomic_store(&signals_seen, 0);
        CHECK_EQ(pthread_create(&t, NULL, dribble_thread, &d), 0);
        /* one call gets everything asked for, in spite of a pipe that
         * delivers small pieces and of signals interrupting the read */
        size_t got = 0;
        CHECK_EQ(ferry_fsio_read(p[0], back, 200 * 1024, &got), 0);
        CHECK_EQ(got, 200 * 1024);
        size_t rest = 0;
        CHECK_EQ(ferry_fsio_read(p[0], back + got, len, &rest), 0);
        CHECK_EQ(got + rest, len); /* short: the writer closed */
        CHECK_MEM(back, data, len);
        CHECK_EQ(ferry_fsio_read(p[0], back, 10, &got), 0);
        CHECK_EQ(got, 0);
        pthread_join(t, NULL);
        CHECK(atomic_load(&signals_seen) > 0);
        close(p[0]);
        free(data);
        free(back);
}

struct big_write {
        int fd;
        const char *data;
        size_t len;
        int rc;
};

static void *big_write_thread(void *arg)
{
        struct big_write *w = arg;
        w->rc = ferry_fsio_write(w->fd, w->data, w->len);
        close(w->fd);
        return NULL;
}

static void test_short_writes_loop(void)
{
        install_interrupting_handler();
        int p[2];
        CHECK_EQ(pipe(p), 0);
        fcntl(p[1], F_SETPIPE_SZ, 4096); /* small pipe: many partial writes */
        size_t len = 2 * 1024 * 1024 + 5;
        char *data = malloc(len), *back = malloc(len);
        unit_fill(data, len, 3);
        struct big_write w = {p[1], data, len, -1};
        pthread_t t;
        atomic_store(&signals_seen, 0);
        CHECK_EQ(pthread_create(&t, NULL, big_write_thread, &w), 0);
        size_t got = 0;
        int n_reads = 0;
        for (;;) {
                ssize_t n = read(p[0], back + got,
                                 len - got < 3000 ? len - got : 3000);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
                /* interrupt the writer while it waits for room */
                if (++n_reads % 16 == 0)
                        pthread_kill(t, SIGUSR1);
        }
        pthread_join(t, NULL);
        CHECK_EQ(w.rc, 0);
        CHECK_EQ(got, len);
        CHECK_MEM(back, data, len);
        CHECK(atomic_load(&signals_seen) > 0);
        close(p[0]);
        free(data);
        free(back);
}

/* Makes depth directories of 200-byte names below root, one at a time;
 * returns the relative path (caller frees). */
static char *deep_path(int root, int depth, bool create)
{
        char *path = calloc((size_t)depth, 202);
        int cur = dup(root);
        for (int i = 0; i < depth; i++) {
                char name[212]; /* 200 bytes used; room for any %d */
                memset(name, 'a' + i % 26, 200);
                snprintf(name + 190, 22, "%010d", i);
                if (i)
                        strcat(path, "/");
                strcat(path, name);
                if (!create)
                        continue;
                mkdirat(cur, name, 0755);
                int next = openat(cur, name, O_RDONLY | O_DIRECTORY);
                close(cur);
                cur = next;
        }
        close(cur);
        return path;
}

/* Opens rel below root one component at a time (the test's own oracle). */
static int walk(int root, const char *rel, int flags)
{
        char *copy = strdup(rel), *save = NULL;
        int cur = dup(root);
        char *tok = strtok_r(copy, "/", &save);
        while (tok && cur >= 0) {
                char *next_tok = strtok_r(NULL, "/", &save);
                int next = openat(cur, tok,
                                  next_tok ? O_RDONLY | O_DIRECTORY : flags);
                close(cur);
                cur = next;
                tok = next_tok;
        }
        free(copy);
        return cur;
}

static void test_path_longer_than_path_max(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        char *deep = deep_path(root, 24, true);
        CHECK(strlen(deep) > PATH_MAX);
        size_t plen = strlen(deep);
        char *file = malloc(plen + 16);
        snprintf(file, plen + 16, "%s/file", deep);

        /* the kernel refuses the whole path; fsio walks it */
        CHECK(openat(root, file, O_RDONLY) < 0 && errno == ENAMETOOLONG);
        int fd = -1;
        CHECK_EQ(ferry_fsio_openat(root, file, O_WRONLY | O_CREAT | O_EXCL,
                                   0600, &fd),
                 0);
        CHECK_EQ(ferry_fsio_write(fd, "deep content", 12), 0);
        ferry_fsio_close(&fd);

        int check = walk(root, file, O_RDONLY);
        CHECK(check >= 0);
        char buf[32] = "";
        CHECK_EQ(read(check, buf, sizeof(buf)), 12);
        CHECK_MEM(buf, "deep content", 12);
        close(check);

        CHECK_EQ(ferry_fsio_openat(root, file, O_RDONLY, 0, &fd), 0);
        size_t got = 0;
        CHECK_EQ(ferry_fsio_read(fd, buf, sizeof(buf), &got), 0);
        CHECK_EQ(got, 12);
        ferry_fsio_close(&fd);

        int dfd = -1;
        CHECK_EQ(ferry_fsio_open_dir(root, deep, &dfd), 0);
        struct ferry_stat st;
        CHECK_EQ(ferry_fsio_statat(dfd, "file", &st), 0);
        CHECK(S_ISREG(st.mode));
        CHECK_EQ(st.size, 12);
        ferry_fsio_close(&dfd);

        /* a missing file or an over-long component deep down */
        snprintf(file, plen + 16, "%s/nope", deep);
        CHECK_EQ(ferry_fsio_openat(root, file, O_RDONLY, 0, &fd), ENOENT);
        char *toolong = malloc(plen + 300);
        memset(toolong, 'z', plen + 299);
        toolong[plen + 299] = '\0';
        memcpy(toolong, deep, plen);
        toolong[plen] = '/';
        CHECK_EQ(ferry_fsio_openat(root, toolong, O_RDONLY, 0, &fd),
                 ENAMETOOLONG);
        free(toolong);

        /* a symlink in the middle of a long path is not followed */
        mkdirat(root, "elsewhere", 0755);
        unit_write_file(root, "elsewhere/file", "outside", 7);
        int last = walk(root, deep, O_RDONLY | O_DIRECTORY);
        CHECK_EQ(symlinkat(dir, last, "jump"), 0);
        close(last);
        snprintf(file, plen + 16, "%s/jump/elsewhere/file", deep);
        fd = -1;
        int rc = ferry_fsio_openat(root, file, O_RDONLY, 0, &fd);
        CHECK(rc == ELOOP || rc == ENOTDIR);
        CHECK_EQ(fd, -1);
        free(file);
        free(deep);
        close(root);
        unit_rmtree(dir);
}

/* True when the kernel has openat2 (fsio then refuses every symlink). */
static bool have_openat2(void)
{
#ifdef SYS_openat2
        struct {
                uint64_t flags, mode, resolve;
        } how = {O_RDONLY | O_CLOEXEC, 0, 0};
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd >= 0)
                close(fd);
        return fd >= 0;
#else
        return false;
#endif
}

static void symlink_checks(bool middle);

static void test_symlinks_never_followed(void)
{
        symlink_checks(have_openat2());
}

/* The same where the kernel has no openat2 (before Linux 5.6; the test
 * build's FERRY_NO_OPENAT2): a path is walked a directory at a time. Run
 * last: the fallback stays on for the rest of the process. */
static void test_symlinks_without_openat2(void)
{
        setenv("FERRY_NO_OPENAT2", "1", 1);
        symlink_checks(true);
}

static void symlink_checks(bool middle)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        mkdirat(root, "real", 0755);
        unit_write_file(root, "real/file", "r", 1);
        symlinkat("real", root, "lnk");
        symlinkat("real/file", root, "flnk");
        int fd = -1;
        /* the last component, asked with O_NOFOLLOW as the engine does */
        CHECK_EQ(ferry_fsio_openat(root, "flnk", O_RDONLY | O_NOFOLLOW, 0, &fd),
                 ELOOP);
        CHECK_EQ(fd, -1);
        if (!middle) {
                fprintf(stderr, "  SKIP middle-of-path symlinks: no openat2 "
                                "in this kernel\n");
                atomic_fetch_add(&unit_skipped, 1);
        } else {
                CHECK_EQ(ferry_fsio_openat(root, "lnk/file", O_RDONLY, 0, &fd),
                         ELOOP);
                int rc = ferry_fsio_open_dir(root, "lnk", &fd);
                CHECK(rc == ELOOP || rc == ENOTDIR);
                CHECK_EQ(fd, -1);
                /* nor can a path climb out of its directory, not even
                 * to come back in */
                char up[PATH_MAX + 32];
                snprintf(up, sizeof(up), "..%s/real/file", strrchr(dir, '/'));
                CHECK(ferry_fsio_openat(root, up, O_RDONLY, 0, &fd) != 0);
                CHECK_EQ(fd, -1);
        }
        CHECK_EQ(ferry_fsio_openat(root, "real/file", O_RDONLY, 0, &fd), 0);
        ferry_fsio_close(&fd);
        close(root);
        unit_rmtree(dir);
}

static void test_make_dirs(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        CHECK_EQ(mkdirat(root, "a", 0755), 0);
        int fd = -1;
        mode_t old = umask(022);
        CHECK_EQ(ferry_fsio_make_dirs(root, "a/b/c", &fd), 0);
        umask(old);
        struct stat s;
        CHECK(fd >= 0 && fstat(fd, &s) == 0 && S_ISDIR(s.st_mode));
        CHECK_EQ(fstatat(root, "a/b/c", &s, 0), 0);
        CHECK_EQ(s.st_mode & 07777, 0700); /* created with mode 0700 */
        CHECK_EQ(fstatat(root, "a", &s, 0), 0);
        CHECK_EQ(s.st_mode & 07777, 0755); /* existing ones left alone */
        /* the descriptor is the new directory */
        CHECK_EQ(mkdirat(fd, "marker", 0700), 0);
        CHECK_EQ(fstatat(root, "a/b/c/marker", &s, 0), 0);
        ferry_fsio_close(&fd);

        CHECK_EQ(ferry_fsio_make_dirs(root, "a/b/c", &fd), 0); /* exists */
        ferry_fsio_close(&fd);

        /* "" is rootfd itself, as a new descriptor */
        struct stat r;
        fstat(root, &r);
        CHECK_EQ(ferry_fsio_make_dirs(root, "", &fd), 0);
        CHECK(fd != root && fstat(fd, &s) == 0 && s.st_ino == r.st_ino);
        ferry_fsio_close(&fd);
        CHECK_EQ(ferry_fsio_open_dir(root, "", &fd), 0);
        CHECK(fd != root && fstat(fd, &s) == 0 && s.st_ino == r.st_ino);
        ferry_fsio_close(&fd);

        /* open_dir does not follow a symlink at the end */
        CHECK_EQ(symlinkat("a", root, "lnk"), 0);
        fd = -1;
        CHECK(ferry_fsio_open_dir(root, "lnk", &fd) != 0);
        CHECK_EQ(fd, -1);

        /* a file or a symlink in the way is left alone: ENOTDIR (the
         * coordinator decides whether it is ferry's to remove, rule 9); a
         * symlink's target is not followed */
        CHECK_EQ(unit_write_file(root, "f", "x", 1), 0);
        CHECK_EQ(ferry_fsio_make_dirs(root, "f/x", &fd), ENOTDIR);
        CHECK_EQ(fd, -1);
        CHECK(fstatat(root, "f", &s, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISREG(s.st_mode));
        CHECK_EQ(ferry_fsio_make_dirs(root, "lnk/y", &fd), ENOTDIR);
        CHECK_EQ(fd, -1);
        CHECK(fstatat(root, "lnk", &s, AT_SYMLINK_NOFOLLOW) == 0 &&
              S_ISLNK(s.st_mode));
        CHECK(fstatat(root, "a/y", &s, AT_SYMLINK_NOFOLLOW) < 0);
        CHECK(fstatat(root, "a/b/c/marker", &s, 0) == 0);

        /* missing components of a path longer than PATH_MAX */
        char *deep = deep_path(root, 22, false);
        CHECK_EQ(ferry_fsio_make_dirs(root, deep, &fd), 0);
        CHECK(fd >= 0);
        CHECK_EQ(mkdirat(fd, "end", 0700), 0);
        ferry_fsio_close(&fd);
        size_t plen = strlen(deep);
        char *end = malloc(plen + 8);
        snprintf(end, plen + 8, "%s/end", deep);
        int check = walk(root, end, O_RDONLY | O_DIRECTORY);
        CHECK(check >= 0);
        close(check);
        /* and once more when it all exists */
        CHECK_EQ(ferry_fsio_make_dirs(root, end, &fd), 0);
        ferry_fsio_close(&fd);
        free(end);
        free(deep);
        close(root);
        unit_rmtree(dir);
}

static void test_remove_tree(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        mkdirat(root, "keep", 0755);
        unit_write_file(root, "keep/precious", "p", 1);
        mkdirat(root, "t", 0755);
        mkdirat(root, "t/sub", 0755);
        mkdirat(root, "t/sub/deeper", 0755);
        mkdirat(root, "t/empty", 0755);
        unit_write_file(root, "t/a", "a", 1);
        unit_write_file(root, "t/sub/deeper/b\nc", "b", 1);
        symlinkat("../keep", root, "t/dirlink");
        symlinkat("../keep/precious", root, "t/filelink");
        mkfifoat(root, "t/sub/fifo", 0600);
        mkdirat(root, "t/ro", 0755);
        unit_write_file(root, "t/ro/x", "x", 1);
        fchmodat(root, "t/ro", 0555, 0);

        int rc = ferry_fsio_remove_tree(root, "t");
        struct stat s;
        if (geteuid() == 0) {
                CHECK_EQ(rc, 0);
                CHECK(fstatat(root, "t", &s, AT_SYMLINK_NOFOLLOW) < 0 &&
                      errno == ENOENT);
        } else {
                fprintf(stderr, "  (not root: read-only dir may stay)\n");
        }
        /* symlinks were removed, not followed */
        CHECK_EQ(fstatat(root, "keep/precious", &s, 0), 0);

        /* a plain file, a symlink to a dir, nothing at all */
        unit_write_file(root, "file", "f", 1);
        CHECK_EQ(ferry_fsio_remove_tree(root, "file"), 0);
        CHECK(fstatat(root, "file", &s, 0) < 0);
        symlinkat("keep", root, "ln");
        CHECK_EQ(ferry_fsio_remove_tree(root, "ln"), 0);
        CHECK(fstatat(root, "ln", &s, AT_SYMLINK_NOFOLLOW) < 0);
        CHECK_EQ(fstatat(root, "keep/precious", &s, 0), 0);
        CHECK_EQ(ferry_fsio_remove_tree(root, "absent"), 0);
        close(root);
        unit_rmtree(dir);
}

/* rmdirat removes only an empty directory; the seeks answer as lseek
 * itself does (the oracle) on a file with a hole, wherever the file
 * system keeps holes or not. */
static void test_rmdir_and_seeks(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        struct stat s;
        mkdirat(root, "full", 0700);
        unit_write_file(root, "full/f", "f", 1);
        CHECK_EQ(ferry_fsio_rmdirat(root, "full"), ENOTEMPTY);
        CHECK_EQ(ferry_fsio_rmdirat(root, "full/f"), ENOTDIR);
        CHECK_EQ(ferry_fsio_rmdirat(root, "absent"), ENOENT);
        mkdirat(root, "full/sub", 0700);
        CHECK_EQ(ferry_fsio_rmdirat(root, "full/sub"), 0);
        CHECK(fstatat(root, "full/sub", &s, 0) < 0 && errno == ENOENT);

        int fd = openat(root, "sparse", O_RDWR | O_CREAT, 0600);
        off_t mib = 1 << 20;
        CHECK(pwrite(fd, "head", 4, 0) == 4);
        CHECK(pwrite(fd, "tail", 4, 4 * mib) == 4);
        off_t from[] = {0, 2, mib, 2 * mib, 4 * mib, 4 * mib + 4, 8 * mib};
        for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
                for (int whence = 0; whence < 2; whence++) {
                        int how = whence ? SEEK_HOLE : SEEK_DATA;
                        errno = 0;
                        off_t want = lseek(fd, from[i], how);
                        int want_err = want < 0 ? errno : 0;
                        off_t at = -7;
                        int rc =
                                whence ? ferry_fsio_seek_hole(fd, from[i], &at)
                                       : ferry_fsio_seek_data(fd, from[i], &at);
                        CHECK_EQ(rc, want_err);
                        CHECK_EQ(at, want_err ? -7 : want);
                }
        }
        off_t at;
        CHECK_EQ(ferry_fsio_seek_data(fd, 8 * mib, &at), ENXIO); /* past EOF */
        CHECK_EQ(ferry_fsio_seek_data(-1, 0, &at), EBADF);
        close(fd);
        close(root);
        unit_rmtree(dir);
}

static void test_readlinkat(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        /* around the first buffer size (256) and up to the longest target */
        size_t lens[] = {1, 255, 256, 257, 1000, 1023, 1024, 4095};
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                char *target = malloc(lens[i] + 1);
                unit_fill(target, lens[i], i + 10);
                for (size_t k = 0; k < lens[i]; k++)
                        target[k] = (char)(target[k] ? target[k] : 'n');
                target[lens[i]] = '\0';
                char name[32];
                snprintf(name, sizeof(name), "l%zu", lens[i]);
                CHECK_EQ(symlinkat(target, root, name), 0);
                char *got = NULL;
                size_t len = 0;
                CHECK_EQ(ferry_fsio_readlinkat(root, name, &got, &len), 0);
                CHECK_EQ(len, lens[i]);
                CHECK(got && !memcmp(got, target, lens[i]) && got[len] == '\0');
                free(got);
                free(target);
        }
        char *got = NULL;
        size_t len = 0;
        unit_write_file(root, "plain", "x", 1);
        CHECK_EQ(ferry_fsio_readlinkat(root, "plain", &got, &len), EINVAL);
        CHECK_EQ(ferry_fsio_readlinkat(root, "missing", &got, &len), ENOENT);
        CHECK(got == NULL);
        /* made with the wrapper, read back through it */
        CHECK_EQ(ferry_fsio_symlinkat("a\nb", root, "nl"), 0);
        CHECK_EQ(ferry_fsio_readlinkat(root, "nl", &got, &len), 0);
        CHECK(len == 3 && got && !memcmp(got, "a\nb", 3));
        free(got);
        close(root);
        unit_rmtree(dir);
}

static void test_stat_and_times(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        unit_write_file(root, "f", "hello", 5);
        int fd = openat(root, "f", O_RDWR);
        const struct ferry_time mt = {1234567890, 123456789},
                                at = {1111111111, 222222222};
        CHECK_EQ(ferry_fsio_futimens(fd, at, mt), 0);
        CHECK_EQ(ferry_fsio_fchmod(fd, 0640), 0);
        struct ferry_stat a, b;
        CHECK_EQ(ferry_fsio_fstat(fd, &a), 0);
        CHECK_EQ(ferry_fsio_statat(root, "f", &b), 0);
        CHECK(ferry_time_eq(a.mtime, mt));
        CHECK(ferry_time_eq(a.atime, at));
        CHECK_EQ(a.size, 5);
        CHECK_EQ(a.mode, S_IFREG | 0640);
        CHECK_EQ(a.nlink, 1);
        struct stat s;
        fstat(fd, &s);
        CHECK_EQ(a.ino, s.st_ino);
        CHECK_EQ(a.uid, s.st_uid);
        CHECK_EQ(a.blocks, s.st_blocks);
        /* the two ways of asking describe the same file the same way */
        CHECK(ferry_time_eq(b.mtime, a.mtime));
        CHECK(ferry_time_eq(b.ctime, a.ctime));
        CHECK_EQ(b.size, a.size);
        CHECK_EQ(b.mode, a.mode);
        CHECK_EQ(b.ino, a.ino);
        CHECK_EQ(b.nlink, a.nlink);
        CHECK_EQ(b.uid, a.uid);
        CHECK_EQ(b.gid, a.gid);
        /* regression: ferry_fsio_statat (statx: major << 32 | minor) and
         * ferry_fsio_fstat (glibc st_dev encoding) give different dev for the
         * same file when major != 0 (fixed) */
        CHECK(b.dev == a.dev);
        if (b.dev != a.dev)
                fprintf(stderr, "  statat dev %#llx, fstat dev %#llx\n",
                        (unsigned long long)b.dev, (unsigned long long)a.dev);
        ferry_fsio_close(&fd);

        /* statat does not follow symlinks; times before 1970 survive */
        symlinkat("f", root, "l");
        CHECK_EQ(ferry_fsio_statat(root, "l", &b), 0);
        CHECK(S_ISLNK(b.mode));
        const struct ferry_time before = {-2, 500000000}; /* -1.5 s */
        CHECK_EQ(ferry_fsio_utimensat(root, "l", before, before,
                                      AT_SYMLINK_NOFOLLOW),
                 0);
        CHECK_EQ(ferry_fsio_statat(root, "l", &b), 0);
        CHECK(ferry_time_eq(b.mtime, before));
        CHECK_EQ(ferry_fsio_statat(root, "f", &a), 0);
        CHECK(ferry_time_eq(a.mtime, mt)); /* the target kept its time */
        /* beyond 2262 (64-bit nanoseconds), where the file system holds it
         * (ext4 to 2446, tmpfs further): seconds and ns are kept apart */
        const struct ferry_time far = {10413792000LL, 123456789}; /* 2300 */
        CHECK_EQ(ferry_fsio_utimensat(root, "l", far, far, AT_SYMLINK_NOFOLLOW),
                 0);
        struct stat ls;
        CHECK_EQ(fstatat(root, "l", &ls, AT_SYMLINK_NOFOLLOW), 0);
        CHECK_EQ(ferry_fsio_statat(root, "l", &b), 0);
        CHECK_EQ(b.mtime.sec, (int64_t)ls.st_mtim.tv_sec);
        CHECK_EQ(b.mtime.nsec, (uint32_t)ls.st_mtim.tv_nsec);
        if (ls.st_mtim.tv_sec == far.sec)
                CHECK(ferry_time_eq(b.mtime, far));
        /* apart by less than the slack, on both sides of a second */
        CHECK(ferry_time_near((struct ferry_time){5, 999999999},
                              (struct ferry_time){6, 1}, 3));
        CHECK(!ferry_time_near((struct ferry_time){5, 999999999},
                               (struct ferry_time){6, 2}, 3));
        CHECK(ferry_time_near((struct ferry_time){-1, 0},
                              (struct ferry_time){0, 999999999}, 2000000000));
        CHECK(!ferry_time_near((struct ferry_time){INT64_MIN, 0},
                               (struct ferry_time){INT64_MAX, 0}, 2000000000));
        CHECK_EQ(ferry_fsio_fchmodat(root, "f", 0600), 0);
        CHECK_EQ(ferry_fsio_statat(root, "f", &a), 0);
        CHECK_EQ(a.mode & 07777, 0600);
        CHECK_EQ(ferry_fsio_linkat(root, "f", root, "f2"), 0);
        CHECK_EQ(ferry_fsio_statat(root, "f2", &b), 0);
        CHECK_EQ(b.ino, a.ino);
        CHECK_EQ(b.nlink, 2);
        close(root);
        unit_rmtree(dir);
}

/* ---- fault injection, in children (the table is read once) ---- */

static int child_exit(void)
{
        fflush(NULL);
        _exit(atomic_load(&unit_failed) ? 1 : 0);
}

static int child_file(void)
{
        int fd = open(getenv("UNIT_FILE"), O_RDONLY);
        if (fd < 0)
                unit_fail(__FILE__, __LINE__, "cannot open UNIT_FILE");
        return fd;
}

/* FERRY_FAULT=read:2:5: the second read fails with EIO, no other. */
static int child_fault_read(void)
{
        int fd = child_file();
        char buf[4];
        size_t got;
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), 0);
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), EIO);
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), 0);
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), 0);
        close(fd);
        return child_exit();
}

/* FERRY_FAULT=open:1:13,write:0:28,bogus:1:1,mkdir:1 */
static int child_fault_list(void)
{
        int root = open(getenv("UNIT_DIR"), O_RDONLY | O_DIRECTORY);
        int fd = -1;
        CHECK_EQ(ferry_fsio_openat(root, "w", O_WRONLY | O_CREAT, 0600, &fd),
                 EACCES);
        CHECK_EQ(ferry_fsio_openat(root, "w", O_WRONLY | O_CREAT, 0600, &fd),
                 0);
        CHECK_EQ(ferry_fsio_write(fd, "x", 1), ENOSPC); /* nth 0: every */
        CHECK_EQ(ferry_fsio_write(fd, "x", 1), ENOSPC);
        CHECK_EQ(ferry_fsio_pwrite(fd, "x", 1, 0), ENOSPC);
        CHECK_EQ(ferry_fsio_mkdirat(root, "m", 0700), 0); /* malformed */
        ferry_fsio_close(&fd);
        close(root);
        return child_exit();
}

/* No FERRY_FAULT at the first call: a later setenv changes nothing. */
static int child_fault_once(void)
{
        int fd = child_file();
        char buf[4];
        size_t got;
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), 0);
        setenv("FERRY_FAULT", "read:0:5", 1);
        CHECK_EQ(ferry_fsio_read(fd, buf, 1, &got), 0);
        close(fd);
        return child_exit();
}

/* FERRY_FAULT=rmdir:1:5,seek:2:22: the first rmdir and the second seek
 * fail; the rest reach the kernel. */
static int child_fault_rmdir_seek(void)
{
        int root = open(getenv("UNIT_DIR"), O_RDONLY | O_DIRECTORY);
        struct stat s;
        CHECK_EQ(mkdirat(root, "gone", 0700), 0);
        CHECK_EQ(ferry_fsio_rmdirat(root, "gone"), EIO);
        CHECK(fstatat(root, "gone", &s, 0) == 0); /* the fault did nothing */
        CHECK_EQ(ferry_fsio_rmdirat(root, "gone"), 0);
        CHECK(fstatat(root, "gone", &s, 0) != 0);
        int fd = openat(root, "data", O_RDONLY);
        off_t at = -1;
        CHECK_EQ(ferry_fsio_seek_data(fd, 0, &at), 0);
        CHECK_EQ(at, 0);
        at = -1;
        CHECK_EQ(ferry_fsio_seek_hole(fd, 0, &at), EINVAL);
        CHECK_EQ(at, -1);
        CHECK_EQ(ferry_fsio_seek_hole(fd, 0, &at), 0);
        CHECK_EQ(at, 8); /* the end: an 8-byte file has no hole before */
        close(fd);
        close(root);
        return child_exit();
}

/* FERRY_FAULT=rmdir:0:16: remove_tree empties the tree (unlink is not
 * hit) but cannot remove its directories. */
static int child_fault_remove_tree(void)
{
        int root = open(getenv("UNIT_DIR"), O_RDONLY | O_DIRECTORY);
        struct stat s;
        CHECK_EQ(mkdirat(root, "tree", 0700), 0);
        int t = openat(root, "tree", O_RDONLY | O_DIRECTORY);
        unit_write_file(t, "f", "x", 1);
        CHECK_EQ(ferry_fsio_remove_tree(root, "tree"), EBUSY);
        CHECK(fstatat(root, "tree", &s, 0) == 0);
        CHECK(fstatat(t, "f", &s, AT_SYMLINK_NOFOLLOW) != 0);
        close(t);
        close(root);
        return child_exit();
}

/* FERRY_CRASH=after_rename:N: survives N - 1 passes, then _exit(86). */
static int child_crash(void)
{
        int root = open(getenv("UNIT_DIR"), O_RDONLY | O_DIRECTORY);
        ferry_fsio_crashpoint("after_write"); /* another point: no effect */
        ferry_fsio_crashpoint("after_renam");
        for (int i = 1; i <= 3; i++) {
                char marker[24];
                snprintf(marker, sizeof(marker), "before%d", i);
                unit_write_file(root, marker, "", 0);
                ferry_fsio_crashpoint("after_rename");
        }
        _exit(0); /* survived: the parent sees exit 0, not 86 */
}

#ifdef FERRY_TESTING
static bool exists(int root, const char *name)
{
        struct stat s;
        return fstatat(root, name, &s, AT_SYMLINK_NOFOLLOW) == 0;
}
#endif

static void test_fault_injection(void)
{
#ifndef FERRY_TESTING
        fprintf(stderr, "SKIP (built without FERRY_TESTING: no fault "
                        "hooks)\n");
        atomic_fetch_add(&unit_skipped, 1);
        return;
#else
        char dir[PATH_MAX], file[PATH_MAX + 16], dirvar[PATH_MAX + 16];
        unit_tmpdir(dir, "fsio");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        unit_write_file(root, "data", "abcdefgh", 8);
        snprintf(file, sizeof(file), "UNIT_FILE=%s/data", dir);
        snprintf(dirvar, sizeof(dirvar), "UNIT_DIR=%s", dir);

        const char *env_read[] = {"FERRY_FAULT=read:2:5", file, NULL};
        CHECK(unit_exited(unit_run_child("fault-read", env_read), 0));

        const char *env_list[] = {
                "FERRY_FAULT=open:1:13,write:0:28,bogus:1:1,mkdir:1", dirvar,
                NULL};
        CHECK(unit_exited(unit_run_child("fault-list", env_list), 0));

        const char *env_rs[] = {"FERRY_FAULT=rmdir:1:5,seek:2:22", dirvar,
                                NULL};
        CHECK(unit_exited(unit_run_child("fault-rmdir-seek", env_rs), 0));
        const char *env_rt[] = {"FERRY_FAULT=rmdir:0:16", dirvar, NULL};
        CHECK(unit_exited(unit_run_child("fault-remove-tree", env_rt), 0));
        CHECK_EQ(unit_rmtree_at(root, "tree"), 0);

        const char *env_once[] = {"FERRY_FAULT=", file, NULL};
        CHECK(unit_exited(unit_run_child("fault-once", env_once), 0));

        const char *env_crash1[] = {"FERRY_CRASH=after_rename:1", dirvar, NULL};
        CHECK(unit_exited(unit_run_child("crash", env_crash1), 86));
        CHECK(exists(root, "before1") && !exists(root, "before2"));
        unlinkat(root, "before1", 0);

        const char *env_crash2[] = {"FERRY_CRASH=after_rename:2", dirvar, NULL};
        CHECK(unit_exited(unit_run_child("crash", env_crash2), 86));
        CHECK(exists(root, "before2") && !exists(root, "before3"));
        unlinkat(root, "before1", 0);
        unlinkat(root, "before2", 0);

        /* no count means the first pass */
        const char *env_crash0[] = {"FERRY_CRASH=after_rename", dirvar, NULL};
        CHECK(unit_exited(unit_run_child("crash", env_crash0), 86));
        CHECK(exists(root, "before1") && !exists(root, "before2"));

        /* an unknown point never fires */
        const char *env_other[] = {"FERRY_CRASH=before_commit:1", dirvar, NULL};
        CHECK(unit_exited(unit_run_child("crash", env_other), 0));
        CHECK(exists(root, "before3"));
        close(root);
        unit_rmtree(dir);
#endif
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        if (argc > 1) {
                if (!strcmp(argv[1], "fault-read"))
                        return child_fault_read();
                if (!strcmp(argv[1], "fault-list"))
                        return child_fault_list();
                if (!strcmp(argv[1], "fault-rmdir-seek"))
                        return child_fault_rmdir_seek();
                if (!strcmp(argv[1], "fault-remove-tree"))
                        return child_fault_remove_tree();
                if (!strcmp(argv[1], "fault-once"))
                        return child_fault_once();
                if (!strcmp(argv[1], "crash"))
                        return child_crash();
                fprintf(stderr, "unknown child mode '%s'\n", argv[1]);
                return 2;
        }
        RUN(test_errors_are_positive_errno);
        RUN(test_pread_pwrite_file);
        RUN(test_short_reads_loop);
        RUN(test_short_writes_loop);
        RUN(test_path_longer_than_path_max);
        RUN(test_symlinks_never_followed);
        RUN(test_make_dirs);
        RUN(test_remove_tree);
        RUN(test_rmdir_and_seeks);
        RUN(test_readlinkat);
        RUN(test_stat_and_times);
        RUN(test_fault_injection);
        RUN(test_symlinks_without_openat2); /* last: it stays on */
        return unit_done();
}
