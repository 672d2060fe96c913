/*
 * scan.h - the scanner pool: walks SRC in parallel and sends each
 * directory's entries to the coordinator's inbox as listings, a directory
 * in several (its stats spread over the pool, scan_dir.c).
 *
 * Calling sequence:
 *   ferry_scan_start(&cfg, &sc, &e); one thread starts at SRC's root,
 *                                    more on demand, up to cfg.threads
 *   ... the coordinator pops MSG_LISTING messages, then one MSG_SCAN_DONE ...
 *   ferry_scan_join(sc);             after MSG_SCAN_DONE or a stop request
 *
 * A directory's listings: the first to be queued has first (and dir_st);
 * the last to be queued has last (only when the directory was read whole
 * and no stop cut it short), seen (its entries in all its listings) and
 * open_err / open_step (what could not be read). The first is always
 * queued before any listing of a subdirectory, so the coordinator knows
 * a parent before its children.
 *
 * ferry's own files (cfg.own: the manifest and its companions) are left
 * out of the listings. A directory that is DST's root (a bind mount of DST
 * inside SRC, or DST a bind mount of a directory of SRC) is not read: its
 * one listing has first set, no entries and open_err ELOOP, and the
 * coordinator stops the run.
 */
#ifndef FERRY_SCAN_H
#define FERRY_SCAN_H

#include "overlap.h"
#include "queue.h"
#include "select.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Descriptors the scan holds at most per thread of cfg.threads: an open
 * directory (at most cfg.threads are open, each shared by the threads
 * that stat its chunks), and while one deeper than PATH_MAX is opened,
 * two of the walk. */
#define FERRY_SCAN_FDS 2

struct ferry_scan_cfg {
        int srcfd;                         /* borrowed, open on SRC */
        const struct ferry_select *select; /* borrowed; NULL: all */
        const struct ferry_own *own;       /* borrowed, may be NULL: left out */
        struct ferry_queue *inbox;         /* borrowed */
        atomic_bool *stop;                 /* borrowed */
        unsigned threads;
        unsigned retries; /* of a transient error, as the copy's --retries */
        size_t chunk;     /* entries per listing, at most */
        bool one_file_system; /* -x: mount points listed empty (scan.c) */
        bool spread_always;   /* spread the stats however fast (tests) */
};

struct ferry_scan;

/* 0, or an errno: SRC's own fstat failed (after retries; then *src_err is
 * that errno too), or memory or threads ran short (*src_err is 0). */
int ferry_scan_start(const struct ferry_scan_cfg *cfg, struct ferry_scan **out,
                     int *src_err);
/* At most n threads (1 to cfg.threads) read a directory or stat a chunk
 * at once from now on, each with one request in flight: the -j auto
 * tuner's knob. Safe from any thread while the scan runs. */
void ferry_scan_set_limit(struct ferry_scan *sc, unsigned n);
/* Threads started so far (they start on demand, at most cfg.threads). */
unsigned ferry_scan_threads_started(struct ferry_scan *sc);
/* Waits for the threads and frees the pool. */
void ferry_scan_join(struct ferry_scan *sc);

#endif
