/*
 * coord/metafail.c - metadata shortfalls (data arrived, some metadata did
 * not; of a directory: it is there in DST, some of its metadata is not)
 * as the run reports them, files' and directories' alike: each counted in
 * the summary's meta_failed, the first few of each cause named
 * (FERRY_EV_META_FAILED), the rest of that cause said as one count at the
 * end of the run (each of those still handed on, as
 * FERRY_EV_META_FAILED_MORE, for a log). Also the one warning for files larger
 * than DST holds.
 */
#define _GNU_SOURCE
#include "internal.h"

#include "failure.h"

#include <stdio.h>
#include <string.h>

/* Files named per cause; the rest of a cause is a count at the end. */
#define NAMED_PER_CAUSE 5

static struct meta_cause *cause_of(struct coord *c,
                                   const struct ferry_failure *f)
{
        struct meta_fails *mf = &c->mf;
        for (size_t i = 0; i < mf->n; i++)
                if (mf->cause[i].f.step == f->step &&
                    mf->cause[i].f.err == f->err)
                        return &mf->cause[i];
        if (mf->n == META_CAUSES)
                return NULL;
        mf->cause[mf->n] = (struct meta_cause){.f = *f};
        return &mf->cause[mf->n++];
}

void meta_shortfall(struct coord *c, const char *dir, const char *name,
                    bool is_dir, const struct ferry_failure *f)
{
        c->sum->meta_failed++;
        struct meta_cause *k = cause_of(c, f);
        bool named = k && ++k->n <= NAMED_PER_CAUSE;
        if (!k)
                c->mf.unnamed++;
        char why[256];
        ferry_failure_message(f, is_dir, why, sizeof(why));
        emit_failure(c,
                     named ? FERRY_EV_META_FAILED : FERRY_EV_META_FAILED_MORE,
                     dir, name, why, f);
}

void meta_shortfall_end(struct coord *c)
{
        char why[400], msg[256];
        for (size_t i = 0; i < c->mf.n; i++) {
                const struct meta_cause *k = &c->mf.cause[i];
                if (k->n <= NAMED_PER_CAUSE)
                        continue;
                ferry_failure_message(&k->f, false, msg, sizeof(msg));
                snprintf(why, sizeof(why),
                         "metadata not applied to %llu more entries (%s); "
                         "ferry status lists them",
                         (unsigned long long)(k->n - NAMED_PER_CAUSE), msg);
                emit(c, FERRY_EV_WARNING, "", "", why);
        }
        if (c->mf.unnamed) {
                snprintf(why, sizeof(why),
                         "metadata not applied to %llu more entries; ferry "
                         "status lists them",
                         (unsigned long long)c->mf.unnamed);
                emit(c, FERRY_EV_WARNING, "", "", why);
        }
}

void too_big_seen(struct coord *c, const char *why)
{
        if (c->mf.too_big++)
                return;
        char msg[300];
        snprintf(msg, sizeof(msg),
                 "files %s are not copied (listed at the "
                 "end)",
                 why);
        emit(c, FERRY_EV_WARNING, "", "", msg);
}
