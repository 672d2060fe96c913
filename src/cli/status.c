/*
 * status.c - `ferry status`: what the manifest says of a job (cli.h).
 *
 * One read of the manifest (ferry_status_read) gives the counts and then
 * the failures, grouped by cause (side, step, errno: struct ferry_failure)
 * with the most frequent cause first. The text form prints each cause as
 * "1,204 × permission denied reading SRC" and the first STATUS_SHOWN
 * failures of it (all of them with --failures); --json prints every
 * failure with its cause, and the causes with their counts. Entries whose
 * data arrived but whose metadata fell short ("metadata not applied: N")
 * come after the failures, grouped by cause the same way (JSON:
 * metadata_failures, metadata_causes). Within a cause the failures come
 * sorted by path. Without a job, status lists every job (status_list.c).
 */
#define _GNU_SOURCE
#include "cli.h"
#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Failures of one cause the text form prints without --failures. */
#define STATUS_SHOWN 5

/* A cause seen so far (--json prints them at the end). */
struct cause {
        struct ferry_failure fail;
        uint64_t count;
};

struct status_out {
        const struct ferry_cli *cli;
        struct sink *so;
        struct top top;       /* SRC and DST as the status names them */
        bool head;            /* the counts are printed */
        uint64_t rows;        /* failures printed */
        uint64_t meta_rows;   /* metadata shortfalls printed (after) */
        uint64_t per_cause;   /* of each cause; 0: all */
        struct cause *causes; /* --json: owned */
        size_t n_causes, cap_causes;
        size_t n_fail_causes; /* of causes, those of failures (first) */
};

/* Done bytes count the chunks of unfinished files already in DST's temp
 * files (chunks.h), and pending bytes what is left of those files. */
static uint64_t done_bytes(const struct ferry_status_info *i)
{
        return i->done.bytes + i->partial.bytes;
}

static uint64_t pending_bytes(const struct ferry_status_info *i)
{
        return i->pending.bytes > i->partial.bytes
                       ? i->pending.bytes - i->partial.bytes
                       : 0;
}

static void status_text(const struct ferry_status_info *i)
{
        printf("manifest: %s\nsource: %s\ndestination: %s\n", i->manifest,
               i->src, i->dst);
        fputs("running: ", stdout);
        ferry_report_running(stdout, i);
        putchar('\n');
        ferry_cli_put_control(stdout, i, false); /* set.c: live settings */
        ferry_report_time("last run: ", i->last_start);
        if (i->last_start) {
                ferry_report_time(", finished ", i->last_end);
                if (i->last_result >= 0)
                        printf(", result %d (%s)", i->last_result,
                               ferry_code_str(i->last_result));
        }
        printf("\ndone: %llu files, %llu bytes\npending: %llu files, %llu "
               "bytes\n"
               "failed: %llu files\nskipped: %llu files\nvanished: %llu files\n"
               "not in source: %llu files\ndirectories: %llu\n"
               "metadata not applied: %llu\n",
               (unsigned long long)i->done.files,
               (unsigned long long)done_bytes(i),
               (unsigned long long)i->pending.files,
               (unsigned long long)pending_bytes(i),
               (unsigned long long)i->failed.files,
               (unsigned long long)i->skipped.files,
               (unsigned long long)i->vanished.files,
               (unsigned long long)i->not_in_source,
               (unsigned long long)i->dirs, (unsigned long long)i->meta_failed);
        if (i->partial.files)
                printf("in progress: %llu files, %llu bytes copied\n",
                       (unsigned long long)i->partial.files,
                       (unsigned long long)i->partial.bytes);
}

static void status_json_head(const struct ferry_status_info *i)
{
        fputs("{\"manifest\": ", stdout);
        ferry_cli_put_json(stdout, i->manifest, strlen(i->manifest));
        fputs(", \"source\": ", stdout);
        ferry_cli_put_json(stdout, i->src, strlen(i->src));
        fputs(", \"destination\": ", stdout);
        ferry_cli_put_json(stdout, i->dst, strlen(i->dst));
        /* null: whether a run goes on is unknown (lock unreadable) */
        if (i->lock_errno)
                fputs(", \"running_pid\": null", stdout);
        else
                printf(", \"running_pid\": %ld", i->running_pid);
        if (!i->lock_errno && i->running_host[0]) {
                fputs(", \"running_host\": ", stdout);
                ferry_cli_put_json(stdout, i->running_host,
                                   strlen(i->running_host));
        } else {
                fputs(", \"running_host\": null", stdout);
        }
        ferry_cli_put_control(stdout, i, true); /* set.c: live settings */
        printf(", \"last_start\": %lld, \"last_end\": "
               "%lld,"
               " \"last_result\": %d, \"done\": %llu, \"done_bytes\": %llu,"
               " \"pending\": %llu, \"pending_bytes\": %llu, \"failed\": %llu,"
               " \"skipped\": %llu, \"vanished\": %llu, \"not_in_source\": "
               "%llu,"
               " \"directories\": %llu, \"meta_failed\": %llu,"
               " \"partial\": %llu, \"partial_bytes\": %llu,"
               " \"failures\": [",
               (long long)i->last_start, (long long)i->last_end, i->last_result,
               (unsigned long long)i->done.files,
               (unsigned long long)done_bytes(i),
               (unsigned long long)i->pending.files,
               (unsigned long long)pending_bytes(i),
               (unsigned long long)i->failed.files,
               (unsigned long long)i->skipped.files,
               (unsigned long long)i->vanished.files,
               (unsigned long long)i->not_in_source,
               (unsigned long long)i->dirs, (unsigned long long)i->meta_failed,
               (unsigned long long)i->partial.files,
               (unsigned long long)i->partial.bytes);
}

static void on_info(const struct ferry_status_info *info, void *arg)
{
        struct status_out *s = arg;
        /* SRC and DST as the status names them above its failures (info
         * is borrowed for the call); NULL: the lines give "." as is */
        s->top.src = strdup(info->src);
        s->top.dst = strdup(info->dst);
        s->head = true;
        if (!ferry_sink_ready(s->so))
                return;
        if (s->cli->json)
                status_json_head(info);
        else
                status_text(info);
        ferry_sink_failed(s->so);
}

/* The fields of a cause, for JSON: "cause", "key", "side", "step",
 * "errno". */
static void json_cause(const struct ferry_failure *f)
{
        char buf[256];
        fputs("\"cause\": ", stdout);
        ferry_failure_str(f, buf, sizeof(buf));
        ferry_cli_put_json(stdout, buf, strlen(buf));
        fputs(", \"key\": ", stdout);
        ferry_failure_key(f, buf, sizeof(buf));
        ferry_cli_put_json(stdout, buf, strlen(buf));
        printf(", \"side\": \"%s\", \"step\": \"%s\", \"errno\": %d",
               ferry_side_str(f->side), ferry_step_str(f->step), f->err);
}

/* The failures' array ends where the shortfalls' begins. */
static void json_meta_start(struct status_out *s)
{
        fputs("], \"metadata_failures\": [", stdout);
        s->n_fail_causes = s->n_causes;
}

static void json_failure(struct status_out *s,
                         const struct ferry_failure_row *r)
{
        uint64_t done = r->meta ? s->meta_rows : s->rows;
        if (r->meta && !s->meta_rows)
                json_meta_start(s);
        fputs(done ? ", {\"path\": " : "{\"path\": ", stdout);
        ferry_cli_put_json(stdout, r->path, r->path_len);
        fputs(", \"reason\": ", stdout);
        const char *reason = r->reason ? r->reason : "";
        ferry_cli_put_json(stdout, reason, strlen(reason));
        fputs(", ", stdout);
        json_cause(&r->fail);
        fputs("}", stdout);
        if (r->cause_index)
                return;
        if (s->n_causes == s->cap_causes) {
                size_t cap = s->cap_causes ? 2 * s->cap_causes : 16;
                struct cause *p = realloc(s->causes, cap * sizeof(*p));
                if (!p)
                        return; /* the causes list is left short */
                s->causes = p;
                s->cap_causes = cap;
        }
        s->causes[s->n_causes++] = (struct cause){r->fail, r->cause_count};
}

static void text_failure(struct status_out *s,
                         const struct ferry_failure_row *r)
{
        char buf[256];
        if (r->meta && !s->meta_rows)
                puts("metadata not applied, by cause, most frequent first "
                     "(the data arrived; the next run applies it again):");
        else if (!r->meta && !s->rows)
                puts("failures by cause, most frequent first:");
        if (!r->cause_index) {
                ferry_report_count(stdout, r->cause_count);
                printf(" \u00d7 %s\n",
                       ferry_failure_str(&r->fail, buf, sizeof(buf)));
        }
        ferry_report_failure(stdout,
                             r->meta ? "metadata: " : "failed: ", r->path,
                             r->path_len, r->reason, &r->fail, &s->top);
        if (s->per_cause && r->cause_index + 1 == s->per_cause &&
            r->cause_count > s->per_cause) {
                fputs("... and ", stdout);
                ferry_report_count(stdout, r->cause_count - s->per_cause);
                puts(" more of this cause (`ferry status --failures` lists "
                     "them all)");
        }
}

static void on_failure(const struct ferry_failure_row *r, void *arg)
{
        struct status_out *s = arg;
        if (!ferry_sink_ready(s->so))
                return;
        if (s->cli->json)
                json_failure(s, r);
        else
                text_failure(s, r);
        if (r->meta)
                s->meta_rows++;
        else
                s->rows++;
        ferry_sink_failed(s->so);
}

static void json_tail(struct status_out *s)
{
        if (!s->meta_rows)
                json_meta_start(s);
        /* the causes of failures, then those of metadata shortfalls */
        for (int meta = 0; meta < 2; meta++) {
                size_t from = meta ? s->n_fail_causes : 0;
                size_t to = meta ? s->n_causes : s->n_fail_causes;
                fputs(meta ? "], \"metadata_causes\": [" : "], \"causes\": [",
                      stdout);
                for (size_t i = from; i < to; i++) {
                        fputs(i > from ? ", {" : "{", stdout);
                        json_cause(&s->causes[i].fail);
                        printf(", \"count\": %llu}",
                               (unsigned long long)s->causes[i].count);
                }
        }
        puts("]}");
}

int ferry_cli_status(const struct ferry_cli *cli, struct sink *so)
{
        if (ferry_manifest_is_shared(cli->opt.manifest))
                return ferry_cli_status_pg(cli, so);
        if (!cli->opt.manifest && !cli->opt.src)
                return ferry_cli_status_list(cli, so);
        struct ferry_status_info info;
        struct ferry_error err = {""};
        struct status_out s = {.cli = cli, .so = so};
        s.per_cause = cli->json || cli->failures ? 0 : STATUS_SHOWN;
        struct ferry_status_req req = {on_info, on_failure, &s, s.per_cause};
        int code = ferry_status_read(cli->opt.manifest, cli->opt.src,
                                     cli->opt.dst, &req, &info, &err);
        if (s.head && cli->json && ferry_sink_ready(so))
                json_tail(&s);
        if (code)
                fprintf(stderr, "ferry: %s\n", err.msg);
        free((char *)s.top.src);
        free((char *)s.top.dst);
        free(s.causes);
        return code;
}
