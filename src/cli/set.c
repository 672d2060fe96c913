/*
 * set.c - the command line of live control: `ferry set` (ferry_set in
 * ferry.h), the options --bwlimit, --window, --pause and --resume, and how
 * the live settings are shown by `ferry status` and after the progress
 * line ("paused"). `ferry set` of a shared job is set_pg.c.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "report.h"

#include <stdio.h>
#include <string.h>

int ferry_cli_bwlimit(struct ferry_cli *cli, const char *v,
                      struct ferry_error *err)
{
        uint64_t r;
        if (ferry_parse_rate(v, &r))
                return ferry_cli_usage(
                        err,
                        "--bwlimit must be bytes per second with an "
                        "optional K, M or G (powers of 1024), at least 1K, "
                        "or 0 for no limit; not '%s'",
                        v);
        cli->opt.bwlimit = cli->set.bwlimit = r;
        cli->set.set_bwlimit = true;
        return 0;
}

int ferry_cli_window(struct ferry_cli *cli, const char *v,
                     struct ferry_error *err)
{
        int a = -1, b = -1;
        if (strcmp(v, "none") && ferry_parse_window(v, &a, &b))
                return ferry_cli_usage(
                        err,
                        "--window must be HH:MM-HH:MM (local time, start "
                        "and end differ, 19:00-07:00 wraps midnight) or "
                        "none; not '%s'",
                        v);
        cli->opt.window_start = cli->set.window_start = a;
        cli->opt.window_end = cli->set.window_end = b;
        cli->set.set_window = true;
        return 0;
}

int ferry_cli_pause(struct ferry_cli *cli, bool pause, struct ferry_error *err)
{
        if (cli->set.pause == (pause ? 0 : 1))
                return ferry_cli_usage(
                        err, "%s", "--pause and --resume do not go together");
        cli->set.pause = pause ? 1 : 0;
        cli->live_given = true;
        return 0;
}

int ferry_cli_set_check(const struct ferry_cli *cli, struct ferry_error *err)
{
        const struct ferry_set_req *r = &cli->set;
        if (cli->command != CMD_SET) {
                if (cli->live_given)
                        return ferry_cli_usage(
                                err, "%s",
                                "--pause and --resume go with `ferry set` "
                                "only (a run starts unpaused)");
                return 0;
        }
        if (!r->set_bwlimit && !r->set_jobs && !r->set_window && r->pause < 0)
                return ferry_cli_usage(
                        err, "%s",
                        "set needs --bwlimit, -j, --pause, --resume or "
                        "--window (see --help)");
        if (cli->json || cli->failures || cli->format_set || cli->opt.dry_run)
                return ferry_cli_usage(err, "set does not take --%s",
                                       cli->json         ? "json"
                                       : cli->failures   ? "failures"
                                       : cli->format_set ? "format"
                                                         : "dry-run");
        return 0;
}

void ferry_cli_put_window(FILE *out, int a, int b)
{
        fprintf(out, "%02d:%02d-%02d:%02d", a / 60, a % 60, b / 60, b % 60);
}

void ferry_cli_put_rate(FILE *out, uint64_t bps)
{
        const char *unit[] = {"B", "KiB", "MiB", "GiB"};
        double v = (double)bps;
        int u = 0;
        while (v >= 1024 && u < 3) {
                v /= 1024;
                u++;
        }
        fprintf(out, "%llu bytes/s (%.1f %s/s)", (unsigned long long)bps, v,
                unit[u]);
}

/* "no", "yes (ferry set --pause)" or "yes, until HH:MM (outside ...)" */
static void put_pause(FILE *out, const struct ferry_control *c)
{
        if (c->paused) {
                fputs("yes (ferry set --pause; ferry set --resume ends it)",
                      out);
        } else if (!ferry_window_inside(c->window_start, c->window_end,
                                        ferry_window_now())) {
                fprintf(out, "yes, until %02d:%02d (outside the window ",
                        c->window_start / 60, c->window_start % 60);
                ferry_cli_put_window(out, c->window_start, c->window_end);
                fputc(')', out);
        } else {
                fputs("no", out);
        }
}

static void put_text(FILE *out, const struct ferry_control *c)
{
        fputs("bwlimit: ", out);
        if (c->bwlimit)
                ferry_cli_put_rate(out, c->bwlimit);
        else
                fputs("none", out);
        if (c->jobs)
                fprintf(out, "\njobs: %u\nwindow: ", c->jobs);
        else
                fputs("\njobs: auto\nwindow: ", out);
        if (c->window_start >= 0)
                ferry_cli_put_window(out, c->window_start, c->window_end);
        else
                fputs("none", out);
        fputs("\npaused: ", out);
        put_pause(out, c);
        fputc('\n', out);
}

static void put_json(FILE *out, const struct ferry_control *c)
{
        bool outside = !ferry_window_inside(c->window_start, c->window_end,
                                            ferry_window_now());
        fprintf(out, ", \"control\": {\"bwlimit\": %llu, \"jobs\": ",
                (unsigned long long)c->bwlimit);
        if (c->jobs)
                fprintf(out, "%u", c->jobs);
        else
                fputs("\"auto\"", out);
        fputs(", \"window\": ", out);
        if (c->window_start >= 0) {
                fputc('"', out);
                ferry_cli_put_window(out, c->window_start, c->window_end);
                fputc('"', out);
        } else {
                fputs("null", out);
        }
        fprintf(out, ", \"paused\": %s, \"paused_by\": %s, \"serial\": %llu}",
                c->paused || outside ? "true" : "false",
                c->paused ? "\"set\""
                : outside ? "\"window\""
                          : "null",
                (unsigned long long)c->serial);
}

void ferry_cli_put_control(FILE *out, const struct ferry_status_info *i,
                           bool json)
{
        if (json && !i->has_control)
                fputs(", \"control\": null", out);
        else if (json)
                put_json(out, &i->control);
        else if (i->has_control)
                put_text(out, &i->control);
}

void ferry_cli_put_paused(FILE *out, const struct ferry_progress *p)
{
        if (!p->paused)
                return;
        if (p->resume_at >= 0)
                fprintf(out, ", paused until %02d:%02d (--window)",
                        p->resume_at / 60, p->resume_at % 60);
        else
                fputs(", paused (`ferry set --resume` ends it)", out);
}

int ferry_cli_set(const struct ferry_cli *cli, struct sink *so)
{
        struct ferry_control now;
        struct ferry_error err = {""};
        int code = ferry_set(cli->opt.manifest, cli->opt.src, cli->opt.dst,
                             &cli->set, &now, &err);
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                return code;
        }
        if (cli->quiet || !ferry_sink_ready(so))
                return 0;
        printf("sent to the run (pid %ld); it applies it within a second:\n",
               now.pid);
        put_text(stdout, &now);
        ferry_sink_failed(so);
        return 0;
}
