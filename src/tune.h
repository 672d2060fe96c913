/*
 * tune.h - the -j auto controller: how many copies should be in flight,
 * from the throughput each interval gave. A pure function of what it is
 * fed (no clock, no threads): tests/unit/test_tune.c drives it with
 * synthetic throughput curves.
 *
 * It climbs: doubling the limit while each step raises the rate by more
 * than TUNE_GAIN (a step to more than TUNE_DEAR copies, which cost
 * memory, by more than TUNE_GAIN_DEAR), then holds the best; every few
 * intervals it probes one step up or down (alternating) and keeps the step when
 * it pays; a rate that moves far from what the limit gave before (the source
 * slowed down or sped up) starts a climb again from where it is, by as many
 * times the copies as each unit of work got slower when its round trip
 * grew (busy / rate: Little's law; files of the same size, no --bwlimit),
 * else by doubling. Intervals in
 * which the workers lacked work (busy well below the limit) teach nothing about
 * the limit and are not judged: while the scan is what holds a run back,
 * more copies would only compete with it for the source.
 *
 * Calling sequence:
 *   ferry_tune_init(&t, 1, cap, 16);
 *   every interval: n = ferry_tune_step(&t, rate, busy);   n: the new limit
 */
#ifndef FERRY_TUNE_H
#define FERRY_TUNE_H

#include <stdbool.h>

#define FERRY_TUNE_START 16  /* the first limit of -j auto */
#define FERRY_TUNE_MAX   256 /* -j auto's cap, before the descriptor limit */

enum ferry_tune_state {
        TUNE_CLIMB, /* doubling (or halving) while it helps */
        TUNE_HOLD,  /* at the best found; probing now and then */
        TUNE_PROBE, /* one step away from the held limit, measuring */
};

struct ferry_tune {
        unsigned lo, hi; /* the range of the limit */
        unsigned cur;    /* the limit now */
        enum ferry_tune_state state;
        int dir;         /* the climb's direction: +1 up, -1 down */
        bool flipped;    /* the climb tried the other direction already */
        unsigned steps;  /* intervals judged in this climb */
        unsigned best_n; /* the climb's best limit, and its rate */
        double best_rate;
        unsigned held;      /* TUNE_HOLD/PROBE: the limit held */
        double ref;         /* the held limit's rate (a moving average) */
        double ref_time;    /* ... and busy / rate then: a unit's time */
        double ref_size;    /* ... and bytes per file then */
        double size;        /* this interval's bytes per file */
        bool capped;        /* a --bwlimit is in force */
        unsigned quiet;     /* intervals held since the last probe */
        unsigned moved;     /* intervals in a row far from ref */
        int probe_dir;      /* the next probe's direction */
        unsigned intervals; /* judged so far (for tests and --json) */
        unsigned peak;      /* the highest limit used */
};

void ferry_tune_init(struct ferry_tune *t, unsigned lo, unsigned hi,
                     unsigned start);
/* One interval at t->cur completed work at rate (any unit per second);
 * busy is the mean number of copies that were running, 0 when unknown.
 * Returns the limit for the next interval (also t->cur). */
unsigned ferry_tune_step(struct ferry_tune *t, double rate, double busy);
/* Before a step, what else the interval says (0 and false until called):
 * the mean bytes per file it finished, and whether a --bwlimit was in
 * force. A re-adapt multiplies the copies by how much slower each unit of
 * work got only for files alike in size and with no limit. */
void ferry_tune_context(struct ferry_tune *t, double bytes_per_item,
                        bool capped);

#endif
