/*
 * export.c - `ferry export`: a job's files, from its manifest, on stdout
 * in one of three formats (cli.h, man/ferry.1 "ferry export"):
 *
 *   xxh128sum  "HASH  PATH" lines of the done regular files, which
 *              `cd DST && xxh128sum -c` checks (xxhash 0.8.1, Debian 12's,
 *              reads a line's name verbatim up to the newline, and a name
 *              "stdin" as standard input). Names it cannot read back are
 *              not written: each is named on stderr with the reason and the
 *              exit code is FERRY_EPARTIAL. Symlinks and special files are
 *              left out (xxh128sum would hash what a link points to); one
 *              line on stderr counts them.
 *   csv        RFC 4180: a header, CRLF line ends, a field quoted when it
 *              holds a comma, a quote, CR or LF, quotes doubled. Paths are
 *              their bytes as they are (any bytes but NUL).
 *   jsonl      one JSON object a line; a path that is not UTF-8 is written
 *              with \u00HH for each such byte, and "path_hex" holds its
 *              exact bytes in hex.
 *
 * csv and jsonl list every file row (any state): path, type, size, mtime
 * (seconds.nanoseconds), mode (octal permission bits), uid, gid, hash
 * (empty / null: none), state.
 *
 * A shared job (--manifest postgresql://... --job-name NAME) is read from
 * its database (manifest_pg/export.c) into the same rows.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "manifest_pg/pg.h"
#include "report.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

struct export_out {
        const struct ferry_cli *cli;
        struct sink *so;
        uint64_t left_out; /* regular files xxh128sum cannot read back */
        uint64_t links;    /* symlinks not in the xxh128sum list */
        uint64_t specials; /* special files not in it */
};

static void put_hex(FILE *f, const unsigned char *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%02x", p[i]);
}

/* Why xxh128sum -c cannot read the name back; NULL: it can. */
static const char *xxh_cannot(const struct ferry_export_row *r)
{
        if (memchr(r->path, '\n', r->path_len))
                return "a newline in the name: xxh128sum -c reads a name up "
                       "to the end of the line";
        if (r->path_len >= PATH_MAX)
                return "longer than PATH_MAX: xxh128sum -c cannot open it";
        return NULL;
}

static void left_out(struct export_out *o, const struct ferry_export_row *r,
                     const char *why)
{
        o->left_out++;
        ferry_report_line(stderr, "ferry: export: not listed: ", r->path,
                          r->path_len, true, why);
}

static int xxh_row(struct export_out *o, const struct ferry_export_row *r)
{
        if (r->type == FERRY_FILE_SYMLINK) {
                o->links++;
                return 0;
        }
        if (r->type != FERRY_FILE_REG) {
                o->specials++;
                return 0;
        }
        const char *why = r->has_hash ? xxh_cannot(r) : "no hash recorded";
        if (why) {
                left_out(o, r, why);
                return 0;
        }
        put_hex(stdout, r->hash, 16);
        /* xxh128sum -c reads a file named "stdin" as standard input */
        bool stdin_name = r->path_len == 5 && !memcmp(r->path, "stdin", 5);
        fputs(stdin_name ? "  ./" : "  ", stdout);
        fwrite(r->path, 1, r->path_len, stdout);
        putchar('\n');
        return 0;
}

/* seconds.nanoseconds, exact, negative times too (-1.5 is sec -2 and
 * nsec 500000000). */
static void put_mtime(FILE *f, const struct ferry_export_row *r)
{
        if (r->mtime_sec < 0 && r->mtime_nsec)
                fprintf(f, "-%llu.%09u",
                        (unsigned long long)(-(r->mtime_sec + 1)),
                        1000000000u - r->mtime_nsec);
        else if (r->mtime_sec < 0)
                fprintf(f, "-%llu.000000000",
                        (unsigned long long)-(r->mtime_sec + 1) + 1);
        else
                fprintf(f, "%lld.%09u", (long long)r->mtime_sec, r->mtime_nsec);
}

static void csv_field(FILE *f, const char *s, size_t len)
{
        bool quote = false;
        for (size_t i = 0; i < len && !quote; i++)
                quote = s[i] == ',' || s[i] == '"' || s[i] == '\r' ||
                        s[i] == '\n';
        if (!quote) {
                fwrite(s, 1, len, f);
                return;
        }
        putc('"', f);
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '"')
                        putc('"', f);
                putc(s[i], f);
        }
        putc('"', f);
}

static int csv_row(const struct ferry_export_row *r)
{
        csv_field(stdout, r->path, r->path_len);
        printf(",%s,%llu,", ferry_file_type_str(r->type),
               (unsigned long long)r->size);
        put_mtime(stdout, r);
        printf(",%04o,%u,%u,", r->mode & 07777, r->uid, r->gid);
        if (r->has_hash)
                put_hex(stdout, r->hash, 16);
        printf(",%s\r\n", ferry_file_state_str(r->state));
        return 0;
}

static int jsonl_row(const struct ferry_export_row *r)
{
        fputs("{\"path\": ", stdout);
        ferry_cli_put_json(stdout, r->path, r->path_len);
        if (!ferry_cli_utf8_valid(r->path, r->path_len)) {
                fputs(", \"path_hex\": \"", stdout);
                put_hex(stdout, (const unsigned char *)r->path, r->path_len);
                putchar('"');
        }
        printf(", \"type\": \"%s\", \"size\": %llu, \"mtime\": \"",
               ferry_file_type_str(r->type), (unsigned long long)r->size);
        put_mtime(stdout, r);
        printf("\", \"mode\": \"%04o\", \"uid\": %u, \"gid\": %u, \"hash\": ",
               r->mode & 07777, r->uid, r->gid);
        if (r->has_hash) {
                putchar('"');
                put_hex(stdout, r->hash, 16);
                putchar('"');
        } else {
                fputs("null", stdout);
        }
        printf(", \"state\": \"%s\"}\n", ferry_file_state_str(r->state));
        return 0;
}

static int on_row(const struct ferry_export_row *r, void *arg)
{
        struct export_out *o = arg;
        if (!ferry_sink_ready(o->so))
                return FERRY_EOUTPUT;
        switch (o->cli->format) {
        case FMT_CSV: csv_row(r); break;
        case FMT_JSONL: jsonl_row(r); break;
        default: xxh_row(o, r); break;
        }
        return ferry_sink_failed(o->so) ? FERRY_EOUTPUT : 0;
}

/* What the xxh128sum list does not hold, on stderr. */
static void xxh_notes(const struct export_out *o)
{
        if (o->cli->quiet)
                return;
        if (o->links)
                fprintf(stderr,
                        "ferry: export: %llu symlinks not listed (xxh128sum "
                        "-c would hash the files they point to; "
                        "--format=csv lists them)\n",
                        (unsigned long long)o->links);
        if (o->specials)
                fprintf(stderr,
                        "ferry: export: %llu special files not listed (no "
                        "content to hash; --format=csv lists them)\n",
                        (unsigned long long)o->specials);
}

/* A shared job's rows (manifest_pg/export.c), as ferry_export_read
 * hands a job's. */
static int read_shared(const struct ferry_cli *cli,
                       const struct ferry_export_req *req,
                       struct ferry_error *err)
{
        struct ferry_pg *pg = NULL;
        int code = ferry_pg_connect(cli->opt.manifest, 10, &pg, err);
        if (code)
                return code;
        code = ferry_pg_export(pg, cli->opt.job_name, req->done_only,
                               req->on_row, req->arg);
        if (code && code != FERRY_EOUTPUT)
                snprintf(err->msg, sizeof(err->msg), "%s", ferry_pg_errmsg(pg));
        ferry_pg_close(pg);
        return code;
}

int ferry_cli_export(const struct ferry_cli *cli, struct sink *so)
{
        struct ferry_error err = {""};
        struct export_out o = {.cli = cli, .so = so};
        struct ferry_export_req req = {cli->format == FMT_XXH128SUM, on_row,
                                       &o};
        if (cli->format == FMT_CSV && ferry_sink_ready(so)) {
                fputs("path,type,size,mtime,mode,uid,gid,hash,state\r\n",
                      stdout);
                ferry_sink_failed(so);
        }
        int code = ferry_manifest_is_shared(cli->opt.manifest)
                           ? read_shared(cli, &req, &err)
                           : ferry_export_read(cli->opt.manifest, cli->opt.src,
                                               cli->opt.dst, &req, &err);
        if (code == FERRY_EOUTPUT)
                return code; /* main says why */
        if (code) {
                fprintf(stderr, "ferry: %s\n", err.msg);
                return code;
        }
        if (cli->format != FMT_XXH128SUM)
                return 0;
        xxh_notes(&o);
        if (!o.left_out)
                return 0;
        fprintf(stderr,
                "ferry: export: %llu done files not listed (named above): "
                "xxh128sum cannot check them\n",
                (unsigned long long)o.left_out);
        return FERRY_EPARTIAL;
}
