/*
 * cli.c - option table, parser, --help, and the printing of paths for
 * messages through the library's escaper (cli.h). Nothing here touches a
 * file tree.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum opt_id {
        O_JOBS = 'j',
        O_DRY_RUN = 'n',
        O_QUIET = 'q',
        O_VERBOSE = 'v',
        O_HELP = 'h',
        O_VERSION = 'V',
        O_ONE_FILE_SYSTEM = 'x',
        O_MANIFEST = 256,
        O_EXCLUDE,
        O_INCLUDE,
        O_FILES_FROM,
        O_FROM0,
        O_MIN_SIZE,
        O_MAX_SIZE,
        O_DELETE,
        O_DELETE_ANYWAY,
        O_MAX_DELETE,
        O_NO_HARD_LINKS,
        O_NO_PERMS,
        O_NO_OWNER,
        O_NO_TIMES,
        O_ATIMES,
        O_TRUST_MTIME,
        O_ADOPT,
        O_NO_SPECIALS,
        O_NO_DEVICES,
        O_NO_XATTRS,
        O_NO_ACLS,
        O_DURABILITY,
        O_RETRIES,
        O_VERIFY,
        O_JSON,
        O_FAILURES,
        O_FORMAT,
        O_LOG_FILE,
        O_JOB_NAME,
        O_LEASE,
        O_BWLIMIT, /* live control: set.c */
        O_WINDOW,
        O_PAUSE,
        O_RESUME,
};

struct opt_def {
        const char *name;
        int has_arg; /* no_argument, required_argument, optional_argument */
        int id;
        const char *arg; /* shown in --help */
        const char *help;
};

static const struct opt_def opts[] = {
        {"jobs", required_argument, O_JOBS, "N|auto",
         "copies in flight, 1-1024 (default auto: from 16, doubling while "
         "throughput rises, backing off when it falls, probing again as "
         "the source changes, at most 256); fewer when open files are "
         "limited"},
        {"manifest", required_argument, O_MANIFEST, "FILE|URL",
         "manifest file (default: $XDG_STATE_HOME/ferry/<hash>.db), or a "
         "postgresql:// URL: a job shared by every host that runs the same "
         "command (needs --job-name)"},
        {"job-name", required_argument, O_JOB_NAME, "NAME",
         "the shared job this host joins or verifies, or that status, "
         "export or set names (with a postgresql:// manifest)"},
        {"lease", required_argument, O_LEASE, "SECONDS",
         "a shared job's claims return to the other hosts after this long "
         "without a renewal, 5-86400 (default 60)"},
        {"exclude", required_argument, O_EXCLUDE, "PATTERN",
         "skip names or paths matching PATTERN (repeatable; with "
         "--include the first rule that matches decides)"},
        {"include", required_argument, O_INCLUDE, "PATTERN",
         "copy names or paths matching PATTERN even if a later --exclude "
         "matches (repeatable)"},
        {"files-from", required_argument, O_FILES_FROM, "FILE",
         "copy only the paths listed in FILE (relative to SRC, one a line; "
         "- is stdin) and the directories leading to them"},
        {"from0", no_argument, O_FROM0, NULL,
         "--files-from names end in NUL, not newline"},
        {"min-size", required_argument, O_MIN_SIZE, "SIZE",
         "skip regular files smaller than SIZE (K, M, G, T: powers of "
         "1024)"},
        {"max-size", required_argument, O_MAX_SIZE, "SIZE",
         "skip regular files larger than SIZE"},
        {"delete", no_argument, O_DELETE, NULL,
         "remove from DST what was removed from SRC since it was copied"},
        {"delete-anyway", no_argument, O_DELETE_ANYWAY, NULL,
         "--delete, also when SRC looks replaced or emptied"},
        {"max-delete", required_argument, O_MAX_DELETE, "N",
         "delete at most N entries (0: none, list them)"},
        {"dry-run", no_argument, O_DRY_RUN, NULL,
         "list what would be copied or deleted; change nothing"},
        {"no-hard-links", no_argument, O_NO_HARD_LINKS, NULL,
         "copy hardlinked files as separate files"},
        {"no-perms", no_argument, O_NO_PERMS, NULL,
         "do not copy permission bits (no chmod of files: umask's mode)"},
        {"no-owner", no_argument, O_NO_OWNER, NULL,
         "do not copy owner and group (only root copies the owner)"},
        {"no-times", no_argument, O_NO_TIMES, NULL,
         "do not copy modification times"},
        {"atimes", no_argument, O_ATIMES, NULL,
         "keep access times too; a re-run applies a changed one"},
        {"trust-mtime", no_argument, O_TRUST_MTIME, NULL,
         "a change of ctime alone is metadata: do not re-read SRC"},
        {"adopt", no_argument, O_ADOPT, NULL,
         "take over a copy made by cp -a, rsync or a moved job: a DST file "
         "of SRC's size and mtime is hashed on both sides and, equal, kept; "
         "a manifest FILE of other paths (--manifest, which must exist) is "
         "pointed at SRC and DST"},
        {"no-specials", no_argument, O_NO_SPECIALS, NULL,
         "do not copy FIFOs and sockets"},
        {"no-devices", no_argument, O_NO_DEVICES, NULL,
         "do not copy device files (only root copies them)"},
        {"one-file-system", no_argument, O_ONE_FILE_SYSTEM, NULL,
         "do not descend into mount points inside SRC"},
        {"no-xattrs", no_argument, O_NO_XATTRS, NULL,
         "do not copy xattrs (capabilities too; not ACLs)"},
        {"no-acls", no_argument, O_NO_ACLS, NULL,
         "do not copy POSIX ACLs (access and default)"},
        {"durability", required_argument, O_DURABILITY, "MODE",
         "batch (default), file or none"},
        {"retries", required_argument, O_RETRIES, "N",
         "retries of transient errors and changed files, 0-100 (default 3)"},
        {"verify", optional_argument, O_VERIFY, "WHAT",
         "verify against the manifest: dest (default), source or both"},
        {"quiet", no_argument, O_QUIET, NULL, "print only errors"},
        {"verbose", no_argument, O_VERBOSE, NULL,
         "print each file copied or deleted on stdout"},
        {"log-file", required_argument, O_LOG_FILE, "FILE",
         "append a JSON line per file event and per run start and end "
         "to FILE"},
        {"json", no_argument, O_JSON, NULL,
         "print a JSON summary on stdout at the end"},
        {"failures", no_argument, O_FAILURES, NULL,
         "status: list all failures, not 5 of each cause"},
        {"format", required_argument, O_FORMAT, "FMT",
         "export: xxh128sum (default), csv or jsonl"},
        {"bwlimit", required_argument, O_BWLIMIT, "RATE",
         "at most RATE bytes/s written (K, M, G: powers of 1024; 0: no "
         "limit); run and set"},
        {"window", required_argument, O_WINDOW, "HH:MM-HH:MM",
         "copy only in these hours, local time (may wrap midnight; none: "
         "always); run and set"},
        {"pause", no_argument, O_PAUSE, NULL,
         "set: start no new file, the copies wait"},
        {"resume", no_argument, O_RESUME, NULL, "set: end a --pause"},
        {"help", no_argument, O_HELP, NULL, "show this help and exit"},
        {"version", no_argument, O_VERSION, NULL, "show the version and exit"},
};
#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

/* "exit codes: 0 success, 1 usage error, ..." from the library's own
 * table (ferry_code_str), wrapped before 72 columns: it cannot drift from
 * enum ferry_code. */
static void put_exit_codes(FILE *out)
{
        const char *unknown = ferry_code_str(-1);
        int col = fprintf(out, "\nexit codes:") - 1;
        bool first = true;
        for (int code = 0; code < 256; code++) {
                const char *what = ferry_code_str(code);
                if (!strcmp(what, unknown))
                        continue;
                char item[96];
                int n = snprintf(item, sizeof(item), " %d %s", code, what);
                if (col + n + 1 > 72) { /* break after the comma */
                        fputs(first ? "\n" : ",\n", out);
                        col = fprintf(out, "%s", item + 1);
                } else {
                        col += fprintf(out, "%s%s", first ? "" : ",", item);
                }
                first = false;
        }
        fputs(col + 15 > 72 ? ".\nSee ferry(1).\n" : ". See ferry(1).\n", out);
}

void ferry_cli_help(FILE *out)
{
        fputs("usage: ferry [OPTIONS] SRC DST\n"
              "       ferry --verify[=dest|source|both] [OPTIONS] SRC DST\n"
              "       ferry status [--json]\n"
              "       ferry status [--json] [--failures] [SRC DST | --manifest "
              "FILE]\n"
              "       ferry --manifest postgresql://... --job-name NAME "
              "[OPTIONS] SRC DST\n"
              "       ferry status --manifest postgresql://... [--job-name "
              "NAME] [--json]\n"
              "                    [--failures]\n"
              "       ferry export --manifest postgresql://... --job-name "
              "NAME [--format=FMT]\n"
              "       ferry set --manifest postgresql://... --job-name NAME "
              "[-j N]\n"
              "                 [--pause|--resume]\n"
              "       ferry export [--format=FMT] [SRC DST | --manifest "
              "FILE]\n"
              "       ferry set [--bwlimit RATE] [-j N] [--pause|--resume] "
              "[--window W]\n"
              "                 [SRC DST | --manifest FILE]\n"
              "\n"
              "Copies the tree SRC into DST with parallel workers and keeps a\n"
              "journal of every file, so an interrupted copy resumes and a\n"
              "re-run copies only what changed. The same command copies,\n"
              "resumes and updates.\n\n"
              "options:\n",
              out);
        for (size_t i = 0; i < N_OPTS; i++) {
                const struct opt_def *o = &opts[i];
                char left[64];
                int n = o->id < 256 ? snprintf(left, sizeof(left), "-%c, --%s",
                                               o->id, o->name)
                                    : snprintf(left, sizeof(left), "    --%s",
                                               o->name);
                if (o->arg && o->has_arg == optional_argument)
                        snprintf(left + n, sizeof(left) - (size_t)n, "[=%s]",
                                 o->arg);
                else if (o->arg)
                        snprintf(left + n, sizeof(left) - (size_t)n, " %s",
                                 o->arg);
                fprintf(out, "  %-26s %s\n", left, o->help);
        }
        put_exit_codes(out);
}

static int usage(struct ferry_error *err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

static int usage(struct ferry_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        return FERRY_EUSAGE;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
        char *end;
        errno = 0;
        if (!s || !*s || *s == '-')
                return -1;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -1;
        *out = (unsigned)v;
        return 0;
}

static int set_durability(struct ferry_cli *cli, const char *v,
                          struct ferry_error *err)
{
        if (!strcmp(v, "batch"))
                cli->opt.durability = FERRY_DURABLE_BATCH;
        else if (!strcmp(v, "file"))
                cli->opt.durability = FERRY_DURABLE_FILE;
        else if (!strcmp(v, "none"))
                cli->opt.durability = FERRY_DURABLE_NONE;
        else
                return usage(err,
                             "--durability must be batch, file or none, "
                             "not '%s'",
                             v);
        return 0;
}

static int set_verify(struct ferry_cli *cli, const char *v,
                      struct ferry_error *err)
{
        cli->command = CMD_VERIFY;
        if (!v || !strcmp(v, "dest"))
                cli->verify = FERRY_VERIFY_DEST;
        else if (!strcmp(v, "source"))
                cli->verify = FERRY_VERIFY_SOURCE;
        else if (!strcmp(v, "both"))
                cli->verify = FERRY_VERIFY_BOTH;
        else
                return usage(err,
                             "--verify must be dest, source or both, "
                             "not '%s'",
                             v);
        return 0;
}

static int set_max_delete(struct ferry_cli *cli, const char *v,
                          struct ferry_error *err)
{
        char *end = NULL;
        unsigned long long n = 0;
        errno = 0;
        if (*v >= '0' && *v <= '9') /* strtoull takes "-1" and " 1" */
                n = strtoull(v, &end, 10);
        if (!end || errno || *end || n > INT64_MAX)
                return usage(err,
                             "--max-delete must be a number, 0 or more, "
                             "not '%s'",
                             v);
        cli->opt.max_delete = (int64_t)n;
        return 0;
}

static int set_format(struct ferry_cli *cli, const char *v,
                      struct ferry_error *err)
{
        static const char *const names[] = {[FMT_XXH128SUM] = "xxh128sum",
                                            [FMT_CSV] = "csv",
                                            [FMT_JSONL] = "jsonl"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(v, names[i])) {
                        cli->format = (enum ferry_cli_format)i;
                        cli->format_set = true;
                        return 0;
                }
        return usage(err, "--format must be xxh128sum, csv or jsonl, not '%s'",
                     v);
}

static int add_rule(struct ferry_cli *cli, const char *pat, bool include,
                    struct ferry_error *err)
{
        const char *what = include ? "include" : "exclude";
        if (!*pat || !strcmp(pat, "/"))
                return usage(err, "--%s needs a non-empty pattern", what);
        struct ferry_filter_rule *p =
                realloc(cli->filters, (cli->n_filters + 1) * sizeof(*p));
        if (!p)
                return usage(err, "out of memory");
        cli->filters = p;
        p[cli->n_filters++] = (struct ferry_filter_rule){pat, include};
        return 0;
}

/* "12", "4K", "1M", "2G", "1T": powers of 1024, as rsync's. */
static int set_size(int64_t *out, const char *what, const char *v,
                    struct ferry_error *err)
{
        char *end = NULL;
        unsigned long long n = 0;
        errno = 0;
        if (*v >= '0' && *v <= '9') /* strtoull takes "-1" and " 1" */
                n = strtoull(v, &end, 10);
        unsigned shift = 0;
        const char *units = "KMGT";
        const char *u = end && *end ? strchr(units, end[0] & ~0x20) : NULL;
        if (u && *u) {
                shift = 10 * (unsigned)(u - units + 1);
                end++;
        }
        if (!end || errno || *end || n > (unsigned long long)INT64_MAX >> shift)
                return usage(err,
                             "--%s must be a size such as 100, 64K, 10M or "
                             "2G, not '%s'",
                             what, v);
        *out = (int64_t)(n << shift);
        return 0;
}

static int apply(struct ferry_cli *cli, int id, const char *arg,
                 struct ferry_error *err)
{
        switch (id) {
        case O_JOBS:
                cli->set.set_jobs = true; /* `ferry set -j` */
                if (!strcmp(arg, "auto")) {
                        cli->opt.jobs = 0; /* the tuner (tune.h) */
                        return 0;
                }
                if (parse_uint(arg, 1, 1024, &cli->opt.jobs))
                        return usage(err,
                                     "--jobs must be a number from 1 to "
                                     "1024 or auto, not '%s'",
                                     arg);
                cli->set.jobs = cli->opt.jobs;
                return 0;
        case O_RETRIES:
                if (parse_uint(arg, 0, 100, &cli->opt.retries))
                        return usage(err,
                                     "--retries must be a number from 0 "
                                     "to 100, not '%s'",
                                     arg);
                return 0;
        case O_MANIFEST:
                if (!*arg)
                        return usage(err, "--manifest needs a file name");
                cli->opt.manifest = arg;
                return 0;
        case O_JOB_NAME:
                if (!*arg)
                        return usage(err, "--job-name needs a name");
                cli->opt.job_name = arg;
                return 0;
        case O_LEASE:
                if (parse_uint(arg, 5, 86400, &cli->opt.lease))
                        return usage(err,
                                     "--lease must be a number of seconds "
                                     "from 5 to 86400, not '%s'",
                                     arg);
                return 0;
        case O_EXCLUDE: return add_rule(cli, arg, false, err);
        case O_INCLUDE: return add_rule(cli, arg, true, err);
        case O_FILES_FROM:
                if (!*arg)
                        return usage(err, "--files-from needs a file name");
                cli->opt.files_from = arg;
                return 0;
        case O_FROM0: cli->opt.from0 = true; return 0;
        case O_MIN_SIZE:
                return set_size(&cli->opt.min_size, "min-size", arg, err);
        case O_MAX_SIZE:
                return set_size(&cli->opt.max_size, "max-size", arg, err);
        case O_DELETE: cli->opt.delete_removed = true; return 0;
        case O_DELETE_ANYWAY:
                cli->opt.delete_removed = cli->opt.delete_anyway = true;
                return 0;
        case O_MAX_DELETE: return set_max_delete(cli, arg, err);
        case O_DRY_RUN: cli->opt.dry_run = true; return 0;
        case O_NO_HARD_LINKS: cli->opt.hard_links = false; return 0;
        case O_NO_PERMS: cli->opt.perms = false; return 0;
        case O_NO_XATTRS: cli->opt.xattrs = false; return 0;
        case O_NO_ACLS: cli->opt.acls = false; return 0;
        case O_NO_OWNER: cli->opt.owner = false; return 0;
        case O_NO_TIMES: cli->opt.times = false; return 0;
        case O_ATIMES: cli->opt.atimes = true; return 0;
        case O_TRUST_MTIME: cli->opt.trust_mtime = true; return 0;
        case O_ADOPT: cli->opt.adopt = true; return 0;
        case O_NO_SPECIALS: cli->opt.specials = false; return 0;
        case O_NO_DEVICES: cli->opt.devices = false; return 0;
        case O_ONE_FILE_SYSTEM: cli->opt.one_file_system = true; return 0;
        case O_DURABILITY: return set_durability(cli, arg, err);
        case O_VERIFY: return set_verify(cli, arg, err);
        case O_QUIET: cli->quiet = true; return 0;
        case O_VERBOSE: cli->verbose = true; return 0;
        case O_JSON: cli->json = true; return 0;
        case O_FAILURES: cli->failures = true; return 0;
        case O_FORMAT: return set_format(cli, arg, err);
        case O_LOG_FILE:
                if (!*arg)
                        return usage(err, "--log-file needs a file name");
                cli->log_file = arg;
                return 0;
        case O_BWLIMIT: return ferry_cli_bwlimit(cli, arg, err);
        case O_WINDOW: return ferry_cli_window(cli, arg, err);
        case O_PAUSE: return ferry_cli_pause(cli, true, err);
        case O_RESUME: return ferry_cli_pause(cli, false, err);
        case O_HELP: cli->command = CMD_HELP; return 0;
        case O_VERSION: cli->command = CMD_VERSION; return 0;
        default: return FERRY_EUSAGE;
        }
}

/* The command word of `ferry status`, `ferry export` and `ferry set`,
 * or NULL. */
static const char *command_word(int n, char **args)
{
        if (n && (!strcmp(args[0], "status") || !strcmp(args[0], "export") ||
                  !strcmp(args[0], "set")))
                return args[0];
        return NULL;
}

static enum ferry_cli_command word_command(const char *word)
{
        return !strcmp(word, "status") ? CMD_STATUS
               : !strcmp(word, "set")  ? CMD_SET
                                       : CMD_EXPORT;
}

/* Positional arguments: SRC DST, or status|export|set [SRC DST]. */
static int positionals(struct ferry_cli *cli, int n, char **args,
                       struct ferry_error *err)
{
        if (cli->command == CMD_HELP || cli->command == CMD_VERSION)
                return 0;
        const char *word = command_word(n, args);
        if ((n == 1 || n == 3) && word) {
                if (cli->command == CMD_VERIFY)
                        return usage(err, "%s does not take --verify", word);
                cli->command = word_command(word);
                args++;
                n--;
                /* status alone lists every job */
                if (!n && !cli->opt.manifest && cli->command == CMD_EXPORT)
                        return usage(err,
                                     "%s needs SRC DST or "
                                     "--manifest FILE",
                                     word);
                if (!n && !cli->opt.manifest && cli->failures)
                        return usage(err, "--failures needs a job: SRC DST "
                                          "or --manifest FILE");
        } else if (n == 2 && word) {
                /* not a copy of ./status into SRC */
                return usage(err,
                             "%s needs SRC and DST, or --manifest FILE (to "
                             "copy a directory named %s, write ./%s)",
                             word, word, word);
        } else if (n > 2) {
                return usage(err,
                             "too many arguments: '%s' after SRC and "
                             "DST (see --help)",
                             args[word ? 3 : 2]);
        } else if (n != 2) {
                return usage(err, n ? "missing DST (see --help)"
                                    : "missing SRC and DST (see --help)");
        }
        if (n == 2) {
                if (!*args[0] || !*args[1])
                        return usage(err, "SRC and DST must not be empty");
                cli->opt.src = args[0];
                cli->opt.dst = args[1];
        }
        return 0;
}

int ferry_cli_parse(int argc, char **argv, struct ferry_cli *cli,
                    struct ferry_error *err)
{
        memset(cli, 0, sizeof(*cli));
        ferry_options_init(&cli->opt);
        cli->set.pause = -1; /* ferry set: neither --pause nor --resume */
        struct option lopts[N_OPTS + 1];
        char shorts[2 * N_OPTS + 2] = ":"; /* report missing values */
        size_t ns = 1;
        for (size_t i = 0; i < N_OPTS; i++) {
                lopts[i] = (struct option){opts[i].name, opts[i].has_arg, NULL,
                                           opts[i].id};
                if (opts[i].id < 256) {
                        shorts[ns++] = (char)opts[i].id;
                        if (opts[i].has_arg == required_argument)
                                shorts[ns++] = ':';
                }
        }
        shorts[ns] = '\0';
        memset(&lopts[N_OPTS], 0, sizeof(lopts[N_OPTS]));
        optind = 0; /* 0, not 1: glibc's full reset, so parsing twice works */
        opterr = 0;
        int c, rc = 0;
        while (!rc &&
               (c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
                if (c == '?')
                        return usage(err, "unknown option '%s' (see --help)",
                                     argv[optind - 1]);
                if (c == ':')
                        return usage(err, "option '%s' needs a value",
                                     argv[optind - 1]);
                rc = apply(cli, c, optarg, err);
        }
        if (rc)
                return rc;
        rc = positionals(cli, argc - optind, argv + optind, err);
        if (rc)
                return rc;
        cli->opt.filters = cli->filters;
        cli->opt.n_filters = cli->n_filters;
        if (cli->opt.from0 && !cli->opt.files_from)
                return usage(err, "--from0 goes with --files-from");
        cli->opt.verify = cli->command == CMD_VERIFY ? cli->verify : 0;
        if (cli->command == CMD_VERIFY && cli->opt.dry_run)
                return usage(err, "--verify and --dry-run do not go together");
        if (cli->opt.adopt && cli->command != CMD_COPY)
                return usage(err, "--adopt goes with a copy only");
        if (cli->failures &&
            (cli->command == CMD_COPY || cli->command == CMD_VERIFY))
                return usage(err, "--failures goes with status only");
        if (cli->log_file &&
            (cli->command == CMD_STATUS || cli->command == CMD_EXPORT))
                return usage(err, "--log-file goes with a copy or --verify");
        if (cli->format_set && cli->command != CMD_EXPORT)
                return usage(err, "--format goes with export only");
        if (cli->command == CMD_EXPORT && (cli->failures || cli->json))
                return usage(err, "export does not take --%s (see --format)",
                             cli->json ? "json" : "failures");
        rc = ferry_cli_shared_check(cli, err); /* shared.c */
        return rc ? rc : ferry_cli_set_check(cli, err);
}

void ferry_cli_release(struct ferry_cli *cli)
{
        free(cli->filters);
        cli->filters = NULL;
}
