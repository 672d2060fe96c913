/*
 * batch.h - the messages that travel between ferry's threads.
 *
 * Scanners send listings to the coordinator; the coordinator sends batches of
 * work to the workers, which fill in each item's result and send the same batch
 * back. Everything a message points to lives inside it (its arena), so the
 * receiver owns the message whole and frees it with one call.
 */
#ifndef FERRY_BATCH_H
#define FERRY_BATCH_H

#include "ferry.h"
#include "fsio.h"
#include "manifest_types.h" /* enum ferry_ftype, enum ferry_state */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ferry_msg_kind {
        MSG_LISTING = 1, /* struct ferry_listing */
        MSG_SCAN_DONE,   /* struct ferry_msg, scanners finished */
        MSG_BATCH,       /* struct ferry_batch, back from a worker */
        MSG_BARRIER,     /* struct ferry_msg, the barrier thread finished */
        MSG_CHUNK,       /* struct ferry_chunk_msg (chunks.h), from a worker */
};

struct ferry_msg {
        enum ferry_msg_kind kind;
        int err; /* MSG_BARRIER: 0 or the errno of the barrier */
};

struct ferry_entry {
        uint32_t name_off; /* into the listing's arena, NUL-terminated */
        uint32_t name_len;
        struct ferry_stat st;
};

/* Part of one directory's entries (subdirectories are not listed; each
 * sends its own listing, after its parent's). */
struct ferry_listing {
        struct ferry_msg msg;
        char *path; /* relative to SRC, "" for the root; in arena */
        size_t path_len;
        struct ferry_stat dir_st;
        bool first;                /* first chunk: dir_st is valid */
        bool last;                 /* last chunk: seen is valid */
        int open_err;              /* the directory could not be read fully */
        enum ferry_step open_step; /* at which step (open, readdir, stat
                                      of an entry), with open_err */
        size_t seen;               /* entries in all chunks of this directory */
        size_t n, cap;
        struct ferry_entry *entries;
        char *arena;
        size_t arena_len, arena_cap;
};

enum ferry_result {
        R_NONE = 0, /* not attempted (stop requested) */
        R_DONE,     /* copied, or verified equal */
        R_FAILED,   /* permanent error, fail says why */
        R_VANISHED, /* source is gone */
        R_CHANGED,  /* source kept changing while copied */
        R_NOSPACE,  /* destination full */
        R_NOFDS,    /* no descriptor came free (fsio gave up waiting) */
        R_MISMATCH, /* verify: content or size differs */
        R_MISSING,  /* verify: destination file missing */
        R_IN_WAY,   /* a DST entry of another type is in the way (a
                       directory where SRC has a file, a file where SRC
                       has a directory): the coordinator decides (it knows
                       whether ferry put it there); err ENOTDIR or EISDIR */
        R_DSTFAIL,  /* DST itself failed (ferry_copy_dst_failed; err says
                       why): the run stops, the row stays pending */
        /* verify: content equal, metadata differs (differs has the
         * parts, why_off names them) */
        R_META_DIFFERS,
};

enum ferry_work {
        WORK_COPY = 1,
        WORK_VERIFY_DST = 1 << 1,
        WORK_VERIFY_SRC = 1 << 2
};

/* What ferry last put in DST under a row's name (sql/003_dst_state.sql):
 * type 0 when nothing. mtime is DST's, as it read it back. A special's
 * size is its kind and device number (ferry_copy_special_id). */
struct ferry_dst_rec {
        enum ferry_ftype type;
        uint64_t size;
        struct ferry_time mtime;
};

/* What a shared job's row records of the leader a follower is linked to
 * (ferry_item's link_off): its ctime when copied, as SRC's stat gave it,
 * and what its copy left in DST. */
struct ferry_lead_rec {
        struct ferry_time ctime;
        struct ferry_dst_rec dst;
};

struct ferry_item {
        int64_t id;
        int64_t dir_id;
        uint32_t dir_off, name_off; /* arena offsets, NUL-terminated */
        /* hardlink leader's dst path or 0; in a shared job's batch
         * (copy.h, foreign_rows) followed, past its NUL, by a struct
         * ferry_lead_rec */
        uint32_t link_off;
        /* a file copied in chunks: its struct ferry_chunk_plan (chunks.h,
         * ferry_item_plan), or 0 */
        uint32_t plan_off;
        enum ferry_ftype type;
        struct ferry_stat st;     /* as scanned; after a copy, as read */
        uint8_t hash[16];         /* verify: expected; copy: result */
        struct ferry_dst_rec dst; /* copy: as recorded; after it, as left */
        /* results */
        enum ferry_result result;
        int err; /* errno of a failure (R_DSTFAIL: why DST failed) */
        /* what failed (R_FAILED, R_VANISHED, R_CHANGED, R_NOSPACE,
         * R_DSTFAIL, R_MISMATCH, R_MISSING, R_META_DIFFERS; verify: the
         * side that differs); decisions read these fields, never a message */
        struct ferry_failure fail;
        uint32_t why_off; /* arena offset of a reason the worker wrote
                             in full (a refusal: fail.err 0), or 0 */
        uint64_t bytes;   /* bytes written */
        /* the metadata layer (sql/006_meta.sql) */
        int need;             /* MF_NEED_DATA or MF_NEED_META */
        uint32_t rec_applied; /* as recorded: MF_AP_* bits */
        bool rec_has_xdigest; /* as recorded: rec_xdigest is valid */
        uint64_t rec_xdigest;
        uint32_t applied; /* result: the MF_AP_* bits applied */
        bool has_xdigest; /* result: xdigest is valid */
        uint64_t xdigest; /* result: SRC's xattrs and ACLs as applied */
        /* result: data arrived (R_DONE) but this part of the metadata
         * did not (step FERRY_STEP_NONE: all of it did) */
        struct ferry_failure meta_fail;
        uint32_t differs; /* verify: the MF_AP_* bits that differ in DST */
        /* --adopt (copy_adopt.c): DST's entry was found equal and kept
         * (R_DONE, nothing written), or was of the same size and mtime
         * but another content (copied as any other) */
        bool adopted, adopt_differs;
        /* a shared job's row (shared/batches.c): a claim of it ended
         * without a done outcome, so its host may have put a copy in
         * place unmarked (copy.h: written_since holds for this row) */
        bool unmarked;
        /* dry run (its rows only): a hardlink name other than its group's
         * first, which the run makes a link (link_off stays 0 there: no
         * first name is done) */
        bool follower;
};

struct ferry_batch {
        struct ferry_msg msg;
        int work; /* enum ferry_work flags */
        size_t n, cap;
        struct ferry_item *items;
        char *arena;
        size_t arena_len, arena_cap;
        struct ferry_batch *next; /* the coordinator's lists */
        /* A single host's first pass (coord/handout.c): once the batch has
         * run this long, its worker starts no more of its items and gives
         * them back (R_NONE from given_back on) to be handed out again in
         * batches sized for how slow items now are. 0: never. */
        uint64_t give_back_ns;
        size_t given_back; /* the first item given back; SIZE_MAX: none */
};

/* Both return NULL when out of memory. Caller frees with the _free call. */
struct ferry_listing *ferry_listing_new(const char *path, size_t len,
                                        size_t cap);
void ferry_listing_free(struct ferry_listing *l);
/* Appends an entry; returns ENOMEM or 0. */
int ferry_listing_add(struct ferry_listing *l, const char *name, size_t len,
                      const struct ferry_stat *st);

struct ferry_batch *ferry_batch_new(int work, size_t cap);
void ferry_batch_free(struct ferry_batch *b);
/* Copies len bytes plus a NUL into the arena; *off gets the offset. */
int ferry_batch_str(struct ferry_batch *b, const void *s, size_t len,
                    uint32_t *off);
/* Reserves len zeroed bytes at an offset that is a multiple of 8 (for a
 * struct: struct ferry_chunk_plan); *off gets it. The arena may move:
 * address it by offset. */
int ferry_batch_reserve(struct ferry_batch *b, size_t len, uint32_t *off);
static inline const char *ferry_batch_at(const struct ferry_batch *b,
                                         uint32_t off)
{
        return b->arena + off;
}

#endif
