/*
 * fuzz_pattern.c - libFuzzer target for --exclude patterns: the input's
 * lines are patterns up to an empty line, then paths to match against
 * them (each path as a file and as a directory). Compiling and matching
 * must never crash or leak, whatever the bytes.
 */
#define _GNU_SOURCE
#include "pattern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size + 1);
        const char **pats = calloc(size + 1, sizeof(*pats));
        if (!text || !pats)
                goto out;
        memcpy(text, data, size);
        text[size] = '\0';
        size_t n = 0;
        char *line = text, *nl;
        while ((nl = strchr(line, '\n')) && nl != line) {
                *nl = '\0';
                pats[n++] = line;
                line = nl + 1;
        }
        if (nl == line)
                line++;
        struct ferry_patterns *p = NULL;
        if (ferry_patterns_new(pats, n, &p) == 0) {
                while (*line) {
                        char *end = strchr(line, '\n');
                        if (end)
                                *end = '\0';
                        const char *base = strrchr(line, '/');
                        base = base ? base + 1 : line;
                        ferry_patterns_match(p, line, base, false);
                        ferry_patterns_match(p, line, base, true);
                        if (!end)
                                break;
                        line = end + 1;
                }
                ferry_patterns_free(p);
        }
out:
        free(pats);
        free(text);
        return 0;
}
