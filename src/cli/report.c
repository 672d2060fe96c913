/*
 * report.c - standard output as a sink, the lines that name a path
 * (report.h), and a path or name written escaped, quoted or as JSON
 * (cli.h: ferry_cli_put_path, ferry_cli_put_json, ferry_cli_utf8_valid).
 */
#define _GNU_SOURCE /* localtime_r */
#include "report.h"
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool ferry_sink_ready(const struct sink *s)
{
        errno = 0;
        return !s->err;
}

bool ferry_sink_failed(struct sink *s)
{
        if (!s->err && ferror(stdout))
                s->err = errno ? errno : EIO;
        return s->err != 0;
}

bool ferry_sink_flush(struct sink *s)
{
        if (!s->err && fflush(stdout) == EOF)
                s->err = errno ? errno : EIO;
        return !ferry_sink_failed(s);
}

void ferry_report_line(FILE *f, const char *prefix, const char *path,
                       size_t len, bool quote, const char *detail)
{
        fputs(prefix, f);
        if (len)
                ferry_cli_put_path(f, path, len, quote);
        if (detail)
                fprintf(f, "%s%s", len ? ": " : "", detail);
        fputc('\n', f);
}

void ferry_report_failure(FILE *f, const char *prefix, const char *path,
                          size_t len, const char *reason,
                          const struct ferry_failure *fail,
                          const struct top *top)
{
        if (len != 1 || path[0] != '.' || !top->src || !top->dst) {
                ferry_report_line(f, prefix, path, len, true, reason);
                return;
        }
        bool src = fail && fail->side == FERRY_SIDE_SRC;
        const char *dir = src ? top->src : top->dst;
        fprintf(f, "%sthe %s directory ", prefix,
                src ? "source" : "destination");
        ferry_report_line(f, "", dir, strlen(dir), true, reason);
}

void ferry_report_count(FILE *f, uint64_t n)
{
        char digits[32];
        int len =
                snprintf(digits, sizeof(digits), "%llu", (unsigned long long)n);
        for (int i = 0; i < len; i++) {
                if (i && (len - i) % 3 == 0)
                        fputc(',', f);
                fputc(digits[i], f);
        }
}

/* Writes s escaped as flags say (ferry_escape, the library's one
 * escaper): from a buffer on the stack, or the heap for a long one. */
static void put_escaped(FILE *out, const char *s, size_t len, unsigned flags)
{
        char small[1024];
        size_t n = ferry_escape(small, sizeof(small), s, len, flags);
        char *big = n < sizeof(small) ? NULL : malloc(n + 1);
        if (big)
                ferry_escape(big, n + 1, s, len, flags);
        else if (n >= sizeof(small))
                n = sizeof(small) - 1; /* out of memory: cut short */
        fwrite(big ? big : small, 1, n, out);
        free(big);
}

void ferry_cli_put_path(FILE *out, const char *path, size_t len, bool quote)
{
        put_escaped(out, path, len,
                    FERRY_ESC_TERMINAL | (quote ? FERRY_ESC_QUOTE : 0));
}

void ferry_cli_put_json(FILE *out, const char *s, size_t len)
{
        put_escaped(out, s, len, FERRY_ESC_JSON);
}

/* s is valid UTF-8 (no overlong forms, surrogates or values past
 * U+10FFFF). */
bool ferry_cli_utf8_valid(const char *str, size_t len)
{
        const unsigned char *s = (const unsigned char *)str;
        size_t i = 0;
        while (i < len) {
                unsigned c = s[i];
                size_t n = c < 0x80             ? 0
                           : (c & 0xe0) == 0xc0 ? 1
                           : (c & 0xf0) == 0xe0 ? 2
                           : (c & 0xf8) == 0xf0 ? 3
                                                : 9;
                if (n == 9 || i + n >= len)
                        return false;
                uint32_t v = n ? c & (0x3f >> n) : c;
                for (size_t k = 1; k <= n; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                        v = v << 6 | (s[i + k] & 0x3f);
                }
                static const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
                if (v < least[n] || v > 0x10ffff ||
                    (v >= 0xd800 && v <= 0xdfff))
                        return false;
                i += n + 1;
        }
        return true;
}

void ferry_report_time(const char *label, int64_t t)
{
        char buf[64] = "never";
        if (t) {
                time_t tt = (time_t)t;
                struct tm tm;
                strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S",
                         localtime_r(&tt, &tm));
        }
        printf("%s%s", label, buf);
}
