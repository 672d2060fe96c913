/*
 * status_list.c - `ferry status` without a job: every job of the state
 * directory (ferry_status_list), one block of lines each, or with --json
 * one object {"state_dir": ..., "jobs": [...]}; and the "running" words
 * both forms of status print (report.h).
 *
 * A job's block says its source and destination, whether a run holds it
 * (pid and host, from its lock), its progress (files and bytes done of
 * those to copy: done, pending and failed), its failures, and its last
 * run: start, end, result code and what the code means. A manifest that
 * cannot be read is listed with the reason, and with what its lock says.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Is host another machine's than this one's? ("" is nobody's.) */
static bool other_host(const char *host)
{
        char me[256];
        if (!host[0] || gethostname(me, sizeof(me)))
                return false;
        me[sizeof(me) - 1] = '\0';
        return strcmp(host, me) != 0;
}

void ferry_report_running(FILE *f, const struct ferry_status_info *i)
{
        if (i->lock_errno)
                fprintf(f, "unknown (lock '%s.lock': %s)", i->manifest,
                        strerror(i->lock_errno));
        else if (i->running_pid < 0) /* held, the holder not named */
                fputs("yes (pid unknown)", f);
        else if (i->running_pid && other_host(i->running_host))
                fprintf(f, "yes (pid %ld on host %s)", i->running_pid,
                        i->running_host);
        else if (i->running_pid)
                fprintf(f, "yes (pid %ld)", i->running_pid);
        else
                fputs("no", f);
}

/* Files and bytes to copy, those done among them. */
static struct ferry_state_count total_of(const struct ferry_status_info *i)
{
        return (struct ferry_state_count){
                i->done.files + i->pending.files + i->failed.files,
                i->done.bytes + i->pending.bytes + i->failed.bytes};
}

static void text_job(const struct ferry_job_entry *e)
{
        const struct ferry_status_info *i = e->info;
        printf("job: %s\n", e->manifest);
        if (e->code) {
                printf("  unreadable: %s\n  running: ", e->error);
                ferry_report_running(stdout, i);
                putchar('\n');
                return;
        }
        printf("  source: %s\n  destination: %s\n  running: ", i->src, i->dst);
        ferry_report_running(stdout, i);
        struct ferry_state_count t = total_of(i);
        printf("\n  progress: %llu of %llu files, %llu of %llu bytes",
               (unsigned long long)i->done.files, (unsigned long long)t.files,
               (unsigned long long)i->done.bytes, (unsigned long long)t.bytes);
        if (t.bytes)
                printf(" (%.1f%%)",
                       100.0 * (double)i->done.bytes / (double)t.bytes);
        printf("\n  failed: %llu files, metadata not applied: %llu\n",
               (unsigned long long)i->failed.files,
               (unsigned long long)i->meta_failed);
        ferry_report_time("  last run: ", i->last_start);
        if (i->last_start) {
                ferry_report_time(", finished ", i->last_end);
                if (i->last_result >= 0)
                        printf(", result %d (%s)", i->last_result,
                               ferry_code_str(i->last_result));
                else if (!i->last_end)
                        fputs(" (still running, or stopped short)", stdout);
        }
        putchar('\n');
}

static void json_str(const char *key, const char *s)
{
        printf(", \"%s\": ", key);
        ferry_cli_put_json(stdout, s, strlen(s));
}

static void json_running(const struct ferry_status_info *i)
{
        /* null: whether a run goes on is unknown (lock unreadable) */
        if (i->lock_errno) {
                fputs(", \"running\": null, \"running_pid\": null, "
                      "\"running_host\": null",
                      stdout);
                return;
        }
        printf(", \"running\": %s, \"running_pid\": %ld",
               i->running_pid ? "true" : "false", i->running_pid);
        if (i->running_host[0])
                json_str("running_host", i->running_host);
        else
                fputs(", \"running_host\": null", stdout);
}

static void json_job(const struct ferry_job_entry *e)
{
        const struct ferry_status_info *i = e->info;
        fputs("{\"manifest\": ", stdout);
        ferry_cli_put_json(stdout, e->manifest, strlen(e->manifest));
        printf(", \"readable\": %s", e->code ? "false" : "true");
        if (e->code)
                json_str("error", e->error);
        else
                fputs(", \"error\": null", stdout);
        json_running(i);
        if (e->code) {
                printf(", \"error_code\": %d}", e->code);
                return;
        }
        json_str("source", i->src);
        json_str("destination", i->dst);
        struct ferry_state_count t = total_of(i);
        printf(", \"done\": %llu, \"done_bytes\": %llu, \"total\": %llu, "
               "\"total_bytes\": %llu, \"pending\": %llu, \"pending_bytes\": "
               "%llu, \"failed\": %llu, \"meta_failed\": %llu, "
               "\"last_start\": %lld, \"last_end\": %lld, \"last_result\": %d",
               (unsigned long long)i->done.files,
               (unsigned long long)i->done.bytes, (unsigned long long)t.files,
               (unsigned long long)t.bytes,
               (unsigned long long)i->pending.files,
               (unsigned long long)i->pending.bytes,
               (unsigned long long)i->failed.files,
               (unsigned long long)i->meta_failed, (long long)i->last_start,
               (long long)i->last_end, i->last_result);
        if (i->last_result >= 0)
                json_str("last_result_text", ferry_code_str(i->last_result));
        else
                fputs(", \"last_result_text\": null", stdout);
        fputs("}", stdout);
}

struct list_out {
        const struct ferry_cli *cli;
        struct sink *so;
        size_t n;
};

static void on_job(const struct ferry_job_entry *e, void *arg)
{
        struct list_out *l = arg;
        if (!ferry_sink_ready(l->so))
                return;
        if (l->cli->json) {
                fputs(l->n ? ",\n  " : "\n  ", stdout);
                json_job(e);
        } else {
                if (l->n)
                        putchar('\n');
                text_job(e);
        }
        l->n++;
        ferry_sink_failed(l->so);
}

int ferry_cli_status_list(const struct ferry_cli *cli, struct sink *so)
{
        struct ferry_error err = {""};
        struct list_out l = {cli, so, 0};
        char *dir = NULL;
        if (cli->json && ferry_sink_ready(so))
                fputs("{\"jobs\": [", stdout);
        int code = ferry_status_list(on_job, &l, &dir, &err);
        if (!ferry_sink_ready(so)) {
                free(dir);
                return code;
        }
        if (cli->json) {
                fputs(l.n ? "\n]" : "]", stdout);
                if (dir)
                        json_str("state_dir", dir);
                puts("}");
        } else if (!code) {
                printf("%s%zu job%s in %s\n", l.n ? "\n" : "", l.n,
                       l.n == 1 ? "" : "s", dir);
        }
        ferry_sink_failed(so);
        if (code)
                fprintf(stderr, "ferry: %s\n", err.msg);
        free(dir);
        return code;
}
