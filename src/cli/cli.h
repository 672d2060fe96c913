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
};

/* Fills cli from argv (argv must outlive cli). Returns 0 or FERRY_EUSAGE
 * with err set. Free with ferry_cli_release. */
int ferry_cli_parse(int argc, char **argv, struct ferry_cli *cli,
                    struct ferry_error *err);
void ferry_cli_release(struct ferry_cli *cli);
void ferry_cli_help(FILE *out);

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
