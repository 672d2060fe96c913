/*
 * report.c - standard output as a sink, and the lines that name a path
 * (report.h).
 */
#include "report.h"
#include "cli.h"

#include <errno.h>
#include <string.h>

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
