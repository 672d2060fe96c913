/*
 * fdlimit.h - how many descriptors a run may open, and how many threads
 * fit in them.
 *
 * A run's descriptors: what is open when the job starts (stdio, the
 * manifest, its -wal and -shm, the lock, SRC and DST), FERRY_COORD_FDS
 * for the coordinator and barrier threads and SQLite's temp files, and per
 * thread FERRY_COPIER_FDS for each worker and FERRY_SCAN_FDS for each scan
 * thread. Those counts come from reading the code (see each header) and
 * are checked with /proc/PID/fd in t34. A limit too low for what was
 * asked gets fewer threads; what still runs short is waited out by fsio
 * (EMFILE is back-pressure, never a file's fault).
 *
 * Calling sequence (job start, before any thread runs):
 *   limit = ferry_fdlimit_raise();    the soft limit up to the hard one
 *   ... open the manifest, SRC, DST ...
 *   ferry_fdlimit_fit(limit, ferry_fdlimit_in_use(), jobs, scanners, &fit);
 *   if (fit.reduced) use fit.jobs, fit.scanners and say so once
 */
#ifndef FERRY_FDLIMIT_H
#define FERRY_FDLIMIT_H

#include <stdbool.h>

/* The soft limit ferry_fdlimit_raise aims for when the hard limit is
 * higher (or unlimited): enough for 1024 workers many times over. */
#define FERRY_FDLIMIT_CAP (1ul << 20)

/* Raises the soft RLIMIT_NOFILE to the hard limit, at most
 * FERRY_FDLIMIT_CAP, and never lowers it. Returns the soft limit now in
 * force (the one before when it could not be raised). */
unsigned long ferry_fdlimit_raise(void);

/* The number of descriptors the process holds now (/proc/self/fd; else
 * the lowest free descriptor number, which is the count when there are no
 * holes). */
unsigned long ferry_fdlimit_in_use(void);

struct ferry_fd_fit {
        unsigned jobs, scanners; /* what fits (at least 1 each) */
        unsigned long need;      /* descriptors that jobs, scanners asked */
        bool reduced;            /* jobs or scanners are fewer than asked */
        bool tight; /* not even 1 worker and 1 scan thread fit: they run
                       anyway, on fsio's waits */
};

/* Fits jobs workers and scanners scan threads under limit descriptors
 * when in_use are open already. As asked when that fits; else the most
 * workers that fit, with scan threads cut to half as many as workers
 * (at least 1, at most as asked). */
void ferry_fdlimit_fit(unsigned long limit, unsigned long in_use, unsigned jobs,
                       unsigned scanners, struct ferry_fd_fit *out);

#endif
