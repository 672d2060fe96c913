/*
 * status_pg.c - `ferry status --manifest postgresql://...` (report.h):
 * every job of the shared manifest, one block each; with --job-name that
 * job, its hosts (one line each: running, gone or left, what it copied,
 * its rate, the claims it holds) and its failures (the first STATUS_SHOWN
 * of each kind; all with --failures). --json prints the same as one
 * object. The manifest's URL is never printed: it may hold a password.
 *
 * A host is one run of ferry (hostname:pid). It runs while it renews
 * (every third of its lease); one not seen for a lease that did not say
 * it left is gone: killed, or cut off, and its claims go to the others
 * once their leases run out.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "manifest_pg/pg.h"
#include "report.h"

#include <stdlib.h>
#include <string.h>

/* Failures of one kind the text form prints without --failures. */
#define STATUS_SHOWN 5

static const char *job_state(const struct ferry_pg_job_info *j)
{
        if (!j->files_pending && !j->dirs_to_list && !j->meta_to_apply)
                return j->c.files_failed || j->c.dirs_failed || j->c.meta_failed
                               ? "finished, with failures"
                       : j->c.files_vanished
                               ? "finished, some files vanished from SRC"
                               : "finished";
        if (j->paused)
                return "paused (ferry set --resume ends it)";
        if (!j->hosts_running)
                return "stopped (no host runs it: the same command on any "
                       "host goes on)";
        return j->dirs_to_list    ? "scanning and copying"
               : j->files_pending ? "copying"
                                  : "applying directories' metadata";
}

static void put_count(const char *label, uint64_t n, const char *unit)
{
        fputs(label, stdout);
        ferry_report_count(stdout, n);
        fputs(unit, stdout);
}

static void text_job(const struct ferry_pg_job_info *j, const char *indent)
{
        printf("%sstate: %s\n%shosts: %llu running, %llu joined\n", indent,
               job_state(j), indent, (unsigned long long)j->hosts_running,
               (unsigned long long)j->hosts);
        if (j->host_jobs)
                printf("%sjobs per host: %u (ferry set -j)\n", indent,
                       j->host_jobs);
        printf("%s", indent);
        ferry_report_time("created: ", j->created);
        printf("\n%sprogress: ", indent);
        ferry_report_count(stdout, j->c.files_done);
        put_count(" of ", j->c.files, " files, ");
        ferry_report_count(stdout, j->c.bytes_done);
        put_count(" of ", j->c.bytes, " bytes");
        if (j->c.bytes)
                printf(" (%.1f%%)",
                       100.0 * (double)j->c.bytes_done / (double)j->c.bytes);
        printf("\n%s", indent);
        put_count("pending: ", j->files_pending, " files\n");
        printf("%s", indent);
        put_count("failed: ", j->c.files_failed, " files\n");
        printf("%s", indent);
        put_count("vanished: ", j->c.files_vanished, " files\n");
        printf("%s", indent);
        put_count("directories: ", j->c.dirs, "");
        put_count(" (", j->dirs_to_list, " to list, ");
        put_count("", j->c.dirs_failed, " could not be listed, ");
        put_count("", j->meta_to_apply, " with metadata still to apply)\n");
        printf("%s", indent);
        put_count("metadata not applied: ", j->c.meta_failed, " directories\n");
}

static void json_job(const struct ferry_pg_job_info *j)
{
        fputs("\"name\": ", stdout);
        ferry_cli_put_json(stdout, j->name, strlen(j->name));
        fputs(", \"src_fingerprint\": ", stdout);
        ferry_cli_put_json(stdout, j->src_fp, strlen(j->src_fp));
        fputs(", \"dst_fingerprint\": ", stdout);
        ferry_cli_put_json(stdout, j->dst_fp, strlen(j->dst_fp));
        fputs(", \"state\": ", stdout);
        const char *st = job_state(j);
        ferry_cli_put_json(stdout, st, strlen(st));
        printf(", \"created\": %lld, \"hosts\": %llu, \"hosts_running\": "
               "%llu, \"files\": %llu, \"done\": %llu, \"bytes\": %llu, "
               "\"done_bytes\": %llu, \"pending\": %llu, \"failed\": %llu, "
               "\"vanished\": %llu, "
               "\"directories\": %llu, \"directories_to_list\": %llu, "
               "\"directories_not_listed\": %llu, \"meta_failed\": %llu, "
               "\"meta_to_apply\": %llu, \"paused\": %s, \"host_jobs\": %u",
               (long long)j->created, (unsigned long long)j->hosts,
               (unsigned long long)j->hosts_running,
               (unsigned long long)j->c.files,
               (unsigned long long)j->c.files_done,
               (unsigned long long)j->c.bytes,
               (unsigned long long)j->c.bytes_done,
               (unsigned long long)j->files_pending,
               (unsigned long long)j->c.files_failed,
               (unsigned long long)j->c.files_vanished,
               (unsigned long long)j->c.dirs,
               (unsigned long long)j->dirs_to_list,
               (unsigned long long)j->c.dirs_failed,
               (unsigned long long)j->c.meta_failed,
               (unsigned long long)j->meta_to_apply,
               j->paused ? "true" : "false", j->host_jobs);
}

static void text_host(const struct ferry_pg_host_info *h)
{
        printf("  host %s: ", h->host);
        if (h->running) {
                ferry_report_time("running since ", h->joined);
        } else if (h->left_at) {
                ferry_report_time("left ", h->left_at);
                if (h->result >= 0)
                        printf(", exit %d (%s)", h->result,
                               ferry_code_str(h->result));
        } else {
                ferry_report_time("gone (not seen since ", h->last_seen);
                printf(", its lease %d s)", h->lease_s);
        }
        put_count("; done ", h->files_done, " files, ");
        ferry_report_count(stdout, h->bytes_done);
        fputs(" bytes", stdout);
        if (h->running)
                printf("; rate %.1f files/s, %.0f bytes/s", h->files_per_s,
                       h->bytes_per_s);
        if (h->held_files || h->held_dirs || h->running) {
                put_count("; holds ", h->held_files, " files, ");
                put_count("", h->held_dirs, " directories");
        }
        if (h->held_expired)
                put_count("; ", h->held_expired, " claims whose lease ran out");
        putchar('\n');
}

static void json_host(const struct ferry_pg_host_info *h)
{
        fputs("{\"host\": ", stdout);
        ferry_cli_put_json(stdout, h->host, strlen(h->host));
        printf(", \"running\": %s, \"joined\": %lld, \"last_seen\": %lld, "
               "\"left\": %lld, \"result\": %d, \"lease\": %d, "
               "\"done\": %llu, \"done_bytes\": %llu, \"files_per_s\": %.3f, "
               "\"bytes_per_s\": %.0f, \"held_files\": %llu, \"held_dirs\": "
               "%llu, \"held_expired\": %llu}",
               h->running ? "true" : "false", (long long)h->joined,
               (long long)h->last_seen, (long long)h->left_at, h->result,
               h->lease_s, (unsigned long long)h->files_done,
               (unsigned long long)h->bytes_done, h->files_per_s,
               h->bytes_per_s, (unsigned long long)h->held_files,
               (unsigned long long)h->held_dirs,
               (unsigned long long)h->held_expired);
}

struct fail_out {
        bool json;
        uint64_t n;
};

static const char *const fail_words[] = {"failed", "not listed",
                                         "metadata not applied", "vanished"};

static void on_failure(const struct ferry_pg_failure *f, void *arg)
{
        struct fail_out *o = arg;
        /* the path as SRC's tree names it: dir/name, "." for the top */
        size_t len = f->path_len + (f->name ? f->name_len + 1 : 0);
        char *path = malloc(len + 2);
        if (!path)
                return;
        memcpy(path, f->path, f->path_len);
        if (f->name) {
                size_t at = f->path_len;
                if (at)
                        path[at++] = '/';
                memcpy(path + at, f->name, f->name_len);
                len = at + f->name_len;
        }
        if (!len)
                path[len++] = '.';
        const char *what = fail_words[f->what];
        if (o->json) {
                fputs(o->n ? ", {\"path\": " : "{\"path\": ", stdout);
                ferry_cli_put_json(stdout, path, len);
                printf(", \"what\": \"%s\", \"error\": ", what);
                ferry_cli_put_json(stdout, f->error ? f->error : "",
                                   f->error_len);
                putchar('}');
        } else {
                char why[600];
                snprintf(why, sizeof(why), "%.*s", (int)f->error_len,
                         f->error ? f->error : "");
                printf("  %s: ", what);
                ferry_report_line(stdout, "", path, len, true, why);
        }
        o->n++;
        free(path);
}

/* One job with its hosts and failures. */
static int show_job(const struct ferry_cli *cli, struct ferry_pg *pg,
                    const struct ferry_pg_job_info *j)
{
        struct ferry_pg_host_info *h = NULL;
        size_t nh = 0;
        int rc = ferry_pg_hosts(pg, j->name, &h, &nh);
        if (rc)
                return rc;
        if (cli->json) {
                putchar('{');
                json_job(j);
                fputs(", \"host_list\": [", stdout);
                for (size_t i = 0; i < nh; i++) {
                        fputs(i ? ", " : "", stdout);
                        json_host(&h[i]);
                }
                fputs("], \"failures\": [", stdout);
        } else {
                printf("job: %s\n", j->name);
                text_job(j, "");
                printf("source: %s\ndestination: %s\n", j->src_fp, j->dst_fp);
                for (size_t i = 0; i < nh; i++)
                        text_host(&h[i]);
        }
        ferry_pg_hosts_free(h, nh);
        struct fail_out o = {cli->json, 0};
        uint64_t shown = cli->json || cli->failures ? 0 : STATUS_SHOWN;
        uint64_t failed = j->c.files_failed + j->c.dirs_failed +
                          j->c.meta_failed + j->c.files_vanished;
        if (!cli->json && failed)
                fputs("failures:\n", stdout);
        rc = failed ? ferry_pg_failures(pg, j->name, shown, on_failure, &o) : 0;
        if (cli->json)
                puts("]}");
        else if (!rc && o.n < failed)
                printf("  ... and %llu more (--failures lists them all)\n",
                       (unsigned long long)(failed - o.n));
        return rc;
}

int ferry_cli_status_pg(const struct ferry_cli *cli, struct sink *so)
{
        struct ferry_pg *pg = NULL;
        struct ferry_error err = {""};
        /* a status waits less than a host for a server that is down */
        int rc = ferry_pg_connect(cli->opt.manifest, 10, &pg, &err);
        if (rc) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                return rc;
        }
        struct ferry_pg_job_info *j = NULL;
        size_t n = 0;
        const char *name = cli->opt.job_name;
        rc = ferry_pg_jobs(pg, name, &j, &n);
        if (!rc && name && !n) {
                fprintf(stderr, "ferry: the shared manifest has no job '%s'\n",
                        name);
                rc = FERRY_EPATH;
        } else if (!rc && name) {
                rc = show_job(cli, pg, &j[0]);
        } else if (!rc) {
                fputs(cli->json ? "{\"jobs\": [" : "", stdout);
                for (size_t i = 0; i < n && ferry_sink_ready(so); i++) {
                        if (cli->json) {
                                fputs(i ? ",\n  {" : "\n  {", stdout);
                                json_job(&j[i]);
                                putchar('}');
                        } else {
                                printf("%sjob: %s\n", i ? "\n" : "", j[i].name);
                                text_job(&j[i], "  ");
                        }
                        ferry_sink_failed(so);
                }
                if (cli->json)
                        puts("]}");
                else if (!n)
                        puts("no jobs in this shared manifest");
        }
        if (rc && rc != FERRY_EPATH)
                fprintf(stderr, "ferry: %s\n", ferry_pg_errmsg(pg));
        ferry_pg_jobs_free(j, n);
        ferry_pg_close(pg);
        return rc;
}
