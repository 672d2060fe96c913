/*
 * slowfs_stats.c - --stats-file of bench/slowfs: a thread of the daemon
 * rewrites FILE from the counters (struct slowfs's stats, which every
 * operation bumps with slowfs_count) about every 100 ms while they
 * change and at once on SIGUSR1; slowfs_stats_final writes the totals
 * with "final 1" at unmount. Each rewrite is FILE.tmp renamed over FILE,
 * so a reader never sees half of one. The format is in slowfs.c's
 * comment and bench/README.md.
 */
#define _GNU_SOURCE

#include "slowfs.h"

#include <limits.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const stat_names[ST_COUNT] = {
        "opens",    "reads",  "read_bytes",  "getattrs",
        "readdirs", "writes", "write_bytes", "fsyncs",
};

/* SIGUSR1 wakes the stats writer (sem_post is async-signal-safe). */
static sem_t stats_wake;

static void on_usr1(int sig)
{
        (void)sig;
        sem_post(&stats_wake);
}

/* Rewrites stats_file from the counters: FILE.tmp, then renamed over. */
static void write_stats(struct slowfs *fs, const unsigned long long *v,
                        int final)
{
        char tmp[PATH_MAX];
        pthread_mutex_lock(&fs->stats_lock);
        if (snprintf(tmp, sizeof(tmp), "%s.tmp", fs->stats_file) >=
            (int)sizeof(tmp))
                goto out;
        FILE *f = fopen(tmp, "we");
        if (!f)
                goto out;
        fprintf(f, "pid %ld\nseq %llu\nfinal %d\n", (long)getpid(),
                ++fs->stats_seq, final);
        for (int i = 0; i < ST_COUNT; i++)
                fprintf(f, "%s %llu\n", stat_names[i], v[i]);
        if (fclose(f) == 0)
                rename(tmp, fs->stats_file);
        else
                unlink(tmp);
out:
        pthread_mutex_unlock(&fs->stats_lock);
}

static void snapshot(struct slowfs *fs, unsigned long long *v)
{
        for (int i = 0; i < ST_COUNT; i++)
                v[i] = atomic_load(&fs->stats[i]);
}

/* Every ~100 ms when a counter changed, at once on SIGUSR1. */
static void *stats_writer(void *arg)
{
        struct slowfs *fs = arg;
        unsigned long long last[ST_COUNT], now[ST_COUNT];
        snapshot(fs, last);
        write_stats(fs, last, 0);
        for (;;) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100 * 1000 * 1000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                bool woken = sem_timedwait(&stats_wake, &ts) == 0;
                snapshot(fs, now);
                if (woken || memcmp(now, last, sizeof(now)) != 0)
                        write_stats(fs, now, 0);
                memcpy(last, now, sizeof(now));
        }
        return NULL;
}

void slowfs_stats_start(struct slowfs *fs)
{
        pthread_t t;
        struct sigaction sa = {.sa_handler = on_usr1};
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sem_init(&stats_wake, 0, 0) != 0 ||
            sigaction(SIGUSR1, &sa, NULL) != 0)
                return;
        if (pthread_create(&t, NULL, stats_writer, fs) == 0)
                pthread_detach(t);
}

/* Unmounted: the last rewrite, with the totals ("final 1"). */
void slowfs_stats_final(struct slowfs *fs)
{
        unsigned long long v[ST_COUNT];
        snapshot(fs, v);
        write_stats(fs, v, 1);
}
