/*
 * coord/verify.c - ferry --verify on the coordinator (ferry_coord_verify).
 *
 * Owns the verify run (every done row of the latest scan handed out once,
 * phase VERIFYING) and the recording of its results: a missing or
 * differing file becomes pending again, one whose metadata alone differs
 * pending for its metadata (FO_META_AGAIN), with what DST holds now
 * claimed as ferry's so that the next run repairs it.
 */
#define _GNU_SOURCE
#include "config.h"
#include "internal.h"

#include "chunks.h"
#include "copy.h"
#include "failure.h"
#include "fsio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --verify found this DST file differing from its copy: what DST holds now
 * is to be recorded as ferry's (*rec), so the next run repairs it (rule 9
 * would keep a file that changed since ferry copied it). False when there
 * is nothing to claim: the copy replaces nothing. */
static bool claim_mismatch(struct coord *c, const struct ferry_batch *b,
                           const struct ferry_item *it,
                           struct ferry_dst_rec *rec)
{
        struct ferry_stat st;
        int dfd = -1,
            rc = ferry_fsio_open_dir(c->cfg->dstfd,
                                     ferry_batch_at(b, it->dir_off), &dfd);
        if (!rc)
                rc = ferry_fsio_statat(dfd, ferry_batch_at(b, it->name_off),
                                       &st);
        ferry_fsio_close(&dfd);
        if (rc)
                return false;
        /* a special's size is its kind and device number, as the copy
         * records it (ferry_copy_matches compares that) */
        *rec = (struct ferry_dst_rec){
                it->type, ferry_copy_dst_size(it->type, &st), st.mtime};
        return true;
}

/* The byte ranges of a chunked file's CH_BAD chunks, adjacent ones
 * joined: "bytes 16777216-33554431 differ" (first and last byte, as dd
 * and cmp count from 0), in buf; false when the plan names none (a size
 * that differs: the whole file). Ranges that do not fit end in "...". */
static bool bad_ranges(const struct ferry_chunk_plan *p, uint64_t size,
                       char *buf, size_t len)
{
        size_t at = (size_t)snprintf(buf, len, "bytes ");
        bool any = false;
        for (uint32_t i = 0; i < p->n; i++) {
                if (p->chunks[i].state != CH_BAD)
                        continue;
                uint32_t j = i;
                while (j + 1 < p->n && p->chunks[j + 1].state == CH_BAD)
                        j++;
                uint64_t first = (uint64_t)i * p->chunk_size;
                uint64_t end = (uint64_t)(j + 1) * p->chunk_size;
                if (end > size)
                        end = size;
                char one[64];
                snprintf(one, sizeof(one), "%s%llu-%llu", any ? ", " : "",
                         (unsigned long long)first,
                         (unsigned long long)end - 1);
                if (at + strlen(one) + sizeof(", ... differ") >= len) {
                        at += (size_t)snprintf(buf + at, len - at, ", ...");
                        break;
                }
                at += (size_t)snprintf(buf + at, len - at, "%s", one);
                any = true;
                i = j;
        }
        if (any)
                snprintf(buf + at, len - at, " differ");
        return any;
}

/* --verify found DST's content equal but its metadata differing: the row
 * is pending again for that metadata (a link for a link), with what DST
 * holds now claimed as ferry's (the content is the copy's; rule 9). */
static int record_meta_differs(struct coord *c, const struct ferry_batch *b,
                               const struct ferry_item *it)
{
        char why[512], parts[384];
        struct ferry_dst_rec rec;
        reason(b, it, parts, sizeof(parts));
        snprintf(why, sizeof(why), "verify: destination metadata differs: %s",
                 parts);
        bool claim = claim_mismatch(c, b, it, &rec);
        struct ferry_outcome o = {
                .kind = FO_META_AGAIN,
                .id = it->id,
                .why = why,
                .fail = &it->fail,
                .claim = claim ? &rec : NULL,
                .meta_differs = it->differs,
        };
        int rc = ferry_manifest_record_outcomes(c->m, &o, 1, NULL);
        c->sum->verified++;
        c->sum->meta_differs++;
        emit_item(c, FERRY_EV_META_DIFFERS, b, it, parts, &it->fail);
        return rc;
}

void record_verify(struct coord *c, const struct ferry_batch *b,
                   const struct ferry_item *it)
{
        char why[512], what[64], ranges[384];
        struct ferry_dst_rec rec;
        int rc = 0;
        c->prog.files_done++;
        c->prog.bytes_done += it->st.size;
        switch (it->result) {
        case R_DONE:
                c->sum->verified++;
                emit_item(c, FERRY_EV_VERIFIED, b, it, NULL, NULL);
                return;
        case R_NOFDS: stop_no_fds(c, it->err); return;
        case R_MISMATCH:
        case R_MISSING: {
                ferry_failure_message(&it->fail, false, what, sizeof(what));
                /* a file in chunks: which of its bytes differ (the next
                 * run rewrites only those chunks) */
                const struct ferry_chunk_plan *plan =
                        it->result == R_MISMATCH ? ferry_item_plan(b, it)
                                                 : NULL;
                bool ranged = plan && bad_ranges(plan, it->st.size, ranges,
                                                 sizeof(ranges));
                if (ranged)
                        snprintf(why, sizeof(why), "verify: %s differs: %s",
                                 what, ranges);
                else
                        snprintf(why, sizeof(why), "verify: %s %s", what,
                                 it->result == R_MISSING ? "is missing"
                                                         : "differs");
                bool claim = it->result == R_MISMATCH &&
                             it->fail.side == FERRY_SIDE_DST &&
                             claim_mismatch(c, b, it, &rec);
                /* a missing file's directories may be made anew */
                struct ferry_outcome o = {
                        .kind = FO_AGAIN,
                        .id = it->id,
                        .why = why,
                        .fail = &it->fail,
                        .dst_missing = it->result == R_MISSING,
                        .claim = claim ? &rec : NULL,
                        .plan = ranged ? plan : NULL, /* chunks marked bad */
                };
                rc = ferry_manifest_record_outcomes(c->m, &o, 1, NULL);
                c->sum->verified++;
                c->sum->mismatched++;
                emit_item(c,
                          it->result == R_MISSING ? FERRY_EV_MISSING
                                                  : FERRY_EV_MISMATCH,
                          b, it, ranged ? why + strlen("verify: ") : what,
                          &it->fail);
                break;
        }
        case R_META_DIFFERS: rc = record_meta_differs(c, b, it); break;
        default:
                reason(b, it, why, sizeof(why));
                c->sum->files_failed++;
                c->prog.errors++;
                emit_item(c, FERRY_EV_FAILED, b, it, why, &it->fail);
                break;
        }
        if (rc)
                manifest_error(c);
}

int ferry_coord_verify(const struct ferry_coord_cfg *cfg,
                       enum ferry_verify_mode mode, struct ferry_summary *sum,
                       struct ferry_error *err)
{
        struct coord c;
        int kind = (mode & FERRY_VERIFY_DEST ? WORK_VERIFY_DST : 0) |
                   (mode & FERRY_VERIFY_SOURCE ? WORK_VERIFY_SRC : 0);
        int code = coord_init(&c, cfg, sum, err, kind);
        if (code)
                return code;
        uint64_t not_done = 0;
        /* the totals of the progress line: the done rows (a read
         * transaction of its own, before the verify's) */
        struct ferry_status_info info;
        if (!ferry_manifest_status(c.m, &info, NULL)) {
                c.prog.files_total = info.done.files;
                c.prog.bytes_total = info.done.bytes;
        }
        /* rows the latest scan did not see are no longer part of SRC */
        if (ferry_manifest_begin(c.m) ||
            ferry_manifest_current_gen(c.m, &c.gen) ||
            ferry_manifest_count(c.m, COUNT_NOT_DONE, c.gen, &not_done, NULL)) {
                manifest_error(&c);
        } else {
                c.in.scan_done = true; /* no scan: the latest one's rows */
                if (!start_threads(&c, false, true))
                        start_loop(&c, PH_VERIFYING);
                stop_threads(&c);
                if (!c.stop_code && (mode & FERRY_VERIFY_DEST))
                        verify_dirs(&c); /* verify_dirs.c */
                if (c.stop_code != FERRY_EMANIFEST &&
                    ferry_manifest_commit(c.m))
                        manifest_error(&c);
        }
        code = c.stop_code;
        if (!code &&
            (c.sum->mismatched || c.sum->meta_differs || c.sum->files_failed)) {
                code = FERRY_EVERIFY;
                snprintf(err->msg, sizeof(err->msg),
                         "verify found %llu missing or differing files, %llu "
                         "with other metadata%s",
                         (unsigned long long)c.sum->mismatched,
                         (unsigned long long)c.sum->meta_differs,
                         c.sum->files_failed ? " and unreadable ones" : "");
        }
        if (!code && not_done) {
                code = FERRY_EVERIFY;
                snprintf(err->msg, sizeof(err->msg),
                         "%llu files are not copied yet: run the copy first",
                         (unsigned long long)not_done);
        }
        set_phase(&c, PH_DONE);
        progress(&c, true);
        coord_release(&c);
        return code;
}
