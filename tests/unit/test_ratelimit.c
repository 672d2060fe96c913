/*
 * test_ratelimit.c - the token bucket and pause gate (ratelimit.h), and
 * the parsing of --bwlimit and --window and the window's clock
 * (control.c). Times are checked from below only (never "fast enough"):
 * a shared machine may be slow, never faster than the bucket allows.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "control.h"
#include "ratelimit.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static double mono(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_parse_rate(void)
{
        uint64_t r = 7;
        CHECK(!ferry_parse_rate("0", &r) && r == 0);
        CHECK(!ferry_parse_rate("1M", &r) && r == 1048576);
        CHECK(!ferry_parse_rate("512k", &r) && r == 524288);
        CHECK(!ferry_parse_rate("1.5G", &r) && r == 1610612736ull);
        CHECK(!ferry_parse_rate("4096", &r) && r == 4096);
        const char *bad[] = {"12Q", "",    "-1",   "1MB",  "M",
                             " 1M", "100", "1e30", "0x10", "1K2"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK(ferry_parse_rate(bad[i], &r) == -1);
}

static void test_parse_window(void)
{
        int a = 0, b = 0;
        CHECK(!ferry_parse_window("19:00-07:00", &a, &b) && a == 1140 &&
              b == 420);
        CHECK(!ferry_parse_window("7:30-8:00", &a, &b) && a == 450 && b == 480);
        const char *bad[] = {"25:00-1",    "10:00-10:00",  "12:00",
                             "7:0-8:00",   "12:60-13:00",  "-",
                             "07:00-",     "07:00-08:00x", "007:00-08:00",
                             "+7:00-08:00"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK(ferry_parse_window(bad[i], &a, &b) == -1);
}

static void test_window_inside(void)
{
        CHECK(ferry_window_inside(-1, -1, 600));
        CHECK(ferry_window_inside(600, 720, 600));  /* start: inside */
        CHECK(!ferry_window_inside(600, 720, 720)); /* end: outside */
        CHECK(!ferry_window_inside(600, 720, 599));
        CHECK(ferry_window_inside(1140, 420, 1140)); /* wraps midnight */
        CHECK(ferry_window_inside(1140, 420, 0));
        CHECK(ferry_window_inside(1140, 420, 419));
        CHECK(!ferry_window_inside(1140, 420, 420));
        CHECK(!ferry_window_inside(1140, 420, 720));
#ifdef FERRY_TESTING
        setenv("FERRY_TEST_CLOCK", "06:59", 1);
        CHECK(ferry_window_now() == 419);
        unsetenv("FERRY_TEST_CLOCK");
#endif
        int m = ferry_window_now();
        CHECK(m >= 0 && m < 1440);
}

struct taker {
        struct ferry_rate *r;
        atomic_bool *stop;
        uint64_t bytes, chunk;
        int rc;
        double end;
};

static void *take_all(void *arg)
{
        struct taker *t = arg;
        for (uint64_t n = 0; n < t->bytes && !t->rc; n += t->chunk)
                t->rc = ferry_rate_take(t->r, t->chunk, t->stop);
        t->end = mono();
        return NULL;
}

/* 4 threads of 1 MiB each at 8 MiB/s: together no faster than the rate
 * (the first 50 ms of burst aside), each charged once per chunk. */
static void test_shared_rate(void)
{
        struct ferry_rate *r;
        CHECK(!ferry_rate_new(&r));
        CHECK(!ferry_rate_take(r, 1 << 30, NULL)); /* no limit: at once */
        ferry_rate_set(r, 8u << 20, false);
        atomic_bool stop = false;
        struct taker t[4];
        pthread_t th[4];
        double t0 = mono();
        for (int i = 0; i < 4; i++) {
                t[i] = (struct taker){r, &stop, 1u << 20, 128u << 10, 0, 0};
                CHECK(!pthread_create(&th[i], NULL, take_all, &t[i]));
        }
        double last = t0;
        for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                CHECK(t[i].rc == 0);
                if (t[i].end > last)
                        last = t[i].end;
        }
        /* 4 MiB at 8 MiB/s: 0.5 s, less the bucket's 50 ms and a chunk */
        printf("# 4 MiB at 8 MiB/s took %.3f s\n", last - t0);
        CHECK(last - t0 >= 0.40);
        ferry_rate_free(r);
}

/* A paused taker waits until the resume, and a stop wakes a paused or a
 * throttled one within its slice (100 ms), with ECANCELED. */
static void test_pause_and_stop(void)
{
        struct ferry_rate *r;
        CHECK(!ferry_rate_new(&r));
        ferry_rate_set(r, 0, true);
        atomic_bool stop = false;
        struct taker t = {r, &stop, 1, 1, 0, 0};
        pthread_t th;
        double t0 = mono();
        CHECK(!pthread_create(&th, NULL, take_all, &t));
        usleep(300000);
        ferry_rate_set(r, 0, false);
        pthread_join(th, NULL);
        CHECK(t.rc == 0 && t.end - t0 >= 0.29);

        ferry_rate_set(r, 0, true);
        t = (struct taker){r, &stop, 1, 1, 0, 0};
        CHECK(!pthread_create(&th, NULL, take_all, &t));
        usleep(100000);
        double s0 = mono();
        atomic_store(&stop, true);
        pthread_join(th, NULL);
        CHECK(t.rc == ECANCELED);
        printf("# a paused taker saw the stop after %.3f s\n", t.end - s0);

        atomic_store(&stop, false);
        ferry_rate_set(r, 1024, false); /* 1 GiB at 1 KiB/s: forever */
        t = (struct taker){r, &stop, 1u << 30, 1u << 30, 0, 0};
        CHECK(!pthread_create(&th, NULL, take_all, &t));
        usleep(100000);
        atomic_store(&stop, true);
        pthread_join(th, NULL);
        CHECK(t.rc == ECANCELED);
        ferry_rate_free(r);
        CHECK(!ferry_rate_take(NULL, 1, NULL));
}

/* The control file: what is written is read back; a torn one is EAGAIN. */
static void test_control_file(void)
{
        char dir[PATH_MAX], path[PATH_MAX + 8];
        unit_tmpdir(dir, "control");
        snprintf(path, sizeof(path), "%s/c", dir);
        struct ferry_control c = {42, 3, 1048576, 2, true, 1140, 420}, d;
        CHECK(ferry_control_load(path, &d) == ENOENT);
        CHECK(!ferry_control_write(path, &c));
        CHECK(!ferry_control_load(path, &d));
        CHECK(d.pid == 42 && d.serial == 3 && d.bwlimit == 1048576 &&
              d.jobs == 2 && d.paused && d.window_start == 1140 &&
              d.window_end == 420);
        CHECK(!truncate(path, 40));
        CHECK(ferry_control_load(path, &d) == EAGAIN);
        unit_rmtree(dir);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_parse_rate);
        RUN(test_parse_window);
        RUN(test_window_inside);
        RUN(test_shared_rate);
        RUN(test_pause_and_stop);
        RUN(test_control_file);
        return unit_done();
}
