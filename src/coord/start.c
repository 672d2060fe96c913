/*
 * coord/start.c - the start of a copy run, before any thread runs.
 *
 * Owns begin_run: the run's row, when this run's uncertain copies may date
 * from (written_since), the DST sample (check_destination: does DST still
 * hold what the manifest calls done?), the new generation, failed rows
 * made pending again, and what metadata DST can hold (probe_dst: the
 * probe, kept in the manifest per DST, and the one warning that says what
 * will not be kept; coord_meta_cfg: the options less that).
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "fsio.h"
#include "names.h"
#include "thread.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The earliest start of a run that may have left copies without done
 * marks: one that did not end well (manifest.h), or whose barrier
 * failed. */
int written_since(struct coord *c)
{
        char buf[32];
        if (ferry_manifest_interrupted_since(c->m, c->run_id,
                                             &c->written_since) ||
            ferry_manifest_note(c->m, UNCERTAIN_KEY, buf, sizeof(buf)))
                return -1;
        long long t = buf[0] ? atoll(buf) : 0;
        if (t > 0 && (!c->written_since || t < c->written_since))
                c->written_since = t;
        return 0;
}

/* Done files looked at in DST at the start of every run. */
#define DST_SAMPLE 32

/* Coarsest mtime a destination keeps: FAT's 2 s (exFAT: 10 ms, exfat-fuse
 * whole seconds). */
#define MTIME_SLACK_NS 2000000000LL

struct dst_sample {
        struct coord *c;
        unsigned checked; /* files whose state in DST could be told */
        unsigned missing; /* not there, or not the copy (type, size) */
        unsigned differs; /* there, with another mtime */
        int64_t missing_ids[DST_SAMPLE];
};

enum dst_state {
        DST_UNKNOWN, /* a stat failed otherwise than "not there" */
        DST_AS_DONE,
        DST_MISSING, /* not there, or not the copy (type, size) */
        DST_DIFFERS, /* there, with another mtime */
};

/* Looks for this done file in DST as ferry left it: its type, size, and
 * mtime when times are kept. An error other than "not there" tells
 * nothing (a network DST may fail a stat now and then). */
static enum dst_state dst_state(struct coord *c,
                                const struct ferry_done_file *f)
{
        struct ferry_stat st;
        int dfd = -1, rc = ferry_fsio_open_dir(c->cfg->dstfd, f->dir, &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, f->name, &st);
        ferry_fsio_close(&dfd);
        if (rc && rc != ENOENT && rc != ENOTDIR)
                return DST_UNKNOWN;
        bool reg = f->type == FT_REG;
        /* another type or size: not the copy (a clamped time, or a run
         * with --no-times, changes neither) */
        if (rc || (reg ? !S_ISREG(st.mode) : !S_ISLNK(st.mode)) ||
            st.size != f->size)
                return DST_MISSING;
        if (reg && c->opt->times &&
            !ferry_time_near(st.mtime, f->mtime, MTIME_SLACK_NS))
                return DST_DIFFERS;
        return DST_AS_DONE;
}

static void sample_one(struct dst_sample *ds, const struct ferry_done_file *f,
                       enum dst_state s)
{
        if (s == DST_UNKNOWN)
                return;
        ds->checked++;
        if (s == DST_MISSING) {
                if (ds->missing < DST_SAMPLE)
                        ds->missing_ids[ds->missing] = f->id;
                ds->missing++;
        } else if (s == DST_DIFFERS) {
                ds->differs++;
        }
}

/*
 * The looks at DST go out at once, LOOK_THREADS at a time: each is a
 * directory open and a stat, on a cold disk a read each and on a share
 * two round trips. One after the other, the sample put 20-40 ms (local,
 * cold) to a third of a second (5 ms per round trip) before every run's
 * scan, and the look at every done row after a re-point hours on a share.
 * Batches of LOOK_BATCH files; their tally goes in the files' order.
 */
#define LOOK_THREADS 32
#define LOOK_BATCH   256

struct looks {
        struct coord *c;
        unsigned n;
        atomic_uint next; /* the next file to look at */
        bool oom;
        struct ferry_done_file files[LOOK_BATCH];
        enum dst_state state[LOOK_BATCH];
};

/* Adds a copy of f to the batch (false, and l->oom, when out of memory). */
static bool looks_add(struct looks *l, const struct ferry_done_file *f)
{
        struct ferry_done_file *k = &l->files[l->n];
        *k = *f;
        k->dir = strdup(f->dir);
        k->name = strdup(f->name);
        if (!k->dir || !k->name) {
                free((char *)k->dir);
                free((char *)k->name);
                l->oom = true;
                return false;
        }
        l->n++;
        return true;
}

static void *look_some(void *arg)
{
        struct looks *l = arg;
        for (unsigned i; (i = atomic_fetch_add(&l->next, 1)) < l->n;)
                l->state[i] = dst_state(l->c, &l->files[i]);
        return NULL;
}

static void *look_thread(void *arg)
{
        ferry_thread_quiet();
        return look_some(arg);
}

/* Sets the state of every file of the batch (this thread looks too). */
static void looks_run(struct looks *l)
{
        pthread_t t[LOOK_THREADS - 1];
        unsigned started = 0;
        atomic_store(&l->next, 0);
        while (started + 1 < l->n && started < LOOK_THREADS - 1 &&
               !pthread_create(&t[started], NULL, look_thread, l))
                started++;
        look_some(l);
        for (unsigned i = 0; i < started; i++)
                pthread_join(t[i], NULL);
}

static void looks_clear(struct looks *l)
{
        for (unsigned i = 0; i < l->n; i++) {
                free((char *)l->files[i].dir);
                free((char *)l->files[i].name);
        }
        l->n = 0;
}

static bool sample_add(const struct ferry_done_file *f, void *arg)
{
        struct looks *l = arg;
        return looks_add(l, f) && l->n < DST_SAMPLE;
}

/* After a DST re-point, past these many rows to copy again DST counts as
 * another: every done row is copied again (memory stays bounded). */
#define AGAIN_MAX 65536u

struct dst_all {
        struct looks *l;
        size_t n;
        bool full;    /* past AGAIN_MAX */
        int64_t *ids; /* AGAIN_MAX */
        unsigned checked;
};

/* Looks at the batch and tallies it; false once past AGAIN_MAX. */
static bool all_flush(struct dst_all *da)
{
        struct looks *l = da->l;
        looks_run(l);
        for (unsigned i = 0; i < l->n && !da->full; i++) {
                enum dst_state s = l->state[i];
                da->checked += s != DST_UNKNOWN;
                if (s != DST_MISSING && s != DST_DIFFERS)
                        continue;
                if (da->n == AGAIN_MAX)
                        da->full = true;
                else
                        da->ids[da->n++] = l->files[i].id;
        }
        looks_clear(l);
        return !da->full;
}

static bool all_add(const struct ferry_done_file *f, void *arg)
{
        struct dst_all *da = arg;
        if (!looks_add(da->l, f))
                return false;
        return da->l->n < LOOK_BATCH || all_flush(da);
}

/* Marks the n rows of ids to copy again (their DST entries missing or not
 * as recorded), in slices. */
static int copy_again(struct coord *c, const int64_t *ids, size_t n,
                      const char *why)
{
        const struct ferry_failure missing = {FERRY_SIDE_DST,
                                              FERRY_STEP_MISSING, 0};
        struct ferry_outcome again[DST_SAMPLE];
        for (size_t at = 0; at < n;) {
                size_t k = 0;
                for (; k < DST_SAMPLE && at < n; k++, at++)
                        again[k] = (struct ferry_outcome){
                                .kind = FO_AGAIN,
                                .id = ids[at],
                                .why = why,
                                .fail = &missing,
                                .dst_missing = true,
                        };
                if (ferry_manifest_record_outcomes(c->m, again, k, NULL))
                        return -1;
        }
        return 0;
}

/* The first run after a DST re-point (--adopt, MF_NOTE_DST_CHECK_ALL):
 * the new DST's root has another identity by design, and a sample would
 * leave done rows whose files the new DST lacks done; so every done row's
 * DST entry is looked at (one stat each) and those missing or not as
 * recorded are copied again. */
static int check_all(struct coord *c)
{
        struct looks *l = calloc(1, sizeof(*l));
        struct dst_all da = {.l = l,
                             .ids = malloc(AGAIN_MAX * sizeof(int64_t))};
        if (!l || !da.ids) {
                free(l);
                free(da.ids);
                set_error(c, FERRY_EINTERNAL, "out of memory");
                return -1;
        }
        l->c = c;
        unsigned seen;
        int rc =
                ferry_manifest_sample_done(c->m, UINT_MAX, all_add, &da, &seen);
        if (!rc && !l->oom && !da.full)
                all_flush(&da); /* the last batch */
        looks_clear(l);
        bool oom = l->oom;
        free(l);
        if (oom) {
                free(da.ids);
                set_error(c, FERRY_EINTERNAL, "out of memory");
                return -1;
        }
        char why[200];
        if (!rc && da.full) {
                rc = ferry_manifest_reset_done(c->m);
                snprintf(why, sizeof(why),
                         "more than %u copied files are missing from the "
                         "re-pointed destination or differ from the record: "
                         "copying everything again",
                         AGAIN_MAX);
        } else if (!rc && da.n) {
                rc = copy_again(c, da.ids, da.n,
                                "missing from the destination");
                snprintf(why, sizeof(why),
                         "%zu of %u copied files are missing from the "
                         "re-pointed destination or differ from the record: "
                         "copying them again",
                         da.n, da.checked);
        }
        free(da.ids);
        if (rc || ferry_manifest_set_note(c->m, MF_NOTE_DST_CHECK_ALL, ""))
                return -1;
        if (da.full || da.n)
                emit(c, FERRY_EV_WARNING, "", "", why);
        return 0;
}

/*
 * Does DST still hold what the manifest calls done? A DST deleted or
 * swapped behind ferry's back holds none of it: copy it all again. Its
 * root's dev:ino (recorded) does not tell: it changes when the same DST is
 * only mounted again (a USB disk gets another device number; exfat-fuse
 * numbers inodes anew when the kernel forgets one), where copying days of
 * data again would be wrong, and it stays when DST is emptied in place or
 * deleted and made again with its old inode number (ext4 hands a freed
 * inode out again at once), where trusting it would leave DST empty. So
 * every run looks at a sample of the done files in DST (a few dozen
 * stats). Under a new identity, any file missing or different means
 * another DST. Under the same identity, an mtime that differs is no proof
 * (a file system may clamp times it cannot store, a run with --no-times
 * left copy times), so DST counts as replaced when most of the sample is
 * missing or of another type or size; when only some is, those files (and
 * the metadata of their directories) are copied again and a warning points
 * to --verify for the rest. Silent when all is there: a re-plugged disk
 * would warn on every run.
 */
static int check_destination(struct coord *c)
{
        struct ferry_stat st;
        if (c->cfg->dstfd < 0 || ferry_fsio_fstat(c->cfg->dstfd, &st))
                return 0;
        char id[64];
        bool changed;
        snprintf(id, sizeof(id), "%llu:%llu", (unsigned long long)st.dev,
                 (unsigned long long)st.ino);
        char all[8];
        if (ferry_manifest_check_dst(c->m, id, &changed) ||
            ferry_manifest_note(c->m, MF_NOTE_DST_CHECK_ALL, all, sizeof(all)))
                return -1;
        if (!strcmp(all, "1"))
                return check_all(c);
        struct dst_sample ds = {.c = c};
        struct looks l = {.c = c};
        unsigned seen;
        int rc = ferry_manifest_sample_done(c->m, DST_SAMPLE, sample_add, &l,
                                            &seen);
        if (!rc && !l.oom) {
                looks_run(&l);
                for (unsigned i = 0; i < l.n; i++)
                        sample_one(&ds, &l.files[i], l.state[i]);
        }
        looks_clear(&l);
        if (l.oom)
                set_error(c, FERRY_EINTERNAL, "out of memory");
        if (rc || l.oom)
                return -1;
        /* most of those looked at, and a quarter of the sample at least
         * (a few stats that failed with EIO leave a small denominator) */
        bool replaced =
                changed ? ds.missing + ds.differs > 0
                        : 2 * ds.missing > ds.checked && 4 * ds.missing >= seen;
        if (replaced) {
                if (ferry_manifest_reset_done(c->m))
                        return -1;
                emit(c, FERRY_EV_WARNING, "", "",
                     "the destination was replaced since the last run: "
                     "copying everything again");
                return 0;
        }
        if (!ds.missing)
                return 0;
        if (copy_again(c, ds.missing_ids,
                       ds.missing < DST_SAMPLE ? ds.missing : DST_SAMPLE,
                       "missing from the destination"))
                return -1;
        char why[160];
        snprintf(why, sizeof(why),
                 "%u of %u copied files looked at are missing from the "
                 "destination: copying them again; ferry --verify finds "
                 "any others",
                 ds.missing, ds.checked);
        emit(c, FERRY_EV_WARNING, "", "", why);
        return 0;
}

#define CAPS_KEY    "dst_caps"
#define CAPS_FORMAT "f3" /* a note without it (or another) is probed again */

/* "f3 ID ROOT BITS MAX": the caps learned for DST's root of that dev:ino,
 * by a process that was root or not. f2 added times_survive_rename (bit
 * 7), f3 hard_links (bit 8): a note of before would read false there, so
 * it is not used. */
static void caps_text(const struct ferry_dst_caps *k, const char *id, char *out,
                      size_t size)
{
        unsigned bits =
                (unsigned)k->owner | (unsigned)k->perms << 1 |
                (unsigned)k->xattrs_user << 2 | (unsigned)k->xattrs_other << 3 |
                (unsigned)k->acls << 4 | (unsigned)k->symlink_times << 5 |
                (unsigned)k->specials << 6 |
                (unsigned)k->times_survive_rename << 7 |
                (unsigned)k->hard_links << 8;
        snprintf(out, size, CAPS_FORMAT " %s %d %u %" PRIu64, id,
                 geteuid() == 0, bits, k->max_size);
}

static bool caps_parse(const char *text, const char *id,
                       struct ferry_dst_caps *k)
{
        char fmt[8], got[64];
        int root;
        unsigned bits;
        uint64_t max;
        if (sscanf(text, "%7s %63s %d %u %" SCNu64, fmt, got, &root, &bits,
                   &max) != 5 ||
            strcmp(fmt, CAPS_FORMAT) || strcmp(got, id) ||
            root != (geteuid() == 0))
                return false;
        *k = (struct ferry_dst_caps){bits & 1,      bits >> 1 & 1,
                                     bits >> 2 & 1, bits >> 3 & 1,
                                     bits >> 4 & 1, bits >> 5 & 1,
                                     bits >> 6 & 1, bits >> 7 & 1,
                                     bits >> 8 & 1, max};
        return true;
}

/* What metadata DST holds: probed once per DST (its root's dev:ino; a
 * no-change re-run touches nothing in DST), then said once when the
 * options ask for what it cannot hold. */
static int probe_dst(struct coord *c)
{
        struct stat st; /* not through fsio: its fault counts stay put */
        if (c->cfg->dstfd < 0 || fstat(c->cfg->dstfd, &st))
                return 0;
        char id[64], text[160];
        snprintf(id, sizeof(id), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        if (ferry_manifest_note(c->m, CAPS_KEY, text, sizeof(text)))
                return -1;
        /* a dry run writes nothing, not even probes: it goes by what an
         * earlier run learned, if any */
        bool known = caps_parse(text, id, &c->dst_caps);
        if (!known && c->opt->dry_run)
                return 0;
        if (!known && ferry_probe_begin(c->m, c->cfg->dstfd))
                return -1;
        if (!known && !ferry_dst_caps_probe(c->cfg->dstfd, &c->dst_caps)) {
                caps_text(&c->dst_caps, id, text, sizeof(text));
                if (ferry_manifest_set_note(c->m, CAPS_KEY, text))
                        return -1;
        }
        const struct ferry_options *o = c->opt;
        struct ferry_dst_wants w = {
                .owner = o->owner && geteuid() == 0,
                .perms = o->perms,
                .xattrs = o->xattrs,
                .acls = o->acls,
                .times = o->times,
                .specials = o->specials,
                .hard_links = o->hard_links,
        };
        char why[200];
        if (ferry_dst_caps_missing(&c->dst_caps, &w, why, sizeof(why)))
                emit(c, FERRY_EV_WARNING, "", "", why);
        return 0;
}

struct ferry_meta_cfg coord_meta_cfg(const struct coord *c)
{
        /* what DST cannot hold is not attempted (start.c said so) */
        const struct ferry_dst_caps *k = &c->dst_caps;
        struct ferry_meta_cfg m = {
                .perms = c->opt->perms && k->perms,
                .owner = c->opt->owner && k->owner,
                .times = c->opt->times,
                .xattrs = c->opt->xattrs && (k->xattrs_user || k->xattrs_other),
                .acls = c->opt->acls && k->acls,
                .atimes = c->opt->atimes,
                .root = geteuid() == 0,
                .umask = c->umask,
        };
        m.caps = c->dst_caps;
        if (!m.root)
                ferry_meta_cfg_groups(&m);
        return m;
}

/* Prepares the manifest for a run: new generation, failed rows retried. */
int begin_run(struct coord *c)
{
        c->run_started = (int64_t)time(NULL);
        if (ferry_manifest_begin(c->m) ||
            ferry_manifest_run_start(c->m, c->cfg->command, &c->run_id) ||
            written_since(c) || check_destination(c) || probe_dst(c) ||
            ferry_manifest_scan_start(c->m, &c->gen, &c->prog.files_total,
                                      &c->prog.bytes_total)) {
                manifest_error(c);
                return c->stop_code;
        }
        /* commit these before anything is handed out */
        c->dirty = c->fresh = true;
        return 0;
}
