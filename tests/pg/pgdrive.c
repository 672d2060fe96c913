/*
 * tests/pg/pgdrive.c - drives the shared manifest's core (src/manifest_pg/)
 * for tests/cli/t73-pg-claims.sh, as a host of a job would: a test build
 * only (FERRY_TESTING).
 *
 *   pgdrive migrate URL [WAIT_S]          connect (migrates), print ok;
 *                                         WAIT_S for a server down (60)
 *   pgdrive join URL JOB SRC_FP DST_FP HOST
 *   pgdrive seed URL JOB FILES DIRS       the job (fingerprints src-1,
 *                                         dst-1), its root, DIRS
 *                                         directories and FILES files
 *   pgdrive work [options] URL JOB HOST   claim and complete until the
 *                                         job has nothing pending
 * work's options:
 *   -b N    rows per claim (50)          -l S  lease, seconds (3)
 *   -w MS   "work" per claim, renewing the lease every quarter of it (0)
 *   -m DIR  a file DIR/<row id> made with O_EXCL while a row is held, and
 *           removed after its outcome: two live claims of one row fail
 *   -o FILE "<id> <token>" per row whose outcome was accepted
 *   -S K    after the K-th file claim, print "holding token T rows N" and
 *           wait (no renewal) until the file of -r exists, then complete
 *   -r FILE
 * Prints "refused token T rows N" for each refused outcome, and at the end
 * "summary claims C done D refused R renewed W reconnects X". Exit 0, or
 * the ferry_code of a failure, 64 for usage.
 */
#define _GNU_SOURCE
#include "manifest_pg/pg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
        size_t batch;
        int lease_s, work_ms, stall_after;
        const char *mark_dir, *log_path, *resume;
};

struct tally {
        unsigned long claims, done, refused, renewed;
};

static int die_pg(struct ferry_pg *pg, int rc)
{
        fprintf(stderr, "pgdrive: %s\n", ferry_pg_errmsg(pg));
        ferry_pg_close(pg);
        return rc;
}

static void sleep_ms(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
                ;
}

static int connect_wait(const char *url, int wait_s, struct ferry_pg **pg)
{
        struct ferry_error err;
        int rc = ferry_pg_connect(url, wait_s, pg, &err);
        if (rc)
                fprintf(stderr, "pgdrive: %s\n", err.msg);
        return rc;
}

static int connect_to(const char *url, struct ferry_pg **pg)
{
        return connect_wait(url, 60, pg);
}

static int seed(const char *url, const char *job, size_t nfiles, size_t ndirs)
{
        struct ferry_pg *pg;
        int rc = connect_to(url, &pg);
        if (rc)
                return rc;
        rc = ferry_pg_job_join(pg, job, "src-1", "dst-1", "seed", 60);
        struct ferry_pg_dir root = {.parent = 0, .path = "", .path_len = 0};
        int64_t root_id = 0;
        if (!rc)
                rc = ferry_pg_add_dirs(pg, 1, &root, 1, &root_id);
        char(*names)[16] = calloc(nfiles + ndirs + 1, sizeof(*names));
        struct ferry_pg_dir *d = calloc(ndirs + 1, sizeof(*d));
        struct ferry_pg_file *f = calloc(nfiles + 1, sizeof(*f));
        if (!names || !d || !f) {
                fprintf(stderr, "pgdrive: out of memory\n");
                free(names);
                free(d);
                free(f);
                ferry_pg_close(pg);
                return FERRY_EINTERNAL;
        }
        for (size_t i = 0; i < ndirs; i++) {
                int len = snprintf(names[i], 16, "d%05zu", i);
                d[i] = (struct ferry_pg_dir){.parent = root_id,
                                             .path = names[i],
                                             .path_len = (size_t)len};
        }
        for (size_t i = 0; i < nfiles; i++) {
                char *nm = names[ndirs + i];
                int len = snprintf(nm, 16, "f%05zu", i);
                f[i] = (struct ferry_pg_file){.dir = root_id,
                                              .name = nm,
                                              .name_len = (size_t)len,
                                              .type = 1,
                                              .size = i,
                                              .mtime_ns = (int64_t)i,
                                              .ctime_ns = (int64_t)i,
                                              .mode = 0100644,
                                              .dev = 1,
                                              .ino = 1000 + i};
        }
        if (!rc)
                rc = ferry_pg_add_dirs(pg, 1, d, ndirs, NULL);
        if (!rc)
                rc = ferry_pg_add_files(pg, 1, f, nfiles, NULL);
        free(names);
        free(d);
        free(f);
        if (rc)
                return die_pg(pg, rc);
        printf("seeded %zu files, %zu directories\n", nfiles, ndirs);
        ferry_pg_close(pg);
        return 0;
}

static int mark(const struct opts *o, const struct ferry_pg_claim *c, bool on)
{
        char path[4096];
        for (size_t i = 0; o->mark_dir && i < c->n; i++) {
                snprintf(path, sizeof(path), "%s/%lld", o->mark_dir,
                         (long long)c->rows[i].id);
                if (!on) {
                        unlink(path);
                        continue;
                }
                int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
                if (fd < 0) {
                        printf("overlap: row %lld is held by two live "
                               "claims (%s)\n",
                               (long long)c->rows[i].id, strerror(errno));
                        return 1;
                }
                close(fd);
        }
        return 0;
}

/* The claim's "work": -w ms, renewing every quarter of the lease (a
 * loaded machine may stall a host, or the server's reply, for a while). */
static int work(struct ferry_pg *pg, const struct opts *o,
                const struct ferry_pg_claim *c, struct tally *t)
{
        int slice = o->lease_s * 1000 / 4, left = o->work_ms;
        while (left > 0) {
                int ms = left < slice ? left : slice;
                sleep_ms(ms);
                left -= ms;
                uint64_t renewed;
                int rc = ferry_pg_renew(pg, &c->token, 1, o->lease_s, &renewed);
                if (rc)
                        return rc;
                t->renewed += renewed;
                if (renewed < c->n)
                        printf("lost lease: token %lld renewed %llu of %zu\n",
                               (long long)c->token, (unsigned long long)renewed,
                               c->n);
        }
        return 0;
}

static void stall(const struct opts *o, const struct ferry_pg_claim *c)
{
        printf("holding token %lld rows %zu\n", (long long)c->token, c->n);
        fflush(stdout);
        while (o->resume && access(o->resume, F_OK) != 0)
                sleep_ms(50);
}

static int complete(struct ferry_pg *pg, enum ferry_pg_kind kind,
                    const struct ferry_pg_claim *c, FILE *log, struct tally *t)
{
        struct ferry_pg_outcome out[FERRY_PG_BATCH_MAX];
        uint64_t hash[FERRY_PG_BATCH_MAX][2];
        for (size_t i = 0; i < c->n; i++) {
                hash[i][0] = hash[i][1] = (uint64_t)c->rows[i].id;
                out[i] = (struct ferry_pg_outcome){.id = c->rows[i].id,
                                                   .result = PG_DONE,
                                                   .hash = hash[i],
                                                   .hash_len = 16};
        }
        bool refused;
        int rc = ferry_pg_complete(pg, kind, c->token, out, c->n, &refused);
        if (rc)
                return rc;
        if (refused) {
                printf("refused token %lld rows %zu\n", (long long)c->token,
                       c->n);
                t->refused += c->n;
                return 0;
        }
        t->done += c->n;
        for (size_t i = 0; log && kind == PG_FILES && i < c->n; i++)
                fprintf(log, "%lld %lld\n", (long long)c->rows[i].id,
                        (long long)c->token);
        return 0;
}

/* Claims and completes rows of kind until none is pending. */
static int work_kind(struct ferry_pg *pg, enum ferry_pg_kind kind,
                     const struct opts *o, FILE *log, struct tally *t)
{
        unsigned long claims = 0;
        for (;;) {
                struct ferry_pg_claim c;
                int rc = ferry_pg_claim(pg, kind, o->batch, o->lease_s, &c);
                if (rc)
                        return rc;
                if (c.n == 0) {
                        ferry_pg_claim_release(&c);
                        uint64_t pending, leased;
                        rc = ferry_pg_remaining(pg, kind, &pending, &leased);
                        if (rc || pending == 0)
                                return rc;
                        sleep_ms(100); /* leased elsewhere: may expire */
                        continue;
                }
                t->claims++;
                claims++;
                rc = mark(o, &c, true);
                if (!rc && kind == PG_FILES &&
                    claims == (unsigned)o->stall_after)
                        stall(o, &c);
                else if (!rc)
                        rc = work(pg, o, &c, t);
                if (!rc)
                        rc = complete(pg, kind, &c, log, t);
                mark(o, &c, false);
                ferry_pg_claim_release(&c);
                if (rc)
                        return rc;
        }
}

static int drive(int argc, char **argv)
{
        struct opts o = {50, 3, 0, 0, NULL, NULL, NULL};
        int ch;
        while ((ch = getopt(argc, argv, "b:l:w:m:o:S:r:")) != -1) {
                switch (ch) {
                case 'b': o.batch = (size_t)atol(optarg); break;
                case 'l': o.lease_s = atoi(optarg); break;
                case 'w': o.work_ms = atoi(optarg); break;
                case 'm': o.mark_dir = optarg; break;
                case 'o': o.log_path = optarg; break;
                case 'S': o.stall_after = atoi(optarg); break;
                case 'r': o.resume = optarg; break;
                default: return 64;
                }
        }
        if (argc - optind != 3)
                return 64;
        FILE *log = o.log_path ? fopen(o.log_path, "w") : NULL;
        if (o.log_path && !log) {
                fprintf(stderr, "pgdrive: %s: %s\n", o.log_path,
                        strerror(errno));
                return 1;
        }
        struct ferry_pg *pg = NULL;
        struct tally t = {0, 0, 0, 0};
        int rc = connect_to(argv[optind], &pg);
        if (!rc)
                rc = ferry_pg_job_join(pg, argv[optind + 1], "src-1", "dst-1",
                                       argv[optind + 2], 60);
        if (!rc)
                rc = work_kind(pg, PG_DIRS, &o, log, &t);
        if (!rc)
                rc = work_kind(pg, PG_FILES, &o, log, &t);
        if (log)
                fclose(log);
        if (rc && pg)
                return die_pg(pg, rc);
        if (rc)
                return rc;
        printf("summary claims %lu done %lu refused %lu renewed %lu "
               "reconnects %u\n",
               t.claims, t.done, t.refused, t.renewed, ferry_pg_reconnects(pg));
        ferry_pg_close(pg);
        return 0;
}

int main(int argc, char **argv)
{
        setvbuf(stdout, NULL, _IOLBF, 0);
        const char *cmd = argc > 1 ? argv[1] : "";
        struct ferry_pg *pg;
        int rc = 64;
        if (!strcmp(cmd, "migrate") && (argc == 3 || argc == 4)) {
                rc = connect_wait(argv[2], argc == 4 ? atoi(argv[3]) : 60, &pg);
                if (!rc) {
                        printf("migrated\n");
                        ferry_pg_close(pg);
                }
        } else if (!strcmp(cmd, "join") && argc == 7) {
                rc = connect_to(argv[2], &pg);
                if (!rc && (rc = ferry_pg_job_join(pg, argv[3], argv[4],
                                                   argv[5], argv[6], 60)) != 0)
                        return die_pg(pg, rc);
                if (!rc) {
                        printf("joined\n");
                        ferry_pg_close(pg);
                }
        } else if (!strcmp(cmd, "seed") && argc == 6) {
                rc = seed(argv[2], argv[3], (size_t)atol(argv[4]),
                          (size_t)atol(argv[5]));
        } else if (!strcmp(cmd, "work")) {
                rc = drive(argc - 1, argv + 1);
        }
        if (rc == 64)
                fprintf(stderr, "usage: pgdrive migrate|join|seed|work ... "
                                "(see tests/pg/pgdrive.c)\n");
        return rc;
}
