/*
 * scan_int.h - what the scanner pool (scan.c) and the reading of one
 * directory (scan_dir.c) share. Private to those two files.
 *
 * Three kinds of work flow through the pool, all under ferry_scan.lock:
 *   a pending directory (the stack): popped by a thread, which opens and
 *     reads it (scan_read_dir) and cuts its names into stat chunks;
 *   a stat chunk (the chunk queue, bounded by chunk_cap): some names of
 *     one open directory, stat'ed by any thread (scan_run_chunk) and sent
 *     as one listing;
 *   the end: the stack and the queue empty, no thread busy: MSG_SCAN_DONE.
 */
#ifndef FERRY_SCAN_INT_H
#define FERRY_SCAN_INT_H

#include "buf.h"
#include "fsio.h"
#include "scan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Names per stat chunk (at most cfg.chunk): a directory of n entries is
 * stat'ed by up to n / FERRY_SCAN_STAT_CHUNK threads at once, each chunk
 * one listing for the coordinator (a build may override it). */
#ifndef FERRY_SCAN_STAT_CHUNK
#define FERRY_SCAN_STAT_CHUNK 8
#endif

/* A stat slower than this on average (ferry_scan.stat_ns) is a round trip
 * worth spreading; below it (a local disk, a warm cache) each chunk costs
 * the coordinator more than it saves, and directories are read whole by
 * their reader, cfg.chunk entries per listing. */
#define FERRY_SCAN_SLOW_NS 50000

struct pending_dir {
        struct pending_dir *next;
        struct ferry_stat st;
        bool other_fs; /* -x: a mount point, listed empty, not read */
        size_t len;
        char path[];
};

struct scan_dir; /* a directory being read (scan_dir.c) */

/* Names of one open directory still to stat (scan_dir.c makes and frees
 * them); names grows as they are added, up to cap of them. */
struct stat_chunk {
        struct stat_chunk *next; /* the pool's queue */
        struct scan_dir *dir;    /* holds one of its references */
        size_t seq;              /* its place in the directory */
        size_t n, cap;           /* names, room for names */
        char *names;             /* n NUL-terminated names, owned */
        size_t len, names_cap;   /* bytes used, bytes allocated */
};

struct ferry_scan {
        struct ferry_scan_cfg cfg;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct pending_dir *stack;
        size_t n_stack;
        struct stat_chunk *chunks, *chunks_tail;
        size_t n_chunks, chunk_cap; /* queued, at most queued */
        size_t stat_chunk;          /* names per stat chunk */
        _Atomic uint64_t stat_ns;   /* a stat's time, moving average */
        unsigned busy;              /* threads holding a directory or a chunk */
        unsigned waiting;           /* threads waiting for work */
        unsigned limit;     /* ferry_scan_set_limit: busy at most this */
        unsigned open_dirs; /* directories open: at most cfg.threads */
        bool finished;
        unsigned n_threads;   /* started so far, on demand */
        unsigned cpu_threads; /* while stats are cheap: 2 per CPU */
        pthread_t *threads;   /* cfg.threads slots */
        uint64_t root_dev;    /* SRC's file system (-x) */
};

/* One thread's scratch space. */
struct scan_reader {
        struct ferry_scan *sc;
        struct ferry_buf rel; /* dir path + '/' + name */
};

/* scan.c: the pool's queues. push_dirs takes the list; offer_chunk takes
 * the chunk and returns true, or false when the queue is full (the caller
 * keeps it and stats it itself: back-pressure). */
void scan_push_dirs(struct ferry_scan *sc, struct pending_dir *list);
bool scan_offer_chunk(struct ferry_scan *sc, struct stat_chunk *c);
/* The first chunk of dir still queued, taken back by its reader (NULL:
 * none left; other threads have the rest). */
struct stat_chunk *scan_reclaim_chunk(struct ferry_scan *sc,
                                      const struct scan_dir *dir);
void scan_dir_closed(struct ferry_scan *sc);
/* Whether stats are round trips worth spreading over the pool (or more
 * threads): their moving average above FERRY_SCAN_SLOW_NS. */
bool scan_stats_slow(struct ferry_scan *sc);
/* Whether to try again after err; sleeps the copy's backoff first. */
bool scan_retry(const struct ferry_scan_cfg *cfg, int err, unsigned *attempt);
struct pending_dir *scan_pending_new(const char *path, size_t len,
                                     const struct ferry_stat *st);

/* scan_dir.c: reads dir (takes it), sends its listings, pushes its
 * subdirectories, and hands out or stats its chunks. */
void scan_read_dir(struct scan_reader *r, struct pending_dir *dir);
/* Stats the chunk's names and sends them as a listing; frees c. */
void scan_run_chunk(struct scan_reader *r, struct stat_chunk *c);
/* A chunk left in the queue after a stop: freed unread, with its share of
 * the directory. */
void scan_drop_chunk(struct stat_chunk *c);

#endif
