/*
 * logfile.h - `--log-file FILE`: one JSON line per event of a run and one
 * at its start and its end, appended to FILE (logfile.c).
 *
 * Calling sequence (main.c), all on the thread that runs the job (the
 * library hands events and progress on from one thread):
 *
 *   struct ferry_log *log;
 *   if (ferry_log_open(path, &log, &err)) ...   // before anything is copied
 *   ferry_log_start(log, cli, argc, argv);
 *   ... ferry_log_event(log, ...) from the event callback,
 *       ferry_log_tick(log) from the progress callback (about 1/s) ...
 *   ferry_log_end(log, cli, &summary, code, manifest, message);
 *   int e = ferry_log_close(log);               // flushes; 0 or an errno
 *
 * Lines are gathered in memory and written with one write(2) per block
 * (O_APPEND: runs and other writers append whole blocks), at the latest a
 * second after the oldest unwritten line, and at the end. A write that
 * fails is said once on stderr; the run goes on, the log stops.
 */
#ifndef FERRY_CLI_LOGFILE_H
#define FERRY_CLI_LOGFILE_H

#include "cli.h"

struct ferry_log;

/* Opens (creating, mode 0644 less the umask) path for appending. Returns
 * 0 with *out set (free with ferry_log_close), or FERRY_EUSAGE with err
 * saying why it cannot be opened. */
int ferry_log_open(const char *path, struct ferry_log **out,
                   struct ferry_error *err);
/* The run's start: command, SRC, DST, the options that matter, argv. */
void ferry_log_start(struct ferry_log *log, const struct ferry_cli *cli,
                     int argc, char **argv);
/* One event, as ferry_event_fn hands it on (everything borrowed). */
void ferry_log_event(struct ferry_log *log, enum ferry_event ev,
                     const char *path, size_t len, const char *detail,
                     const struct ferry_failure *fail);
/* Writes out what waited a second or more. */
void ferry_log_tick(struct ferry_log *log);
/* The run's end: result code and what it means, the message (may be NULL
 * or ""), the manifest (may be NULL), the counters of sum. */
void ferry_log_end(struct ferry_log *log, const struct ferry_cli *cli,
                   const struct ferry_summary *sum, int code,
                   const char *manifest, const char *message);
/* Writes out the rest and closes; returns 0, or the errno of the first
 * write that failed. NULL is fine. */
int ferry_log_close(struct ferry_log *log);

#endif
