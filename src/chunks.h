/*
 * chunks.h - a large file copied in chunks (issue 11): what the manifest,
 * the coordinator and the copier share about one.
 *
 * A regular file of at least FERRY_CHUNK_MIN_FILE bytes is copied in
 * chunks of FERRY_CHUNK_SIZE (the last one shorter) into its temp file,
 * which survives a crash. Per chunk the crash-safety rules apply as they
 * do per file: the chunk's data is durable in the temp file first, then
 * its hash is committed (ferry_manifest_record_chunk). A resumed run
 * keeps the done chunks of a temp file whose identity (device, inode) and
 * source (size, mtime, ctime, inode: not its device, which a remounted
 * share changes) are the ones recorded with them, and copies the rest;
 * anything else starts the file again.
 *
 * The whole-file XXH3-128 stays every file's hash: the copier computes it
 * in file order, from SRC's bytes while it streams them and from the temp
 * file's for the chunks copied out of order or by an earlier run (see
 * copy_chunks.c for what that costs).
 *
 * The plan (struct ferry_chunk_plan, in a batch's arena at item->plan_off)
 * tells the copier what is done; it travels back with the batch, each
 * chunk's state and hash as the copier left them. A done file keeps its
 * chunks' hashes, so --verify names the byte ranges that differ
 * (CH_BAD) and the next run rewrites only those (plan->repair).
 */
#ifndef FERRY_CHUNKS_H
#define FERRY_CHUNKS_H

#include "batch.h"

#include <stdbool.h>
#include <stdint.h>

/* Files at least this big are copied in chunks. */
#define FERRY_CHUNK_MIN_FILE (64ull << 20)
/* The size of a chunk (every chunk of a file but its last). A kill
 * loses the chunks its streams were in (up to 8 at once) besides the
 * last tenth of a second's: 16 MiB rather than 32 halves the first part
 * (bench resume, 4 GiB killed at half, 3 runs each, re-read from SRC:
 * 53.9 52.0 53.7 % and, SRC remounted, 54.7 54.7 52.7 %; with 32 MiB
 * 54.7 54.7 53.9 % and 55.5 57.0 60.9 %) at no cost measured (big1m:
 * the same CPU time, 5.3-6.3 s for 4 GiB). A build may set another
 * (-DFERRY_CHUNK_SIZE=...) for such comparisons. */
#ifndef FERRY_CHUNK_SIZE
#define FERRY_CHUNK_SIZE (16ull << 20)
#endif

static inline uint32_t ferry_chunk_count(uint64_t size, uint64_t chunk_size)
{
        return (uint32_t)((size + chunk_size - 1) / chunk_size);
}

/* The most chunks a plan has: 65536 chunks of 17 bytes are 1.1 MiB of
 * a batch's arena (memory stays bounded); a file that would have more
 * gets bigger chunks (ferry_chunk_size_for), and beyond 64 TiB no plan. */
#define FERRY_MAX_CHUNKS 65536u

static inline bool ferry_chunk_plan_fits(uint64_t size, uint64_t cs)
{
        return cs && (size + cs - 1) / cs <= FERRY_MAX_CHUNKS;
}

/* A new plan's chunk size: FERRY_CHUNK_SIZE, doubled while the file would
 * have too many chunks; 0 when even 1 GiB chunks are too many. */
static inline uint64_t ferry_chunk_size_for(uint64_t size)
{
        uint64_t cs = FERRY_CHUNK_SIZE;
        while (!ferry_chunk_plan_fits(size, cs) && cs < (1ull << 30))
                cs <<= 1;
        return ferry_chunk_plan_fits(size, cs) ? cs : 0;
}

enum ferry_chunk_state {
        CH_TODO = 0, /* to copy */
        CH_DONE = 1, /* durable in the temp file (copy) or in DST (a done
                      * file); hash is its XXH3-128 */
        CH_BAD = 2,  /* verify: DST's bytes of it differ from hash; a
                      * repair rewrites it */
};

struct ferry_chunk_rec {
        uint8_t state; /* enum ferry_chunk_state */
        uint8_t hash[16];
};

struct ferry_chunk_plan {
        uint64_t chunk_size;
        uint32_t n; /* chunks: ferry_chunk_count(size, chunk_size) */
        /* a temp file of an earlier run holds the CH_DONE chunks: its
         * identity as recorded (the copier checks it before it trusts one) */
        bool resume;
        uint64_t tmp_dev, tmp_ino;
        /* ... of another host's claim (a shared job): found by its inode
         * and size (that host's mount has its own device number), and its
         * chunks copied into a new temp (copy_chunks.c, adopt_temp) */
        bool tmp_any_dev;
        /* a done file whose CH_BAD chunks are rewritten in DST, in place,
         * when DST is still what ferry put there (rule 9) */
        bool repair;
        struct ferry_chunk_rec chunks[]; /* n of them */
};

static inline struct ferry_chunk_plan *
ferry_item_plan(const struct ferry_batch *b, const struct ferry_item *it)
{
        /* plan_off is a multiple of 8 (ferry_batch_reserve): void * says
         * the alignment is known (clang's -Wcast-align) */
        return it->plan_off ? (struct ferry_chunk_plan *)(void *)(b->arena +
                                                                  it->plan_off)
                            : NULL;
}

/* A chunk made durable in a temp file: a worker sends it to the
 * coordinator (MSG_CHUNK), which records it (ferry_manifest_record_chunk)
 * in its next commit. */
struct ferry_chunk_msg {
        struct ferry_msg msg;
        int64_t file_id;
        uint32_t idx;
        uint64_t chunk_size;
        uint8_t hash[16];
        struct ferry_stat src;     /* SRC as the chunk was read from it */
        uint64_t tmp_dev, tmp_ino; /* the temp file it is in */
};

#endif
