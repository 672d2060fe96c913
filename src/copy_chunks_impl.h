/*
 * copy_chunks_impl.h - what copy_chunks.c (the temp, the owner, the
 * budget of streams) and copy_stream.c (one stream's copy of a chunk)
 * share; private to them.
 */
#ifndef FERRY_COPY_CHUNKS_IMPL_H
#define FERRY_COPY_CHUNKS_IMPL_H

#include "copier.h"

#include <pthread.h>

/* How often at most the streams of a file make what they wrote durable
 * (fdatasync) and report it: a flush per chunk would stall every stream
 * on every chunk (on the bench machine's disk that made a local copy
 * several times slower); a crash loses at most this much of copying.
 * Each chunk's write-back is started as it is written (sync_file_range),
 * so the sync finds little left to do: a tenth of a second keeps what a
 * kill loses small (bench resume, 4 GiB killed at half: 1 s without that
 * start lost 22% of the file, with it 12%; the resumed run's share read
 * from SRC, 3 runs each: 0.25 s 54.3-56.2%, 0.1 s with the rows committed
 * within 0.05 s 51.2-53.1%, at the same speed in big1m: 5.02-5.44 s for
 * 4 GiB against 4.87-5.56 s). */
#define FERRY_CHUNK_SYNC_NS 100000000ull

enum { CS_FREE, CS_BUSY, CS_DONE };

/* Streams a file gets at most, the owner's included. */
#define FERRY_CHUNK_STREAMS 8

/* One file's chunks, shared by its streams; lock guards state, failed,
 * err, step and changed, and the plan's records of chunks not CS_BUSY. */
struct job {
        struct ferry_copier *c; /* the owner's: cfg, read only */
        const struct ferry_item *it;
        struct ferry_chunk_plan *plan;
        int in, out;
        bool sparse;
        /* helpers copy chunks that the owner reads back from the temp for
         * the whole-file hash (set before they start): the temp's pages
         * of a durable chunk stay cached until then (chunk_sync) */
        bool read_back;
        uint64_t tmp_dev, tmp_ino;
        _Atomic uint64_t written; /* bytes this attempt wrote */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        uint8_t *state; /* CS_* per chunk */
        /* per chunk: written (CS_DONE), not yet durable nor reported;
         * and the ones the sync under way covers (syncing) */
        uint8_t *unsynced, *snap;
        bool syncing;
        uint64_t last_sync_ns;
        uint32_t fold; /* the owner's: chunks folded into the whole hash */
        bool failed, changed;
        /* an fdatasync of the temp failed: what it held is not known to be
         * durable, and a retry must not trust its page cache (rule 3) */
        bool sync_failed;
        int err;
        const struct step *step;
};

struct stream {
        struct job *job;
        int in; /* SRC: its own descriptor (its own readahead), or j->in */
        char *buf;
        size_t len;
        XXH3_state_t *xxh;
        pthread_t thread;
        uint64_t read_ns, read_bytes; /* SRC's preads: time, bytes */
};

/* Monotonic nanoseconds. */
uint64_t chunk_now_ns(void);
/* Chunk i's offset and length in j's file. */
void chunk_range(const struct job *j, uint32_t i, off_t *off, uint64_t *len);
/* Advice that chunk i of fd (SRC once every byte of the chunk was read;
 * the temp once the chunk is durable there) is not read again: its cached
 * pages may go, as `dd iflag=nocache oflag=nocache` lets them (the copy
 * of a big file does not push the rest of the page cache out, nor fill
 * memory with written pages that only wait to be dropped). SRC's range
 * of each read is let go at once too (ferry_fsio_uncache), so that its
 * pages are reused by the next read while they are still hot; but a range
 * drops only the folios wholly inside it, and a local file system's cache
 * may hold the file in folios of up to 2 MiB: the whole chunk's range
 * catches those. */
void chunk_uncache(const struct job *j, int fd, uint32_t i);
/* x's XXH3-128 in canonical bytes. */
void chunk_digest(XXH3_state_t *x, uint8_t out[16]);
/* Copies chunk i (claimed by the caller) with stream s: data (hashed into
 * whole too when not NULL), durable, SRC as the scan saw it before and
 * after; then its CH_DONE record in the plan and its MSG_CHUNK. */
int chunk_copy(struct job *j, struct stream *s, uint32_t i, XXH3_state_t *whole,
               bool *changed, const struct step **step);
/* Makes the chunks written so far durable (one fdatasync for all) and
 * reports them: at most every FERRY_CHUNK_SYNC_NS while the copy runs
 * (a stream that finds another's sync under way, or one too recent,
 * goes on copying), always when force (it waits for one under way). */
int chunk_sync(struct job *j, bool force);
/* Records a stream's failure (the first wins) and wakes the others. */
void chunk_fail(struct job *j, int rc, bool changed, const struct step *step);
/* Under j's lock: the lowest free chunk from `from` on, claimed (n: none). */
uint32_t chunk_claim(struct job *j, uint32_t from);
/* A helper thread's body (arg: its struct stream). */
void *chunk_helper(void *arg);
/* Reads done chunk i back from the temp, hashing it into whole; *ok when
 * its hash is the plan's. */
int chunk_read_back(struct job *j, struct stream *s, uint32_t i,
                    XXH3_state_t *whole, bool *ok);
/* copy_chunks.c: a descriptor of SRC's file of its own (its own
 * readahead), or in itself. */
int chunk_own_src(int in);
/* copy_blocks.c: copies the chunks from j->fold on, block by block, with
 * s (the owner's stream) and up to helpers threads more, folding the
 * whole-file hash (j->c->xxh) as they go; 0 or the first failure (j's),
 * *changed when SRC changed. Not for a sparse SRC. */
int chunk_blocks(struct job *j, struct stream *s, unsigned helpers,
                 bool *changed, const struct step **step);

#endif
