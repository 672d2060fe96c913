/*
 * shared.c - the checks of a command line that names a shared manifest
 * (--manifest postgresql://...), or --job-name or --lease without one
 * (cli.h): what a shared job takes so far, and how it is named; and
 * ferry_cli_usage, the error of a bad command line (set.c uses it too).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>

int ferry_cli_usage(struct ferry_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return FERRY_EUSAGE;
}

int ferry_cli_shared_check(const struct ferry_cli *cli, struct ferry_error *err)
{
        bool shared = ferry_manifest_is_shared(cli->opt.manifest);
        if (!shared)
                return cli->opt.job_name || cli->opt.lease
                               ? ferry_cli_usage(
                                         err, "%s",
                                         "--job-name and --lease go with a "
                                         "postgresql:// manifest")
                               : 0;
        bool report = cli->command == CMD_STATUS ||
                      cli->command == CMD_EXPORT || cli->command == CMD_SET;
        const char *word = cli->command == CMD_STATUS   ? "status"
                           : cli->command == CMD_EXPORT ? "export"
                                                        : "set";
        if (report && cli->opt.src)
                return ferry_cli_usage(
                        err,
                        "a shared job is named, not found by its paths: "
                        "ferry %s --manifest URL --job-name NAME",
                        word);
        if (cli->command != CMD_STATUS && report && !cli->opt.job_name)
                return ferry_cli_usage(
                        err, "%s of a shared manifest needs --job-name NAME",
                        word);
        if (report && cli->opt.lease)
                return ferry_cli_usage(err, "%s", "--lease goes with a copy");
        if (cli->failures && !cli->opt.job_name)
                return ferry_cli_usage(
                        err, "%s", "--failures needs a job: --job-name NAME");
        return 0;
}
