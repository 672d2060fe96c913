/*
 * test_overlap.c - src/overlap.c: how SRC and DST overlap, by identity,
 * and which files are ferry's own. (Bind mounts: tests/cli/t38, as root.)
 */
#define _GNU_SOURCE
#include "overlap.h"
#include "unit.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void path(char *buf, const char *dir, const char *rel)
{
        /* unit_tmpdir's names are short: this fits */
        size_t n = strlen(dir);
        memcpy(buf, dir, n);
        buf[n] = '/';
        memcpy(buf + n + 1, rel, strlen(rel) + 1);
}

static void test_trees(void)
{
        char dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
        unit_tmpdir(dir, "overlap");
        path(a, dir, "src");
        path(b, dir, "src/sub/deeper");
        mkdir(a, 0755);
        path(c, dir, "src/sub");
        mkdir(c, 0755);
        mkdir(b, 0755);
        path(c, dir, "dst");
        mkdir(c, 0755);

        CHECK_EQ(ferry_overlap_trees(a, c, true), OVERLAP_NONE);
        CHECK_EQ(ferry_overlap_trees(a, a, true), OVERLAP_SAME);
        CHECK_EQ(ferry_overlap_trees(a, b, true), OVERLAP_DST_IN_SRC);
        CHECK_EQ(ferry_overlap_trees(b, a, true), OVERLAP_SRC_IN_DST);
        /* DST not there yet: where it will be made decides */
        CHECK_EQ(ferry_overlap_trees(a, a, false), OVERLAP_DST_IN_SRC);
        CHECK_EQ(ferry_overlap_trees(a, b, false), OVERLAP_DST_IN_SRC);
        CHECK_EQ(ferry_overlap_trees(b, a, false), OVERLAP_NONE);
        CHECK_EQ(ferry_overlap_trees(a, dir, false), OVERLAP_NONE);
        /* another name of the same directory: a symlink, not resolved */
        char l[PATH_MAX];
        path(l, dir, "link");
        CHECK_EQ(symlink(b, l), 0);
        CHECK_EQ(ferry_overlap_trees(a, l, true), OVERLAP_DST_IN_SRC);
        CHECK_EQ(ferry_overlap_trees(l, a, true), OVERLAP_SRC_IN_DST);
        /* a tree that cannot be opened tells nothing */
        path(l, dir, "missing");
        CHECK_EQ(ferry_overlap_trees(a, l, true), OVERLAP_NONE);
        unit_rmtree(dir);
}

static struct ferry_stat stat_of(int at, const char *name)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        CHECK_EQ(ferry_fsio_statat(at, name, &st), 0);
        return st;
}

static void test_own_files(void)
{
        char dir[PATH_MAX], m[PATH_MAX];
        unit_tmpdir(dir, "own");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        mkdirat(root, "state", 0755);
        mkdirat(root, "dst", 0755);
        int state = openat(root, "state", O_RDONLY | O_DIRECTORY);
        int dst = openat(root, "dst", O_RDONLY | O_DIRECTORY);
        unit_write_file(state, "job.db", "x", 1);
        unit_write_file(state, "job.db.lock", "1", 1);
        unit_write_file(state, "other.db", "y", 1);
        unit_write_file(root, "job.db-wal", "w", 1); /* another directory */
        path(m, dir, "state/job.db");
        struct ferry_own *own = NULL;
        CHECK_EQ(ferry_own_new(m, dst, &own), 0);
        CHECK(own != NULL);

        struct ferry_stat sd = stat_of(root, "state");
        struct ferry_stat f = stat_of(state, "job.db");
        CHECK(ferry_own_is_file(own, &sd, "job.db", &f));
        CHECK(ferry_own_is_file(own, NULL, "job.db", &f)); /* identity */
        f = stat_of(state, "job.db.lock");
        CHECK(ferry_own_is_file(own, &sd, "job.db.lock", &f));
        f = stat_of(state, "other.db");
        CHECK(!ferry_own_is_file(own, &sd, "other.db", &f));
        /* made after ferry_own_new, in the manifest's directory */
        unit_write_file(state, "job.db-wal", "w", 1);
        f = stat_of(state, "job.db-wal");
        CHECK(ferry_own_is_file(own, &sd, "job.db-wal", &f));
        CHECK(!ferry_own_is_file(own, NULL, "job.db-wal", &f));
        /* the same name elsewhere is not ferry's */
        struct ferry_stat rd = stat_of(AT_FDCWD, dir);
        f = stat_of(root, "job.db-wal");
        CHECK(!ferry_own_is_file(own, &rd, "job.db-wal", &f));
        /* a hard link of the manifest is the manifest */
        CHECK_EQ(linkat(state, "job.db", root, "alias", 0), 0);
        f = stat_of(root, "alias");
        CHECK(ferry_own_is_file(own, &rd, "alias", &f));

        struct ferry_stat ds = stat_of(root, "dst");
        CHECK(ferry_own_is_dst(own, &ds));
        CHECK(!ferry_own_is_dst(own, &sd));
        CHECK(!ferry_own_is_dst(NULL, &ds));
        CHECK(!ferry_own_is_file(NULL, &sd, "job.db", &f));
        ferry_own_free(own);

        /* no DST yet (a dry run), no manifest yet */
        path(m, dir, "state/none.db");
        CHECK_EQ(ferry_own_new(m, -1, &own), 0);
        CHECK(!ferry_own_is_dst(own, &ds));
        f = stat_of(state, "job.db");
        CHECK(!ferry_own_is_file(own, &sd, "job.db", &f));
        ferry_own_free(own);
        close(state);
        close(dst);
        close(root);
        unit_rmtree(dir);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_trees);
        RUN(test_own_files);
        return unit_done();
}
