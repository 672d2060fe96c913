/*
 * cli.h - the command line: one option table feeds getopt_long, --help and
 * the tests (tests/cli/t10-help-man.sh compares --help with man/ferry.1).
 * main.c is a thin client: parse, call the library, print, exit.
 */
#ifndef FERRY_CLI_H
#define FERRY_CLI_H

#include "ferry.h"

#include <stdbool.h>
#include <stdio.h>

enum ferry_cli_command {
        CMD_COPY,
        CMD_VERIFY,
        CMD_STATUS,
        CMD_EXPORT,
        CMD_SET,
        CMD_HELP,
        CMD_VERSION
};

/* `ferry export --format` (cli/export.c) */
enum ferry_cli_format { FMT_XXH128SUM, FMT_CSV, FMT_JSONL };

struct ferry_cli {
        struct ferry_options opt;
        enum ferry_cli_command command;
        enum ferry_verify_mode verify;
        bool quiet, verbose, json;
        bool failures; /* status: every failure, not the first of each cause */
        const char *log_file;         /* --log-file; borrowed argv */
        enum ferry_cli_format format; /* export */
        bool format_set;
        /* --include/--exclude in order: owned array, patterns borrowed
         * from argv */
        struct ferry_filter_rule *filters;
        size_t n_filters;
        /* `ferry set` (set.c): what to change; --bwlimit and --window also
         * fill opt as run options */
        struct ferry_set_req set;
        bool live_given; /* --pause, --resume (set only) */
};

/* Fills cli from argv (argv must outlive cli). Returns 0 or FERRY_EUSAGE
 * with err set. Free with ferry_cli_release. */
int ferry_cli_parse(int argc, char **argv, struct ferry_cli *cli,
                    struct ferry_error *err);
void ferry_cli_release(struct ferry_cli *cli);
void ferry_cli_help(FILE *out);

/* shared.c: formats err->msg; returns FERRY_EUSAGE (a bad command line,
 * for set.c and shared.c; cli.c has its own). */
int ferry_cli_usage(struct ferry_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* set.c: a window as HH:MM-HH:MM, and a rate in bytes/s and its unit. */
void ferry_cli_put_window(FILE *out, int start, int end);
void ferry_cli_put_rate(FILE *out, uint64_t bytes_per_s);

/* set.c: --bwlimit RATE, --window HH:MM-HH:MM|none, --pause and
 * --resume into cli (0 or FERRY_EUSAGE with err set); the checks of a
 * `ferry set` command line once it is parsed */
int ferry_cli_bwlimit(struct ferry_cli *cli, const char *v,
                      struct ferry_error *err);
int ferry_cli_window(struct ferry_cli *cli, const char *v,
                     struct ferry_error *err);
int ferry_cli_pause(struct ferry_cli *cli, bool pause, struct ferry_error *err);
int ferry_cli_set_check(const struct ferry_cli *cli, struct ferry_error *err);
/* shared.c: the checks of a command line with a postgresql://
 * manifest, or with --job-name or --lease (0 or FERRY_EUSAGE, err set) */
int ferry_cli_shared_check(const struct ferry_cli *cli,
                           struct ferry_error *err);
/* The live settings of status (text lines, or a JSON member with its
 * leading ", "), and ", paused ..." after a progress line. */
void ferry_cli_put_control(FILE *out, const struct ferry_status_info *i,
                           bool json);
void ferry_cli_put_paused(FILE *out, const struct ferry_progress *p);

/* Writes path quoted as 'a\nb' when quote, escaping control bytes,
 * backslashes, quotes and invalid UTF-8 as \xHH. */
void ferry_cli_put_path(FILE *out, const char *path, size_t len, bool quote);
/* The same, as a JSON string with its quotes. */
void ferry_cli_put_json(FILE *out, const char *s, size_t len);
/* s (len bytes) is valid UTF-8 (no overlong forms, surrogates or values
 * past U+10FFFF); where it is not, the JSON of a path carries its bytes
 * in hex too, as "path_hex" (export --format=jsonl, --log-file). */
bool ferry_cli_utf8_valid(const char *s, size_t len);

#endif
