/*
 * test_fdlimit.c - the descriptor budget (src/fdlimit.h): the
 * fit of workers and scan threads under a limit, raising the soft limit
 * (in a child: a process's limits are its own), counting what is open,
 * and fsio's bounded wait for a descriptor.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "copy.h"
#include "fdlimit.h"
#include "fsio.h"
#include "coord.h"
#include "scan.h"

#include <sys/resource.h>

static unsigned long need(unsigned long in_use, unsigned jobs,
                          unsigned scanners)
{
        return in_use + FERRY_COORD_FDS + jobs * FERRY_COPIER_FDS +
               scanners * FERRY_SCAN_FDS;
}

static void test_fits_as_asked(void)
{
        struct ferry_fd_fit f;
        ferry_fdlimit_fit(1u << 20, 10, 32, 16, &f);
        CHECK(!f.reduced && !f.tight);
        CHECK_EQ(f.jobs, 32);
        CHECK_EQ(f.scanners, 16);
        CHECK_EQ(f.need, need(10, 32, 16));
        /* exactly enough is enough */
        ferry_fdlimit_fit(need(10, 32, 16), 10, 32, 16, &f);
        CHECK(!f.reduced);
}

/* The most workers that fit, and not one more. */
static void check_fit(unsigned long limit, unsigned long in_use, unsigned jobs,
                      unsigned scanners)
{
        struct ferry_fd_fit f;
        ferry_fdlimit_fit(limit, in_use, jobs, scanners, &f);
        CHECK(f.reduced);
        CHECK(!f.tight);
        CHECK_EQ(f.need, need(in_use, jobs, scanners));
        CHECK(f.jobs >= 1 && f.jobs <= jobs);
        unsigned s = (f.jobs + 1) / 2 < scanners ? (f.jobs + 1) / 2 : scanners;
        CHECK_EQ(f.scanners, s);
        CHECK(need(in_use, f.jobs, f.scanners) <= limit);
        if (f.jobs < jobs) {
                unsigned k = f.jobs + 1;
                unsigned s1 = (k + 1) / 2 < scanners ? (k + 1) / 2 : scanners;
                CHECK(need(in_use, k, s1) > limit);
        }
}

static void test_reduces_to_the_limit(void)
{
        check_fit(1024, 10, 512, 16); /* -j 512 at a soft limit of 1024 */
        check_fit(128, 10, 32, 16);   /* the default -j at 128 */
        check_fit(32, 10, 32, 16);
        check_fit(24, 9, 32, 16);
        check_fit(40, 9, 1, 16); /* -j 1: fewer scan threads only */
        struct ferry_fd_fit f;
        ferry_fdlimit_fit(1024, 10, 512, 16, &f);
        CHECK_EQ(f.scanners, 16); /* many workers keep every scanner */
        ferry_fdlimit_fit(40, 9, 1, 16, &f);
        CHECK_EQ(f.jobs, 1);
        CHECK_EQ(f.scanners, 1);
}

static void test_too_low_for_one(void)
{
        struct ferry_fd_fit f;
        ferry_fdlimit_fit(12, 9, 32, 16, &f);
        CHECK(f.reduced && f.tight);
        CHECK_EQ(f.jobs, 1);
        CHECK_EQ(f.scanners, 1);
        ferry_fdlimit_fit(0, 0, 0, 0, &f); /* zeros mean one each */
        CHECK_EQ(f.jobs, 1);
        CHECK_EQ(f.scanners, 1);
}

static void test_in_use_counts(void)
{
        unsigned long before = ferry_fdlimit_in_use();
        int fds[3];
        for (int i = 0; i < 3; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        CHECK_EQ(ferry_fdlimit_in_use(), before + 3);
        for (int i = 0; i < 3; i++)
                close(fds[i]);
        CHECK_EQ(ferry_fdlimit_in_use(), before);
}

/* Runs fn in a child, whose limits it may change; its exit code is the
 * number of failed checks there. */
static void in_child(int (*fn)(void))
{
        pid_t pid = fork();
        if (pid == 0)
                _exit(fn());
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int raise_child(void)
{
        int bad = 0;
        struct rlimit rl = {64, 256}, now;
        if (setrlimit(RLIMIT_NOFILE, &rl))
                return 1;
        bad += ferry_fdlimit_raise() != 256;
        bad += getrlimit(RLIMIT_NOFILE, &now) || now.rlim_cur != 256;
        /* at the hard limit already: nothing changes, nothing is lowered */
        bad += ferry_fdlimit_raise() != 256;
        bad += getrlimit(RLIMIT_NOFILE, &now) || now.rlim_cur != 256 ||
               now.rlim_max != 256;
        if (bad)
                fprintf(stderr, "raise_child: %d checks failed\n", bad);
        return bad;
}

static void test_raise(void)
{
        in_child(raise_child);
}

/* ENOENT is no descriptor shortage: no wait. EMFILE waits until the
 * bound (FERRY_FD_WAIT_MS in a test build), then every later wait gives
 * up at once until the reset. */
static int wait_child(void)
{
        int bad = 0;
        setenv("FERRY_FD_WAIT_MS", "50", 1);
        ferry_fsio_fd_reset();
        int64_t since = 0;
        bad += ferry_fsio_fd_wait(&since, ENOENT);
        bad += since != 0;
        unsigned n = 0;
        while (ferry_fsio_fd_wait(&since, EMFILE) && n < 100000)
                n++;
        bad += n == 0 || n == 100000;
        bad += ferry_fsio_fd_waits() != 1;
        int64_t again = 0;
        bad += ferry_fsio_fd_wait(&again, ENFILE); /* latched */
        ferry_fsio_fd_reset();
        again = 0;
        bad += !ferry_fsio_fd_wait(&again, ENFILE);
        if (bad)
                fprintf(stderr, "wait_child: %d checks failed\n", bad);
        return bad;
}

static void test_fd_wait(void)
{
#ifdef FERRY_TESTING
        in_child(wait_child);
#else
        (void)wait_child;
#endif
}

/* A real EMFILE: with the limit at what is open, ferry_fsio_openat waits
 * its moment, then returns EMFILE (it never fails with another errno). */
static int openat_child(void)
{
        /* the lowest free descriptor: none below it is free */
        int dev = open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct rlimit rl = {(rlim_t)dev + 1, (rlim_t)dev + 1};
        if (dev < 0 || setrlimit(RLIMIT_NOFILE, &rl))
                return 1;
        int fd = -1;
        int rc = ferry_fsio_openat(dev, "null", O_RDONLY, 0, &fd);
        if (rc != EMFILE) {
                fprintf(stderr, "openat_child: got %d, not EMFILE\n", rc);
                return 1;
        }
        return 0;
}

static void test_openat_emfile(void)
{
        in_child(openat_child);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_fits_as_asked);
        RUN(test_reduces_to_the_limit);
        RUN(test_too_low_for_one);
        RUN(test_in_use_counts);
        RUN(test_raise);
        RUN(test_fd_wait);
        RUN(test_openat_emfile);
        return unit_done();
}
