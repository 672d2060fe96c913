/*
 * logfile.c - `--log-file FILE` (logfile.h): the run's events as JSON
 * lines, appended.
 *
 * A line is {"time": "2026-12-01T21:30:00.123Z", "event": "copied",
 * "path": "a/b"}, with "detail" when the library gave one, and for a
 * failure its cause as `ferry status --json` gives it ("cause", "key",
 * "side", "step", "errno"). The run's first line has "event": "start"
 * (command, SRC, DST, options, argv, pid, host), its last "event": "end"
 * (result, result_text, message, manifest, counters). Names are bytes:
 * strings go through the library's one escaper (ferry_escape with
 * FERRY_ESC_JSON) and a path that is not valid UTF-8 has "path_hex", its
 * bytes in hex, as `ferry export --format=jsonl` writes them.
 *
 * Lines gather in a growing buffer; a block of LOG_BLOCK bytes, or what
 * waited LOG_SECONDS, goes out with one write(2).
 */
#define _GNU_SOURCE
#include "logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_BLOCK   (64 * 1024) /* bytes gathered before a write */
#define LOG_SECONDS 1.0         /* the longest a line waits */

struct ferry_log {
        int fd;
        char *buf; /* owned; len bytes of whole lines */
        size_t len, cap;
        bool oom;         /* a line did not fit in memory: dropped */
        int err;          /* errno of the first failed write; 0 */
        double first;     /* monotonic time of the oldest unwritten line */
        time_t stamp_sec; /* the second stamp holds */
        char stamp[32];   /* "2026-12-01T21:30:00" of stamp_sec, UTC */
        const char *path; /* borrowed (argv) */
};

static double mono(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ferry_log_open(const char *path, struct ferry_log **out,
                   struct ferry_error *err)
{
        *out = NULL;
        int fd =
                open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
                     0644);
        if (fd < 0) {
                snprintf(err->msg, sizeof(err->msg),
                         "cannot open log file '%s': %s", path,
                         strerror(errno));
                return FERRY_EUSAGE;
        }
        struct ferry_log *log = calloc(1, sizeof(*log));
        if (!log) {
                close(fd);
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        log->fd = fd;
        log->path = path;
        log->stamp_sec = -1;
        *out = log;
        return 0;
}

/* Room for n more bytes; false (the line dropped) when there is none. */
static bool room(struct ferry_log *log, size_t n)
{
        if (log->len + n <= log->cap)
                return true;
        size_t cap = log->cap ? log->cap : LOG_BLOCK + 4096;
        while (cap < log->len + n)
                cap *= 2;
        char *p = realloc(log->buf, cap);
        if (!p) {
                log->oom = true;
                return false;
        }
        log->buf = p;
        log->cap = cap;
        return true;
}

static void put_raw(struct ferry_log *log, const char *s, size_t n)
{
        if (room(log, n)) {
                memcpy(log->buf + log->len, s, n);
                log->len += n;
        }
}

static void put_str(struct ferry_log *log, const char *s)
{
        put_raw(log, s, strlen(s));
}

static void put_fmt(struct ferry_log *log, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static void put_fmt(struct ferry_log *log, const char *fmt, ...)
{
        char small[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n > 0)
                put_raw(log, small,
                        (size_t)n < sizeof(small) ? (size_t)n
                                                  : sizeof(small) - 1);
}

/* s (len bytes, any bytes) as a JSON string, with its quotes. */
static void put_json(struct ferry_log *log, const char *s, size_t len)
{
        size_t free_now = log->cap - log->len;
        size_t n =
                ferry_escape(log->buf ? log->buf + log->len : NULL,
                             log->buf ? free_now : 0, s, len, FERRY_ESC_JSON);
        if (log->buf && n < free_now) {
                log->len += n;
                return;
        }
        if (!room(log, n + 1))
                return;
        ferry_escape(log->buf + log->len, n + 1, s, len, FERRY_ESC_JSON);
        log->len += n;
}

/* , "path_hex": "..." (the bytes of a path that is not UTF-8) */
static void put_path_hex(struct ferry_log *log, const char *p, size_t n)
{
        static const char digit[] = "0123456789abcdef";
        if (!room(log, 2 * n + 16))
                return;
        put_str(log, ", \"path_hex\": \"");
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)p[i];
                log->buf[log->len++] = digit[c >> 4];
                log->buf[log->len++] = digit[c & 15];
        }
        log->buf[log->len++] = '"';
}

/* , "key": "s" */
static void put_key_str(struct ferry_log *log, const char *key, const char *s)
{
        put_fmt(log, ", \"%s\": ", key);
        if (s)
                put_json(log, s, strlen(s));
        else
                put_str(log, "null");
}

/* Writes out every whole line gathered; the first failure is kept (and
 * said once), and nothing more is written. */
static void flush(struct ferry_log *log)
{
        size_t off = 0;
        while (!log->err && off < log->len) {
                ssize_t n = write(log->fd, log->buf + off, log->len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        log->err = n < 0 ? errno : EIO;
                        fprintf(stderr,
                                "ferry: cannot write log file '%s': %s (the "
                                "run goes on; the log stops here)\n",
                                log->path, strerror(log->err));
                        break;
                }
                off += (size_t)n;
        }
        log->len = 0;
}

/* {"time": "...Z", "event": "name" */
static void line_start(struct ferry_log *log, const char *event)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        if (ts.tv_sec != log->stamp_sec) {
                struct tm tm;
                gmtime_r(&ts.tv_sec, &tm);
                strftime(log->stamp, sizeof(log->stamp), "%Y-%m-%dT%H:%M:%S",
                         &tm);
                log->stamp_sec = ts.tv_sec;
        }
        if (!log->len)
                log->first = mono();
        put_fmt(log, "{\"time\": \"%s.%03ldZ\", \"event\": \"%s\"", log->stamp,
                ts.tv_nsec / 1000000, event);
}

/* Ends the line; writes the block out when it is full or old. */
static void line_end(struct ferry_log *log)
{
        put_str(log, "}\n");
        if (log->len >= LOG_BLOCK || mono() - log->first >= LOG_SECONDS)
                flush(log);
}

void ferry_log_tick(struct ferry_log *log)
{
        if (log && log->len && mono() - log->first >= LOG_SECONDS)
                flush(log);
}

static const char *event_name(enum ferry_event ev)
{
        switch (ev) {
        case FERRY_EV_COPIED: return "copied";
        case FERRY_EV_DELETED: return "deleted";
        case FERRY_EV_FAILED: return "failed";
        case FERRY_EV_VANISHED: return "vanished";
        case FERRY_EV_SKIPPED: return "skipped";
        case FERRY_EV_MISMATCH: return "mismatch";
        case FERRY_EV_MISSING: return "missing";
        case FERRY_EV_WOULD_COPY: return "would_copy";
        case FERRY_EV_WOULD_DELETE: return "would_delete";
        case FERRY_EV_WARNING: return "warning";
        case FERRY_EV_META: return "metadata_applied";
        case FERRY_EV_META_FAILED:
        case FERRY_EV_META_FAILED_MORE: return "metadata_failed";
        case FERRY_EV_META_DIFFERS: return "metadata_differs";
        case FERRY_EV_LINKED: return "linked";
        case FERRY_EV_ADOPTED: return "adopted";
        case FERRY_EV_WOULD_ADOPT: return "would_adopt";
        case FERRY_EV_WOULD_META: return "would_apply_metadata";
        case FERRY_EV_VERIFIED: return "verified";
        }
        return "other";
}

/* , "cause": ..., "key": ..., "side": ..., "step": ..., "errno": N */
static void put_cause(struct ferry_log *log, const struct ferry_failure *f)
{
        char buf[256];
        put_key_str(log, "cause", ferry_failure_str(f, buf, sizeof(buf)));
        put_key_str(log, "key", ferry_failure_key(f, buf, sizeof(buf)));
        put_fmt(log, ", \"side\": \"%s\", \"step\": \"%s\", \"errno\": %d",
                ferry_side_str(f->side), ferry_step_str(f->step), f->err);
}

void ferry_log_event(struct ferry_log *log, enum ferry_event ev,
                     const char *path, size_t len, const char *detail,
                     const struct ferry_failure *fail)
{
        if (!log || log->err)
                return;
        line_start(log, event_name(ev));
        if (!path)
                len = 0;
        put_str(log, ", \"path\": ");
        put_json(log, path ? path : "", len);
        if (!ferry_cli_utf8_valid(path, len))
                put_path_hex(log, path, len);
        if (detail && detail[0])
                put_key_str(log, "detail", detail);
        if (fail && (fail->side || fail->step || fail->err))
                put_cause(log, fail);
        line_end(log);
}

static const char *command_name(const struct ferry_cli *cli)
{
        if (cli->command == CMD_VERIFY)
                return "verify";
        return cli->opt.dry_run ? "dry-run" : "copy";
}

static const char *const durability_name[] = {
        [FERRY_DURABLE_BATCH] = "batch",
        [FERRY_DURABLE_FILE] = "file",
        [FERRY_DURABLE_NONE] = "none",
};

static const char *verify_name(enum ferry_verify_mode v)
{
        return v == FERRY_VERIFY_SOURCE ? "source"
               : v == FERRY_VERIFY_BOTH ? "both"
                                        : "dest";
}

static const char *tf(bool b)
{
        return b ? "true" : "false";
}

/* , "options": {...}: what changes what a run does */
static void put_options(struct ferry_log *log, const struct ferry_cli *cli)
{
        const struct ferry_options *o = &cli->opt;
        put_str(log, ", \"options\": {\"jobs\": ");
        if (o->jobs)
                put_fmt(log, "%u", o->jobs);
        else
                put_str(log, "\"auto\"");
        put_fmt(log,
                ", \"durability\": \"%s\", \"retries\": %u, \"delete\": %s, "
                "\"delete_anyway\": %s, \"max_delete\": %lld, \"dry_run\": "
                "%s, \"hard_links\": %s, \"perms\": %s, \"owner\": %s, "
                "\"times\": %s, \"atimes\": %s, \"xattrs\": %s, \"acls\": %s",
                durability_name[o->durability], o->retries,
                tf(o->delete_removed), tf(o->delete_anyway),
                (long long)o->max_delete, tf(o->dry_run), tf(o->hard_links),
                tf(o->perms), tf(o->owner), tf(o->times), tf(o->atimes),
                tf(o->xattrs), tf(o->acls));
        put_fmt(log,
                ", \"specials\": %s, \"devices\": %s, \"trust_mtime\": %s, "
                "\"one_file_system\": %s, \"adopt\": %s",
                tf(o->specials), tf(o->devices), tf(o->trust_mtime),
                tf(o->one_file_system), tf(o->adopt));
        put_key_str(log, "verify",
                    cli->command == CMD_VERIFY ? verify_name(cli->verify)
                                               : NULL);
        put_str(log, ", \"excludes\": [");
        for (size_t i = 0; i < o->n_excludes; i++) {
                if (i)
                        put_str(log, ", ");
                put_json(log, o->excludes[i], strlen(o->excludes[i]));
        }
        put_str(log, "], \"filters\": [");
        for (size_t i = 0; i < o->n_filters; i++) {
                const struct ferry_filter_rule *r = &o->filters[i];
                put_str(log, i ? ", {\"" : "{\"");
                put_str(log, r->include ? "include\": " : "exclude\": ");
                put_json(log, r->pattern, strlen(r->pattern));
                put_str(log, "}");
        }
        put_str(log, "]");
        put_key_str(log, "files_from", o->files_from);
        put_fmt(log,
                ", \"min_size\": %lld, \"max_size\": %lld, "
                "\"bwlimit\": %llu}",
                (long long)o->min_size, (long long)o->max_size,
                (unsigned long long)o->bwlimit);
}

void ferry_log_start(struct ferry_log *log, const struct ferry_cli *cli,
                     int argc, char **argv)
{
        if (!log)
                return;
        char host[256] = "";
        if (gethostname(host, sizeof(host)))
                host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        line_start(log, "start");
        put_key_str(log, "command", command_name(cli));
        put_fmt(log, ", \"version\": \"%s\", \"pid\": %ld", FERRY_VERSION,
                (long)getpid());
        put_key_str(log, "host", host);
        put_key_str(log, "src", cli->opt.src);
        put_key_str(log, "dst", cli->opt.dst);
        put_key_str(log, "manifest", cli->opt.manifest);
        put_options(log, cli);
        put_str(log, ", \"argv\": [");
        for (int i = 0; i < argc; i++) {
                if (i)
                        put_str(log, ", ");
                put_json(log, argv[i], strlen(argv[i]));
        }
        put_str(log, "]");
        line_end(log);
}

typedef unsigned long long ull;

static void put_counters(struct ferry_log *log, const struct ferry_summary *s)
{
        put_fmt(log,
                ", \"counters\": {\"files_seen\": %llu, \"files_copied\": "
                "%llu, \"bytes_copied\": %llu, \"files_unchanged\": %llu, "
                "\"files_failed\": %llu, \"files_vanished\": %llu",
                (ull)s->files_seen, (ull)s->files_copied, (ull)s->bytes_copied,
                (ull)s->files_unchanged, (ull)s->files_failed,
                (ull)s->files_vanished);
        put_fmt(log,
                ", \"files_skipped\": %llu, \"files_deleted\": %llu, "
                "\"files_linked\": %llu, \"files_adopted\": %llu, "
                "\"meta_applied\": %llu, "
                "\"meta_failed\": %llu, \"meta_differs\": %llu",
                (ull)s->files_skipped, (ull)s->files_deleted,
                (ull)s->files_linked, (ull)s->files_adopted,
                (ull)s->meta_applied, (ull)s->meta_failed,
                (ull)s->meta_differs);
        put_fmt(log,
                ", \"verified\": %llu, \"mismatched\": %llu, \"scan_errors\": "
                "%llu, \"jobs_peak\": %u, \"workers\": %u, \"seconds\": %.3f}",
                (ull)s->verified, (ull)s->mismatched, (ull)s->scan_errors,
                s->jobs_peak, s->workers, s->seconds);
}

void ferry_log_end(struct ferry_log *log, const struct ferry_cli *cli,
                   const struct ferry_summary *sum, int code,
                   const char *manifest, const char *message)
{
        if (!log)
                return;
        line_start(log, "end");
        put_key_str(log, "command", command_name(cli));
        put_fmt(log, ", \"result\": %d", code);
        put_key_str(log, "result_text", ferry_code_str(code));
        put_key_str(log, "message", message && message[0] ? message : NULL);
        put_key_str(log, "manifest", manifest);
        put_counters(log, sum);
        line_end(log);
}

int ferry_log_close(struct ferry_log *log)
{
        if (!log)
                return 0;
        flush(log);
        if (log->oom && !log->err)
                fprintf(stderr,
                        "ferry: log file '%s': some lines were dropped "
                        "(out of memory)\n",
                        log->path);
        int rc = log->err;
        if (close(log->fd) && !rc)
                rc = errno;
        free(log->buf);
        free(log);
        return rc;
}
