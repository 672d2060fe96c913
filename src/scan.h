/*
 * scan.h - the scanner pool: walks SRC in parallel and sends one listing per
 * directory (in chunks for big ones) to the coordinator's inbox.
 *
 * Calling sequence:
 *   ferry_scan_start(&cfg, &sc, &e); threads start at SRC's root
 *   ... the coordinator pops MSG_LISTING messages, then one MSG_SCAN_DONE ...
 *   ferry_scan_join(sc);             after MSG_SCAN_DONE or a stop request
 *
 * A directory's listing is always queued before any listing of its
 * subdirectories, so the coordinator knows a parent before its children.
 * Directories are walked depth-first, which keeps the pending stack small.
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
#include "pattern.h"
#include "queue.h"

#include <stdatomic.h>
#include <stdbool.h>

/* Descriptors one scan thread holds at most at once: the directory it
 * reads, and while it opens one deeper than PATH_MAX, two of the walk. */
#define FERRY_SCAN_FDS 2

struct ferry_scan_cfg {
        int srcfd;                             /* borrowed, open on SRC */
        const struct ferry_patterns *excludes; /* borrowed, may be NULL */
        const struct ferry_own *own; /* borrowed, may be NULL: left out */
        struct ferry_queue *inbox;   /* borrowed */
        atomic_bool *stop;           /* borrowed */
        unsigned threads;
        unsigned retries; /* of a transient error, as the copy's --retries */
        size_t chunk;     /* entries per listing */
        bool one_file_system; /* -x: mount points listed empty (scan.c) */
};

struct ferry_scan;

/* 0, or an errno: SRC's own fstat failed (after retries; then *src_err is
 * that errno too), or memory or threads ran short (*src_err is 0). */
int ferry_scan_start(const struct ferry_scan_cfg *cfg, struct ferry_scan **out,
                     int *src_err);
/* At most n directories (1 to cfg.threads) are read at once from now on:
 * the -j auto tuner's knob. Safe from any thread while the scan runs. */
void ferry_scan_set_limit(struct ferry_scan *sc, unsigned n);
/* Waits for the threads and frees the pool. */
void ferry_scan_join(struct ferry_scan *sc);

#endif
