/*
 * unit.h - the unit tests' harness: checks, temp dirs and child processes.
 *
 * Calling sequence of a test file:
 *
 *   #define _GNU_SOURCE
 *   #include "unit.h"
 *   static void test_something(void) { CHECK(1 + 1 == 2); ... }
 *   int main(int argc, char **argv)
 *   {
 *           unit_init(argc, argv);           // may run a child mode instead
 *           RUN(test_something);
 *           return unit_done();              // "N passed, N failed" line
 *   }
 *
 * A failed check prints file:line and the expression on stderr and counts;
 * the test goes on. The counters are atomic, so checks may run in threads.
 * EXPECT_FAIL marks a known engine bug (git's test_expect_failure): while
 * the check fails it prints "SKIP (known bug: ...)" and counts as skipped;
 * once it passes it says so, so the marker can be removed.
 *
 * Each test makes its own directory with unit_tmpdir() (mkdtemp under
 * $TMPDIR or /tmp) and removes it with unit_rmtree(), which walks with
 * descriptors and so also removes trees deeper than PATH_MAX.
 */
#ifndef FERRY_UNIT_H
#define FERRY_UNIT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int unit_passed, unit_failed, unit_skipped;
static const char *unit_self; /* argv[0]: the test binary, for children */
static const char *unit_current = "";

static inline void unit_fail(const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static inline void unit_fail(const char *file, int line, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s:%d: %s: FAIL: %s\n", file, line, unit_current, msg);
        atomic_fetch_add(&unit_failed, 1);
}

#define CHECK(expr)                                                            \
        do {                                                                   \
                if (expr)                                                      \
                        atomic_fetch_add(&unit_passed, 1);                     \
                else                                                           \
                        unit_fail(__FILE__, __LINE__, "%s", #expr);            \
        } while (0)

/* Integer comparison that prints both values. */
#define CHECK_EQ(a, b)                                                         \
        do {                                                                   \
                long long a_ = (long long)(a), b_ = (long long)(b);            \
                if (a_ == b_)                                                  \
                        atomic_fetch_add(&unit_passed, 1);                     \
                else                                                           \
                        unit_fail(__FILE__, __LINE__,                          \
                                  "%s == %s (%lld != %lld)", #a, #b, a_, b_);  \
        } while (0)

#define CHECK_STR(a, b)                                                        \
        do {                                                                   \
                const char *a_ = (a), *b_ = (b);                               \
                if (a_ && b_ && !strcmp(a_, b_))                               \
                        atomic_fetch_add(&unit_passed, 1);                     \
                else                                                           \
                        unit_fail(__FILE__, __LINE__,                          \
                                  "%s == %s (\"%s\" != \"%s\")", #a, #b,       \
                                  a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
        } while (0)

#define CHECK_MEM(a, b, n)                                                     \
        do {                                                                   \
                if (!memcmp((a), (b), (n)))                                    \
                        atomic_fetch_add(&unit_passed, 1);                     \
                else                                                           \
                        unit_fail(__FILE__, __LINE__, "memcmp(%s, %s, %s)",    \
                                  #a, #b, #n);                                 \
        } while (0)

/* A check that fails because of a known engine bug; see the top comment. */
#define EXPECT_FAIL(expr, bug)                                                 \
        do {                                                                   \
                if (expr) {                                                    \
                        fprintf(stderr,                                        \
                                "%s:%d: %s: known bug no longer reproduces "   \
                                "(remove EXPECT_FAIL): %s\n",                  \
                                __FILE__, __LINE__, unit_current, bug);        \
                        atomic_fetch_add(&unit_passed, 1);                     \
                } else {                                                       \
                        fprintf(stderr, "%s:%d: %s: SKIP (known bug: %s)\n",   \
                                __FILE__, __LINE__, unit_current, bug);        \
                        atomic_fetch_add(&unit_skipped, 1);                    \
                }                                                              \
        } while (0)

/* Runs one test function with its name in the failure messages. */
#define RUN(fn)                                                                \
        do {                                                                   \
                unit_current = #fn;                                            \
                int failed_ = atomic_load(&unit_failed);                       \
                fn();                                                          \
                fprintf(stderr, "%-4s %s\n",                                   \
                        atomic_load(&unit_failed) == failed_ ? "ok" : "FAIL",  \
                        #fn);                                                  \
        } while (0)

static inline void unit_init(int argc, char **argv)
{
        (void)argc;
        unit_self = argv[0];
        setvbuf(stderr, NULL, _IOLBF, 0);
}

/* Prints the closing line; the exit status of main. */
static inline int unit_done(void)
{
        int f = atomic_load(&unit_failed);
        printf("%d passed, %d failed, %d skipped\n", atomic_load(&unit_passed),
               f, atomic_load(&unit_skipped));
        fflush(stdout);
        return f ? 1 : 0;
}

/* Makes a fresh directory; path gets PATH_MAX bytes. Aborts the test
 * program on failure: nothing can be tested without it. */
static inline void unit_tmpdir(char *path, const char *tag)
{
        const char *base = getenv("TMPDIR");
        if (!base || !*base)
                base = "/tmp";
        snprintf(path, PATH_MAX, "%s/ferry-unit-%s-XXXXXX", base, tag);
        if (!mkdtemp(path)) {
                fprintf(stderr, "cannot create temp dir '%s': %s\n", path,
                        strerror(errno));
                exit(2);
        }
}

static inline int unit_rmtree_at(int parent, const char *name)
{
        if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -1;
        int fd = openat(parent, name,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        fchmod(fd, 0700); /* tests may leave read-only dirs */
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -1;
        }
        struct dirent *de;
        int rc = 0;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        rc |= unit_rmtree_at(dirfd(d), de->d_name);
        closedir(d);
        return unlinkat(parent, name, AT_REMOVEDIR) ? -1 : rc;
}

/* Removes the tree at path (made by unit_tmpdir). */
static inline void unit_rmtree(const char *path)
{
        if (unit_rmtree_at(AT_FDCWD, path))
                fprintf(stderr, "warning: cannot remove '%s' fully: %s\n", path,
                        strerror(errno));
}

/* Writes len bytes to at/name (created or truncated, mode 0644). */
static inline int unit_write_file(int at, const char *name, const void *buf,
                                  size_t len)
{
        int fd = openat(at, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0644);
        if (fd < 0)
                return -1;
        size_t done = 0;
        while (done < len) {
                ssize_t n = write(fd, (const char *)buf + done, len - done);
                if (n < 0) {
                        close(fd);
                        return -1;
                }
                done += (size_t)n;
        }
        return close(fd);
}

/* Reads all of at/name into a malloc'ed buffer (caller frees); NULL when
 * the file cannot be read. */
static inline char *unit_read_file(int at, const char *name, size_t *len)
{
        int fd = openat(at, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        size_t cap = 4096, n = 0;
        char *buf = malloc(cap);
        for (;;) {
                if (!buf)
                        break;
                if (n == cap) {
                        char *p = realloc(buf, cap * 2);
                        if (!p) {
                                free(buf);
                                buf = NULL;
                                break;
                        }
                        buf = p;
                        cap *= 2;
                }
                ssize_t r = read(fd, buf + n, cap - n);
                if (r < 0) {
                        free(buf);
                        buf = NULL;
                        break;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        *len = n;
        return buf;
}

/* A small deterministic generator (splitmix64) for fixtures. */
static inline uint64_t unit_rand(uint64_t *state)
{
        uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static inline void unit_fill(void *buf, size_t len, uint64_t seed)
{
        unsigned char *p = buf;
        for (size_t i = 0; i < len; i++)
                p[i] = (unsigned char)(unit_rand(&seed) >> 56);
}

static inline double unit_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void unit_sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) && errno == EINTR)
                ;
}

/*
 * Runs this test binary again as a child with argv[1] = mode and the given
 * environment additions ("NAME=value", NULL-terminated; NULL for none),
 * and returns its wait status, or -1. The child starts fresh, so state that
 * a module reads once (fsio's fault table) is read from this environment.
 */
static inline int unit_run_child(const char *mode, const char *const *env)
{
        extern char **environ;
        size_t n_old = 0, n_new = 0;
        while (environ[n_old])
                n_old++;
        while (env && env[n_new])
                n_new++;
        char **envp = calloc(n_old + n_new + 1, sizeof(*envp));
        if (!envp)
                return -1;
        size_t k = 0;
        for (size_t i = 0; i < n_new; i++)
                envp[k++] = (char *)env[i];
        for (size_t i = 0; i < n_old; i++) {
                bool replaced = false; /* by an addition of the same name */
                for (size_t j = 0; j < n_new && !replaced; j++) {
                        size_t len = strcspn(env[j], "=") + 1;
                        replaced = !strncmp(environ[i], env[j], len);
                }
                if (!replaced)
                        envp[k++] = environ[i];
        }
        char *args[] = {(char *)unit_self, (char *)mode, NULL};
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                execve("/proc/self/exe", args, envp);
                _exit(127);
        }
        free(envp);
        if (pid < 0)
                return -1;
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return status;
}

/* True when status is a normal exit with code. */
static inline bool unit_exited(int status, int code)
{
        return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

#endif
