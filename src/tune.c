/*
 * tune.c - the -j auto controller (tune.h): a hill climb on the number of
 * copies in flight, fed one throughput figure per interval. It keeps no
 * clock and starts no thread; the coordinator (coord/run.c) measures.
 */
#include "tune.h"

#define TUNE_GAIN 0.08 /* a step must raise the rate this much to count */
/* ... and a step to more than TUNE_DEAR copies this much: each copy in
 * flight costs memory (its buffer, stack and batches: bench/RESULTS.md,
 * "Issue 13: memory of -j auto"), and on a shared machine a rate jitters
 * by 10% from one interval to the next; a latency-bound source that needs
 * that many gains far more from each doubling */
#define TUNE_DEAR      64
#define TUNE_GAIN_DEAR 0.25
#define TUNE_MOVED     0.35 /* a held rate this far off: the source changed */
#define TUNE_MOVES     2    /* ... for this many intervals in a row */
/* A held rate that fell for TUNE_MOVES intervals while each unit of
 * work took more than TUNE_SLOWER times as long as it did, the files as
 * large as before (within a factor of 2, or TUNE_SIZE_SLACK bytes) and
 * no --bwlimit in force, is a source whose round trip grew (a share at
 * 200 us that went to 5 ms): the climb's first step multiplies the copies
 * by that factor, the copies it takes to keep as many round trips in
 * flight per second (Little's law), instead of doubling them. A rate
 * that fell because the files got larger, or a limit was set, is not a
 * round trip: more copies would only cost memory. */
#define TUNE_SLOWER     2.0
#define TUNE_SIZE_SLACK 65536.0
#define PROBE_EVERY     6   /* held intervals between probes */
#define PROBE_STEP      1.5 /* a probe's factor; a climb's is 2 */
/* busy below this share of the limit: the copies lacked work (the scan
 * had not found enough), and the interval says nothing about the limit */
#define STARVED 0.8

/* The gain a step from n to m copies must bring to count. */
static double gain(unsigned n, unsigned m)
{
        return m > n && m > TUNE_DEAR ? TUNE_GAIN_DEAR : TUNE_GAIN;
}

/* n moved by factor f in direction dir, at least by one, within range. */
static unsigned step(const struct ferry_tune *t, unsigned n, int dir, double f)
{
        /* rounded up going up, down going down; no libm in the library;
         * a factor past the range (a unit of work 1000 times slower)
         * stops at its top */
        double x = dir > 0 ? n * f + 0.999 : n / f;
        unsigned m = x >= t->hi ? t->hi : (unsigned)x;
        if (dir > 0 && m <= n)
                m = n + 1;
        if (dir < 0 && m >= n)
                m = n > 0 ? n - 1 : 0;
        if (m < t->lo)
                m = t->lo;
        if (m > t->hi)
                m = t->hi;
        return m;
}

static void set_cur(struct ferry_tune *t, unsigned n)
{
        t->cur = n;
        if (n > t->peak)
                t->peak = n;
}

static void hold(struct ferry_tune *t, unsigned n, double rate)
{
        t->state = TUNE_HOLD;
        if (n != t->held)
                t->ref_time = 0; /* set by the first interval held */
        /* kept when a probe returns to the same limit, and cleared by a
         * re-adapt (on_hold), whose climb may end at the same limit */
        t->held = n;
        t->ref = rate;
        t->quiet = t->moved = 0;
        set_cur(t, n);
}

/* A climb from n (whose rate is rate) in direction dir, its first step by
 * factor f; flipped: the other direction was tried already. */
static void climb_by(struct ferry_tune *t, unsigned n, double rate, int dir,
                     bool flipped, double f)
{
        unsigned next = step(t, n, dir, f);
        if (next == n && !flipped) {
                dir = -dir; /* at a bound: the other way */
                flipped = true;
                next = step(t, n, dir, 2.0);
        }
        if (next == n) {
                hold(t, n, rate);
                return;
        }
        t->state = TUNE_CLIMB;
        t->dir = dir;
        t->flipped = flipped;
        t->steps = 0;
        t->best_n = n;
        t->best_rate = rate;
        set_cur(t, next);
}

static void climb(struct ferry_tune *t, unsigned n, double rate, int dir,
                  bool flipped)
{
        climb_by(t, n, rate, dir, flipped, 2.0);
}

void ferry_tune_init(struct ferry_tune *t, unsigned lo, unsigned hi,
                     unsigned start)
{
        *t = (struct ferry_tune){0};
        t->lo = lo ? lo : 1;
        t->hi = hi < t->lo ? t->lo : hi;
        start = start < t->lo ? t->lo : start > t->hi ? t->hi : start;
        t->probe_dir = -1;
        /* the first interval at start is the climb's first step */
        t->state = TUNE_CLIMB;
        t->dir = 1;
        t->best_n = start;
        t->best_rate = 0;
        t->steps = 0;
        t->flipped = false;
        set_cur(t, start);
}

static void on_climb(struct ferry_tune *t, double rate)
{
        t->steps++;
        if (rate > t->best_rate * (1 + gain(t->best_n, t->cur))) {
                unsigned n = t->cur;
                t->best_n = n;
                t->best_rate = rate;
                unsigned next = step(t, n, t->dir, 2.0);
                if (next == n)
                        hold(t, n, rate);
                else
                        set_cur(t, next);
                return;
        }
        /* no gain: the first step of a climb may try the other way */
        if (t->steps == 1 && !t->flipped && t->best_rate > 0) {
                climb(t, t->best_n, t->best_rate, -t->dir, true);
                return;
        }
        hold(t, t->best_n, t->best_rate > 0 ? t->best_rate : rate);
}

/* Files of about the same size: a mean of bytes per item within a
 * factor of 2 of the other, or TUNE_SIZE_SLACK apart (small files). */
static bool alike(double a, double b)
{
        return a <= 2 * b + TUNE_SIZE_SLACK && b <= 2 * a + TUNE_SIZE_SLACK;
}

static void on_hold(struct ferry_tune *t, double rate, double busy)
{
        double off = t->ref > 0 ? rate / t->ref - 1 : 0;
        off = off < 0 ? -off : off;
        /* each unit of work's time, now over at the held limit */
        double time = busy > 0 && rate > 0 ? busy / rate : 0;
        double slower = time > 0 && t->ref_time > 0 ? time / t->ref_time : 0;
        if (off > TUNE_MOVED) {
                if (++t->moved >= TUNE_MOVES) {
                        /* re-adapt: as many more copies as each unit of
                         * work got slower, or twice as many */
                        bool grew = rate < t->ref && slower > TUNE_SLOWER &&
                                    !t->capped && alike(t->size, t->ref_size);
                        t->ref_time = 0;
                        climb_by(t, t->cur, rate, 1, false,
                                 grew ? slower : 2.0);
                        return;
                }
        } else {
                bool first = !(t->ref_time > 0);
                t->moved = 0;
                t->ref = t->ref > 0 ? 0.7 * t->ref + 0.3 * rate : rate;
                t->ref_time = !first && time > 0
                                      ? 0.7 * t->ref_time + 0.3 * time
                                      : time;
                t->ref_size =
                        first ? t->size : 0.7 * t->ref_size + 0.3 * t->size;
        }
        if (++t->quiet < PROBE_EVERY)
                return;
        unsigned n = step(t, t->held, t->probe_dir, PROBE_STEP);
        if (n == t->held) {
                t->probe_dir = -t->probe_dir;
                n = step(t, t->held, t->probe_dir, PROBE_STEP);
        }
        t->quiet = 0;
        if (n == t->held)
                return; /* lo == hi: nothing to probe */
        t->state = TUNE_PROBE;
        set_cur(t, n);
}

static void on_probe(struct ferry_tune *t, double rate)
{
        int dir = t->cur > t->held ? 1 : -1;
        if (rate > t->ref * (1 + gain(t->held, t->cur))) {
                /* the step paid: climb on that way (the other was not
                 * tried: flipped stays false only at the held limit) */
                climb(t, t->cur, rate, dir, true);
                return;
        }
        t->probe_dir = -dir;
        hold(t, t->held, t->ref);
}

void ferry_tune_context(struct ferry_tune *t, double bytes_per_item,
                        bool capped)
{
        t->size = bytes_per_item;
        t->capped = capped;
}

unsigned ferry_tune_step(struct ferry_tune *t, double rate, double busy)
{
        if (busy > 0 && busy < STARVED * t->cur)
                return t->cur; /* the workers lacked work: not judged */
        t->intervals++;
        switch (t->state) {
        case TUNE_CLIMB: on_climb(t, rate); break;
        case TUNE_HOLD: on_hold(t, rate, busy); break;
        case TUNE_PROBE: on_probe(t, rate); break;
        }
        return t->cur;
}
