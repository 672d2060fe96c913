/*
 * main.c - the ferry command: a thin client of include/ferry.h.
 *
 * Parses the command line (cli.c), installs the signal handlers that ask a
 * run to stop cleanly, and prints what the library reports for a copy or a
 * verify: progress on stderr, per-file events, the final summary, the list
 * of failures, and the exit code, which is the library's result code (see
 * man/ferry.1), or FERRY_EOUTPUT when standard output could not be written
 * (struct sink, report.h). With --log-file every event and the run's
 * start and end also go to the log (logfile.c), opened before the job is.
 * `ferry status` is status.c and status_list.c, `ferry export` export.c.
 */
#define _GNU_SOURCE
#include "ferry.h"
#include "cli.h"
#include "logfile.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* An output error outweighs what the job found (0, 5, 20, 23, 24, 26), not an
 * error that kept it from working (usage, paths, manifest, lock, internal,
 * destination full). */
static int output_code(int code)
{
        switch (code) {
        case FERRY_OK:
        case FERRY_EVERIFY:
        case FERRY_EINTR:
        case FERRY_EPARTIAL:
        case FERRY_EVANISHED:
        case FERRY_EMETA: return FERRY_EOUTPUT;
        default: return code;
        }
}

/* Rates over the last half minute or so, for a run of days whose speed
 * changes (another source disk, small files after big ones). */
struct rate {
        double t;              /* when the last sample was taken */
        uint64_t files, bytes; /* done at t */
        double fps, bps;       /* smoothed files and bytes per second */
};

struct out {
        const struct ferry_cli *cli;
        struct sink *so;
        bool tty;
        double last_plain;
        struct rate rate;
        bool line_open; /* a \r progress line is on the terminal */
        unsigned long failures_listed;
        struct top top;
        struct ferry_log *log; /* --log-file; NULL */
};

static void human(uint64_t n, char *buf, size_t size)
{
        const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        double v = (double)n;
        int u = 0;
        while (v >= 1024 && u < 5) {
                v /= 1024;
                u++;
        }
        snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static void clear_line(struct out *o)
{
        if (o->line_open) {
                fputs("\r\033[K", stderr);
                o->line_open = false;
        }
}

#define RATE_WINDOW   30.0 /* seconds: the time constant of the rates */
#define PLAIN_SECONDS 10.0 /* between progress lines when not a terminal */

/* Folds the progress since the last sample into r: for the first
 * RATE_WINDOW seconds the average of the run so far, then an exponential
 * average with that time constant, so the rates follow the recent past. */
static void rate_update(struct rate *r, const struct ferry_progress *p)
{
        /* a resume's chunks of earlier runs were not copied now */
        uint64_t bytes = p->bytes_done > p->bytes_resumed
                                 ? p->bytes_done - p->bytes_resumed
                                 : 0;
        double dt = p->elapsed - r->t;
        if (p->elapsed <= 0 || dt <= 0)
                return;
        if (p->elapsed < RATE_WINDOW) {
                r->fps = (double)p->files_done / p->elapsed;
                r->bps = (double)bytes / p->elapsed;
        } else {
                double w = 1.0 - exp(-dt / RATE_WINDOW);
                r->fps +=
                        w * ((double)(p->files_done - r->files) / dt - r->fps);
                r->bps +=
                        w * (((double)bytes - (double)r->bytes) / dt - r->bps);
        }
        r->t = p->elapsed;
        r->files = p->files_done;
        r->bytes = bytes;
}

/* Seconds to do the rest of total at rate; -1 when the rate is not known. */
static double time_left(uint64_t total, uint64_t done, double rate)
{
        if (total <= done)
                return 0;
        return rate > 0 ? (double)(total - done) / rate : -1;
}

/* h:mm:ss for seconds s, or "?" when it cannot be told. */
static void put_eta(char *buf, size_t size, double s)
{
        if (!(s >= 0) || s > 99.0 * 24 * 3600) {
                snprintf(buf, size, "?");
                return;
        }
        unsigned long t = (unsigned long)(s + 0.5);
        snprintf(buf, size, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
}

static void on_progress(const struct ferry_progress *p, void *arg)
{
        struct out *o = arg;
        ferry_log_tick(o->log);
        if (o->cli->quiet || o->cli->json)
                return;
        rate_update(&o->rate, p);
        if (!o->tty && (p->final || p->elapsed - o->last_plain < PLAIN_SECONDS))
                return;
        char done[32], total[32], rate[32];
        human(p->bytes_done, done, sizeof(done));
        human(p->bytes_total, total, sizeof(total));
        human((uint64_t)o->rate.bps, rate, sizeof(rate));
        /* the ETA at the recent rate of files or of bytes, whichever is
         * later: small files are bound by their number, big ones by bytes
         * (which count as they are written: before the first file is
         * done, a big one's bytes alone tell) */
        char eta[32] = "?";
        if (p->files_total && !p->scanning) {
                double f =
                        time_left(p->files_total, p->files_done, o->rate.fps);
                double b =
                        time_left(p->bytes_total, p->bytes_done, o->rate.bps);
                put_eta(eta, sizeof(eta),
                        b < 0                     ? -1
                        : f < 0 && !p->files_done ? b
                        : f > b                   ? f
                                                  : b);
        }
        if (o->tty)
                fputs("\r\033[K", stderr);
        fprintf(stderr,
                "ferry: %llu/%llu%s files, %s/%s, %.0f files/s, %s/s, ETA "
                "%s, %llu errors",
                (unsigned long long)p->files_done,
                (unsigned long long)p->files_total, p->scanning ? "+" : "",
                done, total, o->rate.fps, rate, eta,
                (unsigned long long)p->errors);
        ferry_cli_put_paused(stderr, p); /* set.c */
        if (o->tty && !p->final) {
                o->line_open = true;
        } else {
                fputc('\n', stderr);
                o->line_open = false;
        }
        o->last_plain = p->elapsed;
        fflush(stderr);
}

/* A line of the listing on stdout, shown at once; the first that cannot
 * be written stops the run (struct sink). */
static void put_listed_why(struct out *o, const char *prefix, const char *path,
                           size_t len, const char *why)
{
        if (!ferry_sink_ready(o->so))
                return;
        ferry_report_line(stdout, prefix, path, len, false, why);
        if (!ferry_sink_flush(o->so))
                ferry_request_stop();
}

static void put_listed(struct out *o, const char *prefix, const char *path,
                       size_t len)
{
        put_listed_why(o, prefix, path, len, NULL);
}

static void on_event(enum ferry_event ev, const char *path, size_t len,
                     const char *detail, const struct ferry_failure *fail,
                     void *arg)
{
        struct out *o = arg;
        bool loud = !o->cli->quiet;
        ferry_log_event(o->log, ev, path, len, detail, fail);
        clear_line(o);
        switch (ev) {
        case FERRY_EV_VERIFIED:
        case FERRY_EV_META_FAILED_MORE: break; /* for the log */
        case FERRY_EV_COPIED:
        case FERRY_EV_LINKED:
                if (o->cli->verbose)
                        put_listed(o, "", path, len);
                break;
        case FERRY_EV_ADOPTED:
                if (o->cli->verbose)
                        put_listed(o, "adopted: ", path, len);
                break;
        case FERRY_EV_META:
                if (o->cli->verbose)
                        put_listed(o, "metadata: ", path, len);
                break;
        case FERRY_EV_META_DIFFERS:
                put_listed_why(o, "metadata differs: ", path, len, detail);
                break;
        case FERRY_EV_DELETED:
                if (o->cli->verbose)
                        put_listed(o, "deleting ", path, len);
                break;
        case FERRY_EV_WOULD_COPY: put_listed(o, "", path, len); break;
        case FERRY_EV_WOULD_ADOPT: put_listed(o, "adopt: ", path, len); break;
        case FERRY_EV_WOULD_META: put_listed(o, "metadata: ", path, len); break;
        case FERRY_EV_WOULD_DELETE:
                /* with a reason: kept (--max-delete, a refused --delete),
                 * listed as a dry run lists, and under -v */
                if (!detail)
                        put_listed(o, "deleting ", path, len);
                else if (o->cli->verbose || o->cli->opt.dry_run)
                        put_listed_why(o, "not deleting ", path, len, detail);
                break;
        case FERRY_EV_MISMATCH:
                /* a file in chunks names the byte ranges that differ */
                put_listed_why(o, "mismatch: ", path, len,
                               detail && strstr(detail, ": bytes ") ? detail
                                                                    : NULL);
                break;
        case FERRY_EV_MISSING: put_listed(o, "missing: ", path, len); break;
        case FERRY_EV_FAILED:
                if (o->cli->command == CMD_VERIFY)
                        ferry_report_failure(stderr, "ferry: failed: ", path,
                                             len, detail, fail, &o->top);
                break; /* copy failures are listed from the manifest */
        case FERRY_EV_VANISHED:
                if (loud)
                        ferry_report_line(stderr, "ferry: vanished: ", path,
                                          len, true, NULL);
                break;
        case FERRY_EV_META_FAILED:
                if (loud)
                        ferry_report_failure(stderr, "ferry: metadata: ", path,
                                             len, detail, fail, &o->top);
                break;
        case FERRY_EV_SKIPPED:
        case FERRY_EV_WARNING:
                if (loud)
                        ferry_report_failure(stderr, "ferry: warning: ", path,
                                             len, detail, fail, &o->top);
                break;
        }
}

static void on_failure(const struct ferry_failure_row *r, void *arg)
{
        struct out *o = arg;
        if (r->meta) /* named during the run, counted in the summary */
                return;
        if (++o->failures_listed <= 100)
                ferry_report_failure(stderr, "ferry: failed: ", r->path,
                                     r->path_len, r->reason, &r->fail, &o->top);
}

/* The signals that stop a run cleanly, and which of them (bit i for
 * stop_sigs[i]) ferry handles. */
static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP_SIGS (sizeof(stop_sigs) / sizeof(stop_sigs[0]))
static volatile sig_atomic_t stop_signals;

static void handle_stop(int sig)
{
        (void)sig;
        ferry_request_stop();
        /* a second signal, of any of those handled, ends ferry at once */
        for (size_t i = 0; i < N_STOP_SIGS; i++)
                if (stop_signals & (1 << i))
                        signal(stop_sigs[i], SIG_DFL);
}

static void install_signals(void)
{
        struct sigaction sa, old;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = handle_stop;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < N_STOP_SIGS; i++) {
                /* a signal ignored from the start (nohup) stays ignored */
                if (!sigaction(stop_sigs[i], NULL, &old) &&
                    old.sa_handler == SIG_IGN)
                        continue;
                stop_signals |= 1 << i;
                sigaction(stop_sigs[i], &sa, NULL);
        }
}

static void print_json_summary(const struct ferry_cli *cli,
                               const struct ferry_summary *s, int code)
{
        if (cli->command == CMD_VERIFY) {
                printf("{\"verified\": %llu, \"mismatched\": %llu, "
                       "\"meta_differs\": %llu, \"failed\": %llu, "
                       "\"seconds\": %.3f, \"exit_code\": %d}\n",
                       (unsigned long long)s->verified,
                       (unsigned long long)s->mismatched,
                       (unsigned long long)s->meta_differs,
                       (unsigned long long)s->files_failed, s->seconds, code);
                return;
        }
        char jobs[16] = "auto"; /* -j N: a number */
        if (cli->opt.jobs)
                snprintf(jobs, sizeof(jobs), "%u", cli->opt.jobs);
        printf("{\"files_seen\": %llu, \"files_copied\": %llu, "
               "\"bytes_copied\": %llu, \"files_unchanged\": %llu, "
               "\"files_failed\": %llu, \"files_vanished\": %llu, "
               "\"files_skipped\": %llu, \"files_deleted\": %llu, "
               "\"scan_errors\": %llu, \"files_linked\": %llu, "
               "\"files_adopted\": %llu, \"meta_applied\": %llu, "
               "\"meta_failed\": %llu, "
               "\"dry_run\": %s, \"jobs\": %s%s%s, \"jobs_peak\": %u, "
               "\"workers\": %u, \"seconds\": %.3f, \"exit_code\": %d}\n",
               (unsigned long long)s->files_seen,
               (unsigned long long)s->files_copied,
               (unsigned long long)s->bytes_copied,
               (unsigned long long)s->files_unchanged,
               (unsigned long long)s->files_failed,
               (unsigned long long)s->files_vanished,
               (unsigned long long)s->files_skipped,
               (unsigned long long)s->files_deleted,
               (unsigned long long)s->scan_errors,
               (unsigned long long)s->files_linked,
               (unsigned long long)s->files_adopted,
               (unsigned long long)s->meta_applied,
               (unsigned long long)s->meta_failed,
               cli->opt.dry_run ? "true" : "false", jobs[0] == 'a' ? "\"" : "",
               jobs, jobs[0] == 'a' ? "\"" : "", s->jobs_peak, s->workers,
               s->seconds, code);
}

static void print_summary(const struct ferry_cli *cli,
                          const struct ferry_summary *s)
{
        char bytes[32];
        human(s->bytes_copied, bytes, sizeof(bytes));
        if (cli->command == CMD_VERIFY) {
                fprintf(stderr,
                        "ferry: verified %llu files, %llu differ or are "
                        "missing, %llu metadata differs, %llu unreadable, "
                        "%.1f s\n",
                        (unsigned long long)s->verified,
                        (unsigned long long)s->mismatched,
                        (unsigned long long)s->meta_differs,
                        (unsigned long long)s->files_failed, s->seconds);
                return;
        }
        fprintf(stderr,
                "ferry: %s%llu files %s (%s), %llu unchanged, %llu "
                "failed, %llu vanished, %llu skipped, %llu deleted, %.1f s\n",
                cli->opt.dry_run ? "dry run: " : "",
                (unsigned long long)s->files_copied,
                cli->opt.dry_run ? "to copy" : "copied", bytes,
                (unsigned long long)s->files_unchanged,
                (unsigned long long)s->files_failed,
                (unsigned long long)s->files_vanished,
                (unsigned long long)s->files_skipped,
                (unsigned long long)s->files_deleted, s->seconds);
        if (s->files_adopted && cli->opt.dry_run)
                fprintf(stderr,
                        "ferry: dry run: %llu to adopt (the destination holds "
                        "them by size and mtime; the run hashes both sides, "
                        "and copies those that differ)\n",
                        (unsigned long long)s->files_adopted);
        else if (s->files_adopted)
                fprintf(stderr,
                        "ferry: %llu adopted (found equal in the destination, "
                        "kept: no data written)\n",
                        (unsigned long long)s->files_adopted);
        if (s->meta_failed)
                fprintf(stderr,
                        "ferry: metadata not applied: %llu (their data "
                        "arrived)\n",
                        (unsigned long long)s->meta_failed);
}

static void list_failures(struct out *o, const char *manifest)
{
        struct ferry_status_info info;
        struct ferry_error err;
        struct ferry_status_req req = {NULL, on_failure, o, 0};
        if (ferry_status_read(manifest, NULL, NULL, &req, &info, &err))
                return;
        if (o->failures_listed > 100)
                fprintf(stderr,
                        "ferry: ... and %lu more; `ferry status` lists "
                        "them all\n",
                        o->failures_listed - 100);
}

/* What the run's end says: on stderr, and in the log. */
static void run_end(struct out *o, const struct ferry_summary *sum, int code,
                    const char *manifest, const char *msg)
{
        ferry_log_end(o->log, o->cli, sum, code, manifest, msg);
        int e = ferry_log_close(o->log);
        o->log = NULL;
        if (e)
                fprintf(stderr, "ferry: log file '%s' is incomplete: %s\n",
                        o->cli->log_file, strerror(e));
}

/* A host of a job on a shared manifest (src/shared/): its own summary;
 * the failures are the job's, in the shared manifest. */
static int run_shared(struct out *o, struct ferry_summary *sum,
                      struct ferry_error *err)
{
        const struct ferry_cli *cli = o->cli;
        int code = ferry_shared_copy(&cli->opt, sum, err);
        clear_line(o);
        if (cli->json && ferry_sink_ready(o->so)) {
                print_json_summary(cli, sum, code);
                ferry_sink_flush(o->so);
        } else if (!cli->quiet && !cli->json)
                print_summary(cli, sum);
        run_end(o, sum, code, cli->opt.manifest, err->msg);
        if (err->msg[0])
                fprintf(stderr, "ferry: %s\n", err->msg);
        else if (code == FERRY_EPARTIAL)
                fprintf(stderr, "ferry: some files of the shared job failed; "
                                "run the same command to retry them\n");
        else if (code == FERRY_EMETA)
                fprintf(stderr, "ferry: some directories' metadata of the "
                                "shared job was not applied; run the same "
                                "command to apply it again\n");
        return code;
}

static int run_job(struct ferry_cli *cli, struct sink *so, int argc,
                   char **argv)
{
        struct out o = {.cli = cli,
                        .so = so,
                        .tty = isatty(STDERR_FILENO) == 1,
                        .top = {cli->opt.src, cli->opt.dst}};
        cli->opt.progress = on_progress;
        cli->opt.event = on_event;
        cli->opt.cb_arg = &o;
        struct ferry_error err = {""};
        struct ferry_summary sum;
        memset(&sum, 0, sizeof(sum));
        struct ferry_job *job;
        /* a log that cannot be opened stops ferry before anything else */
        int code =
                cli->log_file ? ferry_log_open(cli->log_file, &o.log, &err) : 0;
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                return code;
        }
        ferry_log_start(o.log, cli, argc, argv);
        /* before the job opens: opening probes DST (files appear there)
         * and may take long on a slow share; a signal meanwhile is a stop
         * that the run then sees at once */
        install_signals();
        if (ferry_manifest_is_shared(cli->opt.manifest))
                return run_shared(&o, &sum, &err);
        code = ferry_job_open(&cli->opt, &job, &err);
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                run_end(&o, &sum, code, NULL, err.msg);
                return code;
        }
        code = cli->command == CMD_VERIFY
                       ? ferry_job_verify(job, cli->verify, &sum, &err)
                       : ferry_job_run(job, &sum, &err);
        char *manifest = strdup(ferry_job_manifest(job));
        ferry_job_close(job);
        clear_line(&o);
        /* the stop was asked for by put_listed: say why at the end */
        so->stopped = so->err && code == FERRY_EINTR;
        if (so->stopped)
                err.msg[0] = '\0';
        if (cli->json && ferry_sink_ready(so)) {
                print_json_summary(cli, &sum, code);
                ferry_sink_flush(so);
        } else if (!cli->quiet && !cli->json)
                print_summary(cli, &sum);
        if (manifest && (sum.files_failed || sum.scan_errors) &&
            cli->command == CMD_COPY && !cli->opt.dry_run)
                list_failures(&o, manifest);
        run_end(&o, &sum, code, manifest, err.msg);
        free(manifest);
        if (err.msg[0])
                fprintf(stderr, "ferry: %s\n", err.msg);
        else if (code == FERRY_EPARTIAL)
                fprintf(stderr, "ferry: some files failed (listed above); run "
                                "the same command to retry them\n");
        else if (code == FERRY_EMETA)
                fprintf(stderr, "ferry: every file's data arrived, but some "
                                "metadata was not applied (`ferry status` "
                                "lists it); run the same command to apply "
                                "it again\n");
        return code;
}

int main(int argc, char **argv)
{
        /* a write to a pipe whose reader is gone fails with EPIPE instead
         * of killing ferry, mid-run or not (struct sink) */
        signal(SIGPIPE, SIG_IGN);
        struct ferry_cli cli;
        struct ferry_error err = {""};
        struct sink so = {0, false};
        int code = ferry_cli_parse(argc, argv, &cli, &err);
        (void)ferry_sink_ready(&so);
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
        } else if (cli.command == CMD_HELP) {
                ferry_cli_help(stdout);
        } else if (cli.command == CMD_VERSION) {
                printf("ferry %s\n", FERRY_VERSION);
                if (ferry_test_hooks_built())
                        printf("test build: FERRY_FAULT and FERRY_CRASH are "
                               "honoured; not for production use\n");
        } else if (cli.command == CMD_STATUS) {
                code = ferry_cli_status(&cli, &so);
        } else if (cli.command == CMD_EXPORT) {
                code = ferry_cli_export(&cli, &so);
        } else if (cli.command == CMD_SET) {
                code = ferry_manifest_is_shared(cli.opt.manifest)
                               ? ferry_cli_set_pg(&cli, &so)
                               : ferry_cli_set(&cli, &so);
        } else {
                code = run_job(&cli, &so, argc, argv);
        }
        ferry_cli_release(&cli);
        if (!ferry_sink_flush(&so)) {
                fprintf(stderr,
                        "ferry: cannot write to standard output: %s%s\n",
                        strerror(so.err),
                        so.stopped ? " (the run stopped: the same command "
                                     "resumes it)"
                                   : "");
                code = output_code(code);
        }
        return code;
}
