/*
 * slowfs.h - what the parts of bench/slowfs share: its state (struct
 * slowfs), the counters of --stats-file, and the helpers every operation
 * uses (the added latency, paths relative to SOURCE_DIR). slowfs.c owns
 * the read-only passthrough, the options and main; slowfs_rw.c the
 * operations of --writable; slowfs_stats.c the writing of --stats-file.
 */
#ifndef SLOWFS_H
#define SLOWFS_H

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

/* The counters of --stats-file, in the order FILE lists them. */
enum stat_id {
        ST_OPENS,       /* open and create */
        ST_READS,       /* read requests */
        ST_READ_BYTES,  /* bytes they returned */
        ST_GETATTRS,    /* lookup/getattr */
        ST_READDIRS,    /* readdir requests */
        ST_WRITES,      /* write requests (--writable) */
        ST_WRITE_BYTES, /* bytes they wrote */
        ST_FSYNCS,      /* fsync and fsyncdir */
        ST_COUNT
};

struct slowfs {
        int src;                  /* directory fd of SOURCE_DIR */
        atomic_llong latency_ns;  /* added to every round trip */
        const char *latency_file; /* --latency-file, or NULL */
        const char *stats_file;   /* --stats-file, or NULL */
        atomic_ullong stats[ST_COUNT];
        unsigned long long stats_seq; /* rewrites of stats_file so far */
        pthread_mutex_t stats_lock;   /* one writer of stats_file at a time */
        unsigned threads;             /* max worker threads of the FUSE loop */
        unsigned max_background;      /* kernel's async request limit */
        bool writable;                /* --writable: a read-write passthrough */
};

/* The state of the mount, in an operation's thread. */
static inline struct slowfs *slowfs_fs(void)
{
        return fuse_get_context()->private_data;
}

/* Adds n to a --stats-file counter. */
static inline void slowfs_count(enum stat_id id, unsigned long long n)
{
        atomic_fetch_add_explicit(&slowfs_fs()->stats[id], n,
                                  memory_order_relaxed);
}

/* Sleeps the latency of one round trip. */
static inline void slowfs_delay(void)
{
        long long ns = atomic_load(&slowfs_fs()->latency_ns);
        struct timespec left = {.tv_sec = ns / 1000000000,
                                .tv_nsec = ns % 1000000000};
        while ((left.tv_sec || left.tv_nsec) && nanosleep(&left, &left) < 0 &&
               errno == EINTR)
                ;
}

/* FUSE paths start with '/'; the source is opened relative to its fd. */
static inline const char *slowfs_rel(const char *path)
{
        return path[1] ? path + 1 : ".";
}

/* --stats-file: starts the thread that rewrites the file (in the daemon,
 * from init); writes the last one, "final 1" (at unmount, from destroy). */
void slowfs_stats_start(struct slowfs *fs);
void slowfs_stats_final(struct slowfs *fs);

/* --writable: adds the operations that write to ops. */
void slowfs_add_rw_ops(struct fuse_operations *ops);

/* Between fuse_mount() and the loop: the kernel may send the lookups and
 * readdirs of one directory in parallel (slowfs_init.c). 0 or -errno. */
int slowfs_parallel_dirops(struct fuse *f);

#endif
