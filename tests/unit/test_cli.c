/*
 * test_cli.c - the command line (src/cli/cli.h, src/cli/cli.c compiled
 * into this test): option parsing and its usage errors, --help, and the
 * escaping of paths in messages and JSON. The escaping is checked against
 * decoders written here: what ferry prints must decode back to the bytes
 * of the name, and JSON must be valid (strict UTF-8, no raw controls).
 */
#define _GNU_SOURCE
#include "unit.h"

#include "cli.h"

#include <getopt.h>

/* ---- parsing ---- */

struct parsed {
        struct ferry_cli cli;
        struct ferry_error err;
        int rc;
        int argc;
        char *argv[32];
};

/* ferry_cli_parse restarts getopt with optind = 1, which does not clear
 * glibc's state left by an earlier parse (see test_parse_twice): start
 * each parse from a clean state, as the single parse of a real run does. */
static void reset_getopt(void)
{
        char *dummy[] = {(char *)"x", NULL};
        optind = 0; /* glibc: reinitialize on the next call */
        opterr = 0;
        (void)getopt(1, dummy, "");
}

/* Parses "ferry" followed by the NULL-terminated arguments. The strings
 * are copies that live until done(): cli borrows them. */
static void parse_args_raw(struct parsed *p, const char *const *args)
{
        memset(p, 0, sizeof(*p));
        p->argv[p->argc++] = strdup("ferry");
        for (size_t i = 0; args[i] && p->argc < 31; i++)
                p->argv[p->argc++] = strdup(args[i]);
        p->argv[p->argc] = NULL;
        p->rc = ferry_cli_parse(p->argc, p->argv, &p->cli, &p->err);
}

static void parse_args(struct parsed *p, const char *const *args)
{
        reset_getopt();
        parse_args_raw(p, args);
}
#define PARSE(p, ...) parse_args((p), (const char *const[]){__VA_ARGS__, NULL})

static void done(struct parsed *p)
{
        ferry_cli_release(&p->cli);
        for (int i = 0; i < p->argc; i++)
                free(p->argv[i]);
}

/* Expects a usage error whose message mentions part (may be NULL). */
static void usage_at(const char *file, int line, const char *part,
                     const char *const *args)
{
        struct parsed p;
        parse_args(&p, args);
        if (p.rc != FERRY_EUSAGE)
                unit_fail(file, line, "parse returned %d, not FERRY_EUSAGE",
                          p.rc);
        else if (!p.err.msg[0] || (part && !strstr(p.err.msg, part)))
                unit_fail(file, line, "usage message '%s' lacks '%s'",
                          p.err.msg, part ? part : "");
        else
                atomic_fetch_add(&unit_passed, 1);
        done(&p);
}
#define USAGE(part, ...)                                                       \
        usage_at(__FILE__, __LINE__, (part),                                   \
                 (const char *const[]){__VA_ARGS__, NULL})

static void test_defaults(void)
{
        struct parsed p;
        PARSE(&p, "from", "to");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_COPY);
        CHECK_STR(p.cli.opt.src, "from");
        CHECK_STR(p.cli.opt.dst, "to");
        CHECK(p.cli.opt.manifest == NULL);
        CHECK_EQ(p.cli.opt.n_excludes, 0);
        CHECK_EQ(p.cli.opt.n_filters, 0);
        CHECK(p.cli.opt.files_from == NULL);
        CHECK_EQ(p.cli.opt.min_size, -1);
        CHECK_EQ(p.cli.opt.max_size, -1);
        /* the documented defaults of ferry_options_init (ferry.h) */
        CHECK_EQ(p.cli.opt.jobs, 0); /* -j auto */
        CHECK_EQ(p.cli.opt.scanners, 64);
        CHECK_EQ(p.cli.opt.retries, 3);
        CHECK_EQ(p.cli.opt.durability, FERRY_DURABLE_BATCH);
        CHECK(p.cli.opt.hard_links && p.cli.opt.perms && p.cli.opt.owner &&
              p.cli.opt.times);
        CHECK(!p.cli.opt.delete_removed && !p.cli.opt.dry_run);
        CHECK(!p.cli.opt.delete_anyway);
        CHECK_EQ(p.cli.opt.max_delete, -1);
        CHECK_EQ(p.cli.opt.verify, 0);
        CHECK(!p.cli.quiet && !p.cli.verbose && !p.cli.json);
        /* and the parser starts from exactly those */
        struct ferry_options def;
        ferry_options_init(&def);
        CHECK_EQ(p.cli.opt.jobs, def.jobs);
        CHECK_EQ(p.cli.opt.scanners, def.scanners);
        CHECK_EQ(p.cli.opt.retries, def.retries);
        done(&p);
}

static void test_flags(void)
{
        struct parsed p;
        PARSE(&p, "-n", "-q", "-v", "--json", "--delete", "--no-hard-links",
              "--no-perms", "--no-owner", "--no-times", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK(p.cli.opt.dry_run && p.cli.quiet && p.cli.verbose && p.cli.json &&
              p.cli.opt.delete_removed);
        CHECK(!p.cli.opt.hard_links && !p.cli.opt.perms && !p.cli.opt.owner &&
              !p.cli.opt.times);
        done(&p);

        /* special files and mount points (defaults: ferry_options_init) */
        PARSE(&p, "a", "b");
        CHECK(p.cli.opt.specials && p.cli.opt.devices &&
              !p.cli.opt.one_file_system);
        done(&p);
        PARSE(&p, "--no-specials", "--no-devices", "-x", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK(!p.cli.opt.specials && !p.cli.opt.devices &&
              p.cli.opt.one_file_system);
        done(&p);
        PARSE(&p, "--one-file-system", "a", "b");
        CHECK(p.cli.opt.one_file_system && p.cli.opt.specials);
        done(&p);

        /* options after the operands, and "--" before a dash name */
        PARSE(&p, "a", "b", "--dry-run", "--quiet");
        CHECK_EQ(p.rc, 0);
        CHECK(p.cli.opt.dry_run && p.cli.quiet);
        CHECK_STR(p.cli.opt.src, "a");
        CHECK_STR(p.cli.opt.dst, "b");
        done(&p);
        PARSE(&p, "-n", "--", "-src", "--dst");
        CHECK_EQ(p.rc, 0);
        CHECK_STR(p.cli.opt.src, "-src");
        CHECK_STR(p.cli.opt.dst, "--dst");
        done(&p);

        PARSE(&p, "--exclude", "*.tmp", "--include=/top", "-n", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.n_filters, 2);
        CHECK_EQ(p.cli.opt.n_filters, 2);
        CHECK_EQ(p.cli.opt.n_excludes, 0);
        CHECK(p.cli.opt.filters == p.cli.filters);
        if (p.cli.n_filters == 2) {
                CHECK_STR(p.cli.filters[0].pattern, "*.tmp");
                CHECK(!p.cli.filters[0].include);
                CHECK_STR(p.cli.filters[1].pattern, "/top");
                CHECK(p.cli.filters[1].include);
        }
        done(&p);
        USAGE("exclude", "--exclude", "", "a", "b");
        USAGE("exclude", "--exclude=/", "a", "b");
        USAGE("include", "--include=", "a", "b");
        PARSE(&p, "--max-size", "10M", "--min-size=4k", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.opt.max_size, 10 * 1024 * 1024);
        CHECK_EQ(p.cli.opt.min_size, 4096);
        done(&p);
        USAGE("max-size", "--max-size", "12Q", "a", "b");
        USAGE("min-size", "--min-size", "-1", "a", "b");
        USAGE("max-size", "--max-size", "", "a", "b");
        USAGE("from0", "--from0", "a", "b");

        PARSE(&p, "--manifest", "/tmp/m.db", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK_STR(p.cli.opt.manifest, "/tmp/m.db");
        done(&p);
        USAGE("manifest", "--manifest=", "a", "b");
}

static void test_jobs_and_retries(void)
{
        const struct {
                const char *arg;
                unsigned want;
        } ok[] = {{"1", 1}, {"1024", 1024}, {"16", 16}, {"007", 7}};
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                struct parsed p;
                PARSE(&p, "-j", ok[i].arg, "a", "b");
                CHECK_EQ(p.rc, 0);
                CHECK_EQ(p.cli.opt.jobs, ok[i].want);
                done(&p);
        }
        struct parsed p;
        PARSE(&p, "--jobs=8", "a", "b");
        CHECK_EQ(p.cli.opt.jobs, 8);
        done(&p);
        PARSE(&p, "-j5", "a", "b");
        CHECK_EQ(p.cli.opt.jobs, 5);
        done(&p);
        PARSE(&p, "-j", "4", "--jobs=auto", "a", "b"); /* the last one wins */
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.opt.jobs, 0);
        done(&p);
        PARSE(&p, "-j", "auto", "-j", "9", "a", "b");
        CHECK_EQ(p.cli.opt.jobs, 9);
        done(&p);

        const char *bad[] = {"0",
                             "1025",
                             "abc",
                             "-1",
                             "",
                             "4x",
                             "99999999999999999999999",
                             "0x10",
                             "1.5",
                             "Auto",
                             "auto4",
                             "au"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                USAGE("--jobs", "-j", bad[i], "a", "b");
        USAGE("--jobs", "--jobs=0", "a", "b");

        PARSE(&p, "--retries", "0", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.opt.retries, 0);
        done(&p);
        PARSE(&p, "--retries=100", "a", "b");
        CHECK_EQ(p.cli.opt.retries, 100);
        done(&p);
        USAGE("--retries", "--retries", "101", "a", "b");
        USAGE("--retries", "--retries", "many", "a", "b");
}

static void test_durability(void)
{
        const struct {
                const char *arg;
                enum ferry_durability want;
        } ok[] = {{"batch", FERRY_DURABLE_BATCH},
                  {"file", FERRY_DURABLE_FILE},
                  {"none", FERRY_DURABLE_NONE}};
        for (size_t i = 0; i < 3; i++) {
                struct parsed p;
                PARSE(&p, "--durability", ok[i].arg, "a", "b");
                CHECK_EQ(p.rc, 0);
                CHECK_EQ(p.cli.opt.durability, ok[i].want);
                done(&p);
        }
        USAGE("sync", "--durability=sync", "a", "b");
        USAGE("durability", "--durability", "", "a", "b");
        USAGE("batch", "--durability", "BATCH", "a", "b");
}

/* --delete-anyway is --delete without the guard; --max-delete N >= 0 */
static void test_delete_options(void)
{
        struct parsed p;
        PARSE(&p, "--delete-anyway", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK(p.cli.opt.delete_removed && p.cli.opt.delete_anyway);
        done(&p);
        PARSE(&p, "--delete", "--max-delete", "0", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK(p.cli.opt.delete_removed && !p.cli.opt.delete_anyway);
        CHECK_EQ(p.cli.opt.max_delete, 0);
        done(&p);
        PARSE(&p, "--max-delete=9223372036854775807", "a", "b");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.opt.max_delete, INT64_MAX);
        done(&p);
        USAGE("--max-delete", "--max-delete", "-1", "a", "b");
        USAGE("--max-delete", "--max-delete", " 1", "a", "b");
        USAGE("--max-delete", "--max-delete", "", "a", "b");
        USAGE("--max-delete", "--max-delete", "1k", "a", "b");
        USAGE("--max-delete", "--max-delete=9223372036854775808", "a", "b");
}

static void test_verify(void)
{
        const struct {
                const char *opt;
                enum ferry_verify_mode want;
        } ok[] = {{"--verify", FERRY_VERIFY_DEST},
                  {"--verify=dest", FERRY_VERIFY_DEST},
                  {"--verify=source", FERRY_VERIFY_SOURCE},
                  {"--verify=both", FERRY_VERIFY_BOTH}};
        for (size_t i = 0; i < 4; i++) {
                struct parsed p;
                PARSE(&p, ok[i].opt, "a", "b");
                CHECK_EQ(p.rc, 0);
                CHECK_EQ(p.cli.command, CMD_VERIFY);
                CHECK_EQ(p.cli.verify, ok[i].want);
                CHECK_EQ(p.cli.opt.verify, ok[i].want);
                done(&p);
        }
        USAGE("dest, source or both", "--verify=all", "a", "b");
        USAGE("dry-run", "--verify", "-n", "a", "b");
        /* the value is optional: a separate word is an operand */
        USAGE(NULL, "--verify", "source", "a", "b");
        struct parsed p;
        PARSE(&p, "a", "b");
        CHECK_EQ(p.cli.opt.verify, 0); /* a copy job */
        done(&p);
}

static void test_status_forms(void)
{
        struct parsed p;
        PARSE(&p, "status", "s", "d");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_STATUS);
        CHECK_STR(p.cli.opt.src, "s");
        CHECK_STR(p.cli.opt.dst, "d");
        done(&p);

        PARSE(&p, "status", "--manifest", "/m.db");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_STATUS);
        CHECK_STR(p.cli.opt.manifest, "/m.db");
        CHECK(p.cli.opt.src == NULL && p.cli.opt.dst == NULL);
        done(&p);

        PARSE(&p, "--json", "--manifest=/m.db", "status");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_STATUS);
        CHECK(p.cli.json);
        done(&p);

        /* status alone: the list of every job */
        PARSE(&p, "status");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_STATUS);
        CHECK(p.cli.opt.src == NULL && p.cli.opt.manifest == NULL);
        done(&p);
        PARSE(&p, "status", "--json");
        CHECK_EQ(p.rc, 0);
        CHECK(p.cli.json);
        done(&p);
        USAGE("--failures needs a job", "status", "--failures");
        USAGE("--log-file goes with a copy or --verify", "status", "--log-file",
              "/l", "s", "d");
        /* not a copy of ./status into d */
        USAGE("status needs SRC and DST, or --manifest", "status", "d");
        USAGE("--verify", "status", "--verify", "s", "d");
        USAGE("too many arguments: 'e' after", "status", "s", "d", "e");
}

static void test_log_file(void)
{
        struct parsed p;
        PARSE(&p, "--log-file", "/l.jsonl", "s", "d");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_COPY);
        CHECK_STR(p.cli.log_file, "/l.jsonl");
        done(&p);
        PARSE(&p, "--verify", "--log-file=/l", "s", "d");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_VERIFY);
        CHECK_STR(p.cli.log_file, "/l");
        done(&p);
        USAGE("--log-file needs a file name", "--log-file=", "s", "d");
        USAGE("--log-file goes with a copy", "export", "--log-file", "/l", "s",
              "d");
}

static void test_export_forms(void)
{
        struct parsed p;
        PARSE(&p, "export", "s", "d");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_EXPORT);
        CHECK_EQ(p.cli.format, FMT_XXH128SUM);
        CHECK_STR(p.cli.opt.src, "s");
        done(&p);

        PARSE(&p, "--format=jsonl", "export", "--manifest", "/m.db");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_EXPORT);
        CHECK_EQ(p.cli.format, FMT_JSONL);
        CHECK_STR(p.cli.opt.manifest, "/m.db");
        done(&p);

        PARSE(&p, "export", "--format", "csv", "s", "d");
        CHECK_EQ(p.cli.format, FMT_CSV);
        done(&p);

        USAGE("xxh128sum, csv or jsonl, not 'md5'", "export", "--format=md5",
              "s", "d");
        USAGE("--format goes with export only", "--format=csv", "s", "d");
        USAGE("--format goes with export only", "status", "--format=csv", "s",
              "d");
        USAGE("export does not take --json", "export", "--json", "s", "d");
        USAGE("export does not take --failures", "export", "--failures", "s",
              "d");
        USAGE("export needs SRC DST or --manifest", "export");
        /* not a copy of ./export into d */
        USAGE("write ./export", "export", "d");
        USAGE("export does not take --verify", "export", "--verify", "s", "d");
}

static void test_usage_errors(void)
{
        USAGE("--bogus", "--bogus", "a", "b");
        USAGE("-Z", "-Z", "a", "b");
        USAGE("needs a value", "a", "b", "-j");
        USAGE("needs a value", "a", "b", "--jobs");
        USAGE("needs a value", "a", "b", "--manifest");
        USAGE("needs a value", "a", "b", "--exclude");
        USAGE("missing DST ", "a");
        USAGE("missing SRC and DST", NULL);
        USAGE("too many arguments: 'c' after", "a", "b", "c");
        USAGE("empty", "", "b");
        USAGE("empty", "a", "");
        /* --help and --version need no operands */
        struct parsed p;
        PARSE(&p, "--help");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_HELP);
        done(&p);
        PARSE(&p, "-h", "x", "y", "z");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_HELP);
        done(&p);
        PARSE(&p, "-V");
        CHECK_EQ(p.rc, 0);
        CHECK_EQ(p.cli.command, CMD_VERSION);
        done(&p);
}

/* A parse that stops inside "-Zq" must not leak into the next parse. */
static void test_parse_twice(void)
{
        struct parsed first, second;
        PARSE(&first, "-Zq", "a", "b");
        CHECK_EQ(first.rc, FERRY_EUSAGE);
        /* no reset in between; first's strings are still alive */
        parse_args_raw(&second, (const char *const[]){"c", "d", NULL});
        bool fresh = second.rc == 0 && !second.cli.quiet &&
                     second.cli.opt.src && !strcmp(second.cli.opt.src, "c");
        if (!fresh)
                fprintf(stderr, "  second parse: rc %d, quiet %d, '%s'\n",
                        second.rc, second.cli.quiet, second.err.msg);
        /* regression: ferry_cli_parse resets getopt with optind = 1, not 0:
         * after an error inside an option cluster (\"-xq\") the next parse of
         * \"c d\" still reads the old argv (fixed) */
        CHECK(fresh);
        done(&second);
        done(&first);
}

static void test_help_lists_every_option(void)
{
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        ferry_cli_help(out);
        fclose(out);
        const char *names[] = {
                "jobs",       "manifest",       "exclude",       "delete",
                "dry-run",    "no-hard-links",  "delete-anyway", "max-delete",
                "no-perms",   "no-owner",       "no-times",      "durability",
                "retries",    "verify",         "quiet",         "verbose",
                "json",       "help",           "version",       "no-specials",
                "no-devices", "one-file-system"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char opt[64];
                snprintf(opt, sizeof(opt), "--%s", names[i]);
                if (!strstr(text, opt))
                        unit_fail(__FILE__, __LINE__, "--help lacks %s", opt);
                else
                        atomic_fetch_add(&unit_passed, 1);
        }
        CHECK(strstr(text, "-j, --jobs N|auto") != NULL);
        CHECK(strstr(text, "--verify[=WHAT]") != NULL);
        CHECK(strstr(text, "usage: ferry") != NULL);
        CHECK(strstr(text, "exit codes") != NULL);
        CHECK(strstr(text, "(default auto") != NULL); /* as ferry.h says */
        free(text);
}

/* ---- escaping ---- */

static char *put_path(const char *s, size_t n, bool quote, size_t *len)
{
        char *text = NULL;
        size_t l = 0;
        FILE *out = open_memstream(&text, &l);
        ferry_cli_put_path(out, s, n, quote);
        fclose(out);
        *len = l;
        return text;
}

static char *put_json(const char *s, size_t n, size_t *len)
{
        char *text = NULL;
        size_t l = 0;
        FILE *out = open_memstream(&text, &l);
        ferry_cli_put_json(out, s, n);
        fclose(out);
        *len = l;
        return text;
}

/* Length of the strictly valid UTF-8 sequence at s (no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0. */
static size_t strict_utf8(const unsigned char *s, size_t left)
{
        if (s[0] < 0x80)
                return 1;
        size_t n;
        unsigned lo = 0x80, hi = 0xbf;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2;
        else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                n = 3;
                if (s[0] == 0xe0)
                        lo = 0xa0;
                if (s[0] == 0xed)
                        hi = 0x9f;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                n = 4;
                if (s[0] == 0xf0)
                        lo = 0x90;
                if (s[0] == 0xf4)
                        hi = 0x8f;
        } else {
                return 0;
        }
        if (n > left || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

static bool valid_utf8(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = strict_utf8(p + i, len - i);
                if (!n)
                        return false;
                i += n;
        }
        return true;
}

static int hexval(int c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decodes ferry's path escaping; returns the length or -1 when the text
 * is not something put_path may write (raw controls, bad escapes). */
static long unescape_path(const char *t, size_t len, bool quote, char *out)
{
        size_t i = 0, o = 0;
        if (quote) {
                if (len < 2 || t[0] != '\'' || t[len - 1] != '\'')
                        return -1;
                i = 1;
                len--;
        }
        while (i < len) {
                unsigned char c = (unsigned char)t[i++];
                if (c < 0x20 || c == 0x7f)
                        return -1;
                if (quote && c == '\'')
                        return -1; /* an unescaped quote inside */
                if (c != '\\') {
                        out[o++] = (char)c;
                        continue;
                }
                if (i >= len)
                        return -1;
                c = (unsigned char)t[i++];
                if (c == 'n')
                        out[o++] = '\n';
                else if (c == 't')
                        out[o++] = '\t';
                else if (c == '\\' || c == '\'')
                        out[o++] = (char)c;
                else if (c == 'x' && i + 2 <= len && hexval(t[i]) >= 0 &&
                         hexval(t[i + 1]) >= 0) {
                        out[o++] = (char)(hexval(t[i]) * 16 + hexval(t[i + 1]));
                        i += 2;
                } else
                        return -1;
        }
        return (long)o;
}

static size_t put_utf8(unsigned cp, char *out)
{
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xc0 | cp >> 6);
                out[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xe0 | cp >> 12);
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

/* A strict JSON string parser (RFC 8259): returns the decoded UTF-8
 * length, or -1 when t is not exactly one valid JSON string. */
static long parse_json_string(const char *t, size_t len, char *out)
{
        if (len < 2 || t[0] != '"' || t[len - 1] != '"')
                return -1;
        if (!valid_utf8(t, len))
                return -1;
        size_t i = 1, o = 0, end = len - 1;
        while (i < end) {
                unsigned char c = (unsigned char)t[i++];
                if (c < 0x20 || c == '"')
                        return -1;
                if (c != '\\') {
                        out[o++] = (char)c;
                        continue;
                }
                if (i >= end)
                        return -1;
                c = (unsigned char)t[i++];
                const char *simple = "\"\\/bfnrt", *value = "\"\\/\b\f\n\r\t";
                const char *k = c ? strchr(simple, c) : NULL;
                if (k) {
                        out[o++] = value[k - simple];
                        continue;
                }
                if (c != 'u' || i + 4 > end)
                        return -1;
                unsigned cp = 0;
                for (int j = 0; j < 4; j++) {
                        int h = hexval(t[i + (size_t)j]);
                        if (h < 0)
                                return -1;
                        cp = cp * 16 + (unsigned)h;
                }
                i += 4;
                if (cp >= 0xd800 && cp <= 0xdfff)
                        return -1; /* ferry never needs surrogate pairs */
                o += put_utf8(cp, out + o);
        }
        return (long)o;
}

static void test_put_path_examples(void)
{
        const struct {
                const char *in;
                size_t len;
                bool quote;
                const char *want;
        } cases[] = {
                {"plain", 5, true, "'plain'"},
                {"a\nb", 3, true, "'a\\nb'"},
                {"a\nb", 3, false, "a\\nb"},
                {"t\tab", 4, false, "t\\tab"},
                {"it's", 4, true, "'it\\'s'"},
                {"it's", 4, false, "it's"},
                {"back\\slash", 10, false, "back\\\\slash"},
                {"\xff", 1, false, "\\xff"},
                {"\r\x01\x7f", 3, false, "\\x0d\\x01\\x7f"},
                {"a\0b", 3, false, "a\\x00b"},
                {"caf\xc3\xa9", 5, true, "'caf\xc3\xa9'"},
                {"\xe2\x82\xac euro", 8, false, "\xe2\x82\xac euro"},
                {"\xf0\x9f\x98\x80", 4, false, "\xf0\x9f\x98\x80"},
                {"\xc0\xaf", 2, false, "\\xc0\\xaf"}, /* overlong '/' */
                {"\xe2\x82", 2, false, "\\xe2\\x82"}, /* cut short */
                {"\xc3(", 2, false, "\\xc3("},
                {"\xf8", 1, false, "\\xf8"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t len = 0;
                char *got = put_path(cases[i].in, cases[i].len, cases[i].quote,
                                     &len);
                if (len != strlen(cases[i].want) ||
                    memcmp(got, cases[i].want, len))
                        unit_fail(__FILE__, __LINE__,
                                  "put_path case %zu: got '%s', want '%s'", i,
                                  got, cases[i].want);
                else
                        atomic_fetch_add(&unit_passed, 1);
                free(got);
        }
}

static void test_put_path_round_trip(void)
{
        uint64_t seed = 12345;
        char in[64], dec[64];
        int bad = 0;
        for (int round = 0; round < 5000; round++) {
                size_t n = (size_t)(unit_rand(&seed) % sizeof(in));
                for (size_t i = 0; i < n; i++)
                        in[i] = (char)(unit_rand(&seed) >> 56);
                bool quote = round % 2;
                size_t len = 0;
                char *got = put_path(in, n, quote, &len);
                long back = unescape_path(got, len, quote, dec);
                if (back != (long)n || memcmp(dec, in, n))
                        bad++;
                free(got);
        }
        CHECK_EQ(bad, 0);
}

/* Sequences that a lenient decoder takes for UTF-8 but are not. */
static const struct {
        const char *bytes;
        size_t len;
        const char *what;
} not_utf8[] = {
        {"\xe0\x80\x80", 3, "overlong 3-byte NUL"},
        {"\xe0\x9f\xbf", 3, "overlong U+07FF"},
        {"\xed\xa0\x80", 3, "surrogate U+D800"},
        {"\xed\xbf\xbf", 3, "surrogate U+DFFF"},
        {"\xf0\x80\x80\x80", 4, "overlong 4-byte"},
        {"\xf4\x90\x80\x80", 4, "above U+10FFFF"},
        {"\xf5\x80\x80", 3, "lead byte 0xf5 taken as a 3-byte lead"},
        {"\xff\xbf\xbf", 3, "lead byte 0xff taken as a 3-byte lead"},
};

static void test_invalid_utf8_is_escaped(void)
{
        size_t n = sizeof(not_utf8) / sizeof(not_utf8[0]), raw = 0;
        for (size_t i = 0; i < n; i++) {
                size_t len = 0;
                char *got = put_path(not_utf8[i].bytes, not_utf8[i].len, false,
                                     &len);
                bool escaped = valid_utf8(got, len);
                free(got);
                got = put_json(not_utf8[i].bytes, not_utf8[i].len, &len);
                char dec[64];
                bool json_ok = parse_json_string(got, len, dec) >= 0;
                free(got);
                if (!escaped || !json_ok) {
                        fprintf(stderr, "  copied raw: %s\n", not_utf8[i].what);
                        raw++;
                }
        }
        /* regression: ferry_cli_put_path/_json copy some invalid UTF-8 raw
         * (cli.c's utf8_len accepts overlongs, surrogates, code points above
         * U+10FFFF and 0xf5-0xff leads), so the output is not valid UTF-8 and
         * --json is not valid JSON (fixed) */
        CHECK(raw == 0);
}

static void test_put_json(void)
{
        const struct {
                const char *in;
                size_t len;
                const char *want;
        } cases[] = {
                {"plain", 5, "\"plain\""},
                {"q\"b\\s", 5, "\"q\\\"b\\\\s\""},
                {"nl\n", 3, "\"nl\\u000a\""},
                {"\xff", 1, "\"\\u00ff\""},
                {"caf\xc3\xa9", 5, "\"caf\xc3\xa9\""},
                {"", 0, "\"\""},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t len = 0;
                char *got = put_json(cases[i].in, cases[i].len, &len);
                if (len != strlen(cases[i].want) ||
                    memcmp(got, cases[i].want, len))
                        unit_fail(__FILE__, __LINE__,
                                  "put_json case %zu: got '%s', want '%s'", i,
                                  got, cases[i].want);
                else
                        atomic_fetch_add(&unit_passed, 1);
                free(got);
        }

        /* every single byte gives valid JSON */
        int invalid = 0;
        for (int c = 0; c < 256; c++) {
                char in = (char)c, dec[16];
                size_t len = 0;
                char *got = put_json(&in, 1, &len);
                long n = parse_json_string(got, len, dec);
                if (n < 0)
                        invalid++;
                else if (c < 0x80 && (n != 1 || dec[0] != in))
                        invalid++; /* ASCII comes back as itself */
                free(got);
        }
        CHECK_EQ(invalid, 0);

        /* random names (lead bytes of the known bug left out): valid JSON,
         * and names that are valid UTF-8 come back unchanged */
        uint64_t seed = 777;
        int bad = 0, roundtrips = 0;
        for (int round = 0; round < 5000; round++) {
                char in[48], dec[6 * 48 + 8];
                size_t n = (size_t)(unit_rand(&seed) % sizeof(in));
                for (size_t i = 0; i < n; i++) {
                        unsigned char b;
                        do
                                b = (unsigned char)(unit_rand(&seed) >> 56);
                        while (b == 0xe0 || b == 0xed || b >= 0xf0);
                        /* mostly text, some controls and high bytes */
                        in[i] = (char)(round % 3 ? b : 0x20 + b % 95);
                }
                size_t len = 0;
                char *got = put_json(in, n, &len);
                long back = parse_json_string(got, len, dec);
                if (back < 0)
                        bad++;
                else if (valid_utf8(in, n)) {
                        roundtrips++;
                        if (back != (long)n || memcmp(dec, in, n))
                                bad++;
                }
                free(got);
        }
        CHECK_EQ(bad, 0);
        CHECK(roundtrips > 1000);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_defaults);
        RUN(test_flags);
        RUN(test_jobs_and_retries);
        RUN(test_durability);
        RUN(test_delete_options);
        RUN(test_verify);
        RUN(test_status_forms);
        RUN(test_export_forms);
        RUN(test_log_file);
        RUN(test_usage_errors);
        RUN(test_parse_twice);
        RUN(test_help_lists_every_option);
        RUN(test_put_path_examples);
        RUN(test_put_path_round_trip);
        RUN(test_invalid_utf8_is_escaped);
        RUN(test_put_json);
        return unit_done();
}
