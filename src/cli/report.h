/*
 * report.h - what the ferry command's printing shares (main.c, status.c,
 * status_list.c, export.c, logfile.c).
 *
 * Standard output as a sink that remembers its first write error, and the
 * lines that name a path: a listed path, and a failure, whose top of the
 * tree ("." in ferry.h) is printed as the directory the user named.
 */
#ifndef FERRY_REPORT_H
#define FERRY_REPORT_H

#include "ferry.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Standard output: the -v, dry-run and verify listings, --json, status,
 * --help. Its first write error (a full disk; a pipe whose reader is gone,
 * EPIPE, since SIGPIPE is ignored) is kept here, nothing more is written
 * to it, and main reports it once and exits FERRY_EOUTPUT.
 *
 * A run whose listing cannot be written stops, cleanly, as after SIGINT:
 * files already copied are committed, the rest stays pending, the same
 * command resumes. That is what rsync, cp -v and tar do when the reader
 * of their listing goes away (they stop); copying on would leave a log
 * that ends early without a word, and `ferry -v ... | head` is a look at
 * the start, not a request to copy everything unseen.
 */
struct sink {
        int err;      /* errno of the first failed write; 0 */
        bool stopped; /* a run stopped because of it */
};

/* Before writing to stdout: false once it has failed. Clears errno, so
 * that a failure of the writes that follow shows with its own. */
bool ferry_sink_ready(const struct sink *s);
/* After writing to stdout: has it failed? Notes the error the first time
 * it shows. */
bool ferry_sink_failed(struct sink *s);
/* Writes out what stdout holds; false once it has failed. */
bool ferry_sink_flush(struct sink *s);

/* SRC and DST as the user named them, for the top of the tree. */
struct top {
        const char *src, *dst;
};

/* prefix, the path (quoted when quote), ": " and detail when given. */
void ferry_report_line(FILE *f, const char *prefix, const char *path,
                       size_t len, bool quote, const char *detail);
/* A failure's line. The top of the tree, SRC or DST itself, comes as the
 * path "." (ferry.h), a name no entry can have, and is printed as the
 * directory the user named: SRC's when fail says the failure is on SRC
 * (a scan error), DST's for any other (create, owner, mode, times). */
void ferry_report_failure(FILE *f, const char *prefix, const char *path,
                          size_t len, const char *reason,
                          const struct ferry_failure *fail,
                          const struct top *top);

struct ferry_cli;
/* `ferry status` (status.c): prints the job's state and failures on
 * stdout; returns the exit code. */
int ferry_cli_status(const struct ferry_cli *cli, struct sink *so);

/* `ferry status` without a job (status_list.c): every job of the state
 * directory on stdout; returns the exit code. */
int ferry_cli_status_list(const struct ferry_cli *cli, struct sink *so);
/* `ferry status` on a shared manifest (status_pg.c): its jobs, or with
 * --job-name that job's hosts and failures; returns the exit code. */
int ferry_cli_status_pg(const struct ferry_cli *cli, struct sink *so);
/* Whether a run holds the job, as status says it: "no", "yes (pid N)",
 * "yes (pid N on host H)" (a holder of another host), "yes (pid
 * unknown)" or "unknown (lock ...: why)". */
void ferry_report_running(FILE *f, const struct ferry_status_info *info);

/* `ferry export` (export.c): the job's files on stdout in cli->format;
 * returns the exit code. */
int ferry_cli_export(const struct ferry_cli *cli, struct sink *so);
/* `ferry set` (set.c): the exit code */
int ferry_cli_set(const struct ferry_cli *cli, struct sink *so);
/* `ferry set` of a shared job (set_pg.c): the exit code */
int ferry_cli_set_pg(const struct ferry_cli *cli, struct sink *so);

/* n with a comma between groups of three digits ("1,204"). */
void ferry_report_count(FILE *f, uint64_t n);

/* Writes label and the local time t (seconds since the epoch), or
 * "never" for 0, to standard output. */
void ferry_report_time(const char *label, int64_t t);

#endif
