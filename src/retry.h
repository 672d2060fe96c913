/*
 * retry.h - the retry policy of a run: one for the copier, the scanner and
 * the coordinator.
 *
 * A step that fails with an error ferry_copy_transient() accepts is tried
 * again, --retries times at most, after ferry_copy_backoff(). A step on
 * DST whose error ferry_copy_dst_suspect() accepts first asks
 * ferry_copy_dst_failed() whether DST itself still answers (crash-safety
 * rule 10): when not, the run stops and nothing is retried.
 */
#ifndef FERRY_RETRY_H
#define FERRY_RETRY_H

#include <stdbool.h>

/* True for errors worth retrying (EIO, EAGAIN, ETIMEDOUT, ESTALE, ...).
 * The scanner uses it too: one policy for every retry of a run. */
bool ferry_copy_transient(int err);
/* True for errors of a step on DST that may be DST's own rather than one
 * file's (EIO, ENODEV, ENXIO, ESHUTDOWN, EROFS, ENOTCONN, ESTALE, ENOENT,
 * the network's): worth asking ferry_copy_dst_failed before a retry. */
bool ferry_copy_dst_suspect(int err);
/* Crash-safety rule 10: 0 while DST's root (dstfd) answers
 * (ferry_fsio_probe_dir), else the errno that says DST itself failed:
 * gone, shut down, removed or read-only. Then the run stops and the rows
 * stay pending; nobody's file failed. dstfd < 0 (a dry run): 0. */
int ferry_copy_dst_failed(int dstfd);
/* Sleeps before retry number attempt + 1 (0-based): 50 ms, doubling up to
 * 3.2 s. With ferry_copy_transient and --retries, the whole retry policy. */
void ferry_copy_backoff(unsigned attempt);

#endif
