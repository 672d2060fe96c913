/*
 * set_pg.c - `ferry set --manifest postgresql://... --job-name NAME`
 * (report.h): writes the shared job's control (-j, --bwlimit, --window,
 * --pause, --resume) in
 * the database, which every host of the job reads about once a second
 * (src/shared/control.c), and prints it as it is now. Apart from set.c,
 * which the tests of the command line build without the shared manifest.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "manifest_pg/pg.h"
#include "report.h"

#include <stdio.h>

/* The job's --bwlimit and --window for every host, or each host's own. */
static void put_limits(const struct ferry_pg_control *c)
{
        fputs("bwlimit per host: ", stdout);
        if (c->bwlimit > 0)
                ferry_cli_put_rate(stdout, (uint64_t)c->bwlimit);
        else
                fputs(c->bwlimit ? "each host's own --bwlimit" : "none",
                      stdout);
        fputs("\nwindow: ", stdout);
        if (c->window_start >= 0) {
                ferry_cli_put_window(stdout, c->window_start, c->window_end);
                fputs(" (each host's local time)", stdout);
        } else {
                fputs(c->window_start == -1 ? "none"
                                            : "each host's own --window",
                      stdout);
        }
        fputc('\n', stdout);
}

/* A shared job's control (manifest_pg/control.c): every host of the job
 * reads it about once a second. */
int ferry_cli_set_pg(const struct ferry_cli *cli, struct sink *so)
{
        struct ferry_pg *pg = NULL;
        struct ferry_error err = {""};
        struct ferry_pg_control now;
        const struct ferry_set_req *r = &cli->set;
        struct ferry_pg_set want = {
                .pause = r->pause,
                .host_jobs = r->set_jobs ? (int)r->jobs : -1,
                .bwlimit = r->set_bwlimit ? (int64_t)r->bwlimit : -1,
                .window_start = r->set_window ? r->window_start : -2,
                .window_end = r->set_window ? r->window_end : -2,
        };
        int code = ferry_pg_connect(cli->opt.manifest, 10, &pg, &err);
        if (!code) {
                code = ferry_pg_set_control(pg, cli->opt.job_name, &want, &now);
                if (code)
                        snprintf(err.msg, sizeof(err.msg), "%s",
                                 ferry_pg_errmsg(pg));
                ferry_pg_close(pg);
        }
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                return code;
        }
        if (cli->quiet || !ferry_sink_ready(so))
                return 0;
        fputs("set in the shared manifest; each host of the job applies it "
              "within a second:\njobs per host: ",
              stdout);
        if (now.host_jobs)
                printf("%u\n", now.host_jobs);
        else
                fputs("each host's own -j\n", stdout);
        put_limits(&now);
        printf("paused: %s\n",
               now.paused ? "yes (ferry set --resume ends it)" : "no");
        ferry_sink_failed(so);
        return 0;
}
