/*
 * fuzz_cli.c - libFuzzer target for the command line: the input is split
 * at NUL bytes into argv for ferry_cli_parse, and each argument is also
 * escaped with ferry_cli_put_path and ferry_cli_put_json, whose output must
 * stay printable, valid UTF-8 (the JSON form must have no raw control
 * bytes). A crash, a sanitizer report or a broken invariant is a finding.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* True when s[0..n) is well-formed UTF-8 without C0 controls or DEL. */
static int printable_utf8(const unsigned char *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                unsigned char c = s[i];
                if (c < 0x80) {
                        if (c < 0x20 || c == 0x7f)
                                return 0;
                        i++;
                        continue;
                }
                size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
                if (c < 0xc2 || c > 0xf4 || i + len > n)
                        return 0;
                for (size_t k = 1; k < len; k++)
                        if ((s[i + k] & 0xc0) != 0x80)
                                return 0;
                i += len;
        }
        return 1;
}

static void check_escapes(const char *arg, size_t len)
{
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        if (!f)
                return;
        ferry_cli_put_path(f, arg, len, true);
        fputc(' ', f);
        ferry_cli_put_json(f, arg, len);
        fclose(f);
        if (!printable_utf8((const unsigned char *)buf, n))
                abort();
        free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *copy = malloc(size + 1);
        char **argv = calloc(size + 3, sizeof(*argv));
        if (!copy || !argv)
                goto out;
        memcpy(copy, data, size);
        copy[size] = '\0';
        static char prog[] = "ferry";
        int argc = 0;
        argv[argc++] = prog;
        for (size_t i = 0; i <= size;) {
                size_t len = strlen(copy + i);
                argv[argc++] = copy + i;
                check_escapes(copy + i, len);
                i += len + 1;
        }
        struct ferry_cli cli;
        struct ferry_error err;
        ferry_cli_parse(argc, argv, &cli, &err);
        ferry_cli_release(&cli);
out:
        free(argv);
        free(copy);
        return 0;
}
