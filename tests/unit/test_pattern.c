/*
 * test_pattern.c - --include/--exclude semantics as src/pattern.h and
 * ferry(1) document them, which are rsync's (each case below was checked
 * against rsync 3.2 with `rsync -an -i --exclude ...`): a name at any
 * depth without '/', the end of the relative path with '/' inside,
 * anchoring by a leading '/', directories only with a trailing '/', '*'
 * never crossing '/' and "**" crossing it, classes and '\', the first
 * matching rule deciding, and empty, "!" and "***" patterns refused;
 * and the selection built on them (select.h): --files-from's paths
 * normalized, the directories leading to them, what is protected from
 * removal, the sizes, the listed paths never found.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "pattern.h"
#include "select.h"

#include <stdio.h>
#include <unistd.h>

/* Compiles one pattern (NULL when refused). */
static struct ferry_patterns *one(const char *pat)
{
        struct ferry_patterns *p = NULL;
        const char *pats[] = {pat};
        if (ferry_patterns_new(pats, 1, &p))
                return NULL;
        return p;
}

/* Matches rel (its name is the part after the last '/'). */
static bool match(const struct ferry_patterns *p, const char *rel, bool dir)
{
        const char *slash = strrchr(rel, '/');
        return ferry_patterns_match(p, rel, slash ? slash + 1 : rel, dir);
}

static void test_empty_list_and_refusals(void)
{
        struct ferry_patterns *p = (struct ferry_patterns *)&p; /* not NULL */
        CHECK_EQ(ferry_patterns_new(NULL, 0, &p), 0);
        CHECK(p == NULL);
        CHECK(!ferry_patterns_match(NULL, "a", "a", false));
        CHECK(!ferry_patterns_need_path(NULL));
        ferry_patterns_free(NULL);

        const char *bad[] = {"", "/", "//"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                p = (struct ferry_patterns *)&p;
                CHECK_EQ(ferry_patterns_new(&bad[i], 1, &p), EINVAL);
                CHECK(p == NULL);
        }
        /* one bad pattern spoils the list, nothing leaks (ASan checks) */
        const char *mixed[] = {"*.tmp", "a/b", ""};
        p = (struct ferry_patterns *)&p;
        CHECK_EQ(ferry_patterns_new(mixed, 3, &p), EINVAL);
        CHECK(p == NULL);
}

static void test_basename_any_depth(void)
{
        struct ferry_patterns *p = one("*.tmp");
        CHECK(p != NULL);
        CHECK(!ferry_patterns_need_path(p));
        CHECK(match(p, "x.tmp", false));
        CHECK(match(p, "a/x.tmp", false));
        CHECK(match(p, "a/b/c/d/x.tmp", false));
        CHECK(match(p, "a/b/.hidden.tmp", false)); /* no FNM_PERIOD */
        CHECK(match(p, "a/dir.tmp", true));        /* dirs too */
        CHECK(!match(p, "x.tmp.bak", false));
        CHECK(!match(p, "a.tmp/x", false)); /* only the last part counts */
        CHECK(!match(p, "xtmp", false));
        /* a name-only pattern needs no path: rel may be NULL */
        CHECK(ferry_patterns_match(p, NULL, "y.tmp", false));
        ferry_patterns_free(p);

        p = one("skipdir");
        CHECK(match(p, "skipdir", true));
        CHECK(match(p, "c/skipdir", false)); /* a file of that name too */
        CHECK(!match(p, "skipdir2", true));
        CHECK(!match(p, "skipdir/inner", false));
        ferry_patterns_free(p);

        p = one("file?.[ab]");
        CHECK(match(p, "d/file1.a", false));
        CHECK(match(p, "fileX.b", false));
        CHECK(!match(p, "file12.a", false));
        CHECK(!match(p, "file1.c", false));
        ferry_patterns_free(p);
}

static void test_slash_matches_relative_path(void)
{
        struct ferry_patterns *p = one("a/deep/*.bin");
        CHECK(p != NULL);
        CHECK(ferry_patterns_need_path(p));
        CHECK(match(p, "a/deep/q.bin", false));
        CHECK(!match(p, "a/deep2/q.bin", false));
        CHECK(!match(p, "q.bin", false));
        CHECK(!match(p, "a/deep/sub/q.bin", false)); /* '*' stops at '/' */
        /* rsync: an unanchored "a/deep/..." matches at any '/' */
        CHECK(match(p, "x/a/deep/q.bin", false));
        CHECK(!match(p, "xa/deep/q.bin", false)); /* but at a '/' only */
        ferry_patterns_free(p);

        p = one("a/*");
        CHECK(match(p, "a/b", false));
        CHECK(match(p, "a/b", true));
        CHECK(!match(p, "a/b/c", false));
        CHECK(!match(p, "a", true));
        ferry_patterns_free(p);

        p = one("a/b*");
        CHECK(match(p, "a/b", false));
        CHECK(match(p, "a/bcd", false));
        CHECK(!match(p, "a/b/c", false));
        ferry_patterns_free(p);
}

static void test_leading_slash_anchors(void)
{
        struct ferry_patterns *p = one("/top.log");
        CHECK(p != NULL);
        CHECK(ferry_patterns_need_path(p));
        CHECK(match(p, "top.log", false));
        CHECK(!match(p, "a/top.log", false));
        CHECK(!match(p, "top.log2", false));
        ferry_patterns_free(p);

        p = one("/a/*.c");
        CHECK(match(p, "a/x.c", false));
        CHECK(!match(p, "b/a/x.c", false));
        CHECK(!match(p, "a/b/x.c", false));
        ferry_patterns_free(p);
}

static void test_trailing_slash_dirs_only(void)
{
        struct ferry_patterns *p = one("build/");
        CHECK(p != NULL);
        CHECK(!ferry_patterns_need_path(p)); /* still a name pattern */
        CHECK(match(p, "build", true));
        CHECK(match(p, "a/b/build", true));
        CHECK(!match(p, "build", false));
        CHECK(!match(p, "b/build", false));
        ferry_patterns_free(p);

        p = one("/cache/");
        CHECK(match(p, "cache", true));
        CHECK(!match(p, "cache", false));
        CHECK(!match(p, "x/cache", true));
        ferry_patterns_free(p);

        p = one("a/c*/");
        CHECK(ferry_patterns_need_path(p));
        CHECK(match(p, "a/cache", true));
        CHECK(!match(p, "a/cache", false));
        CHECK(match(p, "b/a/cache", true)); /* rsync: at any '/' */
        ferry_patterns_free(p);
}

static void test_double_star_classes_escapes(void)
{
        struct ferry_patterns *p = one("/src/**/*.o");
        CHECK(ferry_patterns_need_path(p));
        CHECK(match(p, "src/a/x.o", false));
        CHECK(match(p, "src/a/b/c/x.o", false));
        CHECK(!match(p, "src/x.o", false)); /* "**" then '/': one level */
        CHECK(!match(p, "b/src/a/x.o", false));
        ferry_patterns_free(p);

        p = one("logs**");
        CHECK(ferry_patterns_need_path(p)); /* "**": the whole path */
        CHECK(match(p, "logs/a/b", false));
        CHECK(match(p, "x/logs2", false));
        ferry_patterns_free(p);

        CHECK(ferry_glob_match("a*b", "axxb"));
        CHECK(!ferry_glob_match("a*b", "ax/xb"));
        CHECK(ferry_glob_match("a**b", "ax/xb"));
        CHECK(ferry_glob_match("[!a-c]x", "dx"));
        CHECK(!ferry_glob_match("[!a-c]x", "bx"));
        CHECK(ferry_glob_match("[^a-c]x", "dx"));
        CHECK(!ferry_glob_match("[a-c]x", "/x")); /* a class never '/' */
        CHECK(ferry_glob_match("[]]", "]"));
        CHECK(ferry_glob_match("[x", "[x")); /* no ']': a literal '[' */
        CHECK(ferry_glob_match("\\*", "*"));
        CHECK(!ferry_glob_match("\\*", "a"));
        CHECK(ferry_glob_match("a\\?", "a?"));
        CHECK(!ferry_glob_match("a?", "a"));
        CHECK(ferry_glob_match("*", ""));
        CHECK(!ferry_glob_match("?", ""));
}

static void test_first_match_decides(void)
{
        const struct ferry_filter_rule r[] = {
                {"*/", true}, {"*.c", true}, {"*", false}};
        struct ferry_patterns *p = NULL;
        CHECK_EQ(ferry_patterns_new_rules(r, 3, &p, NULL), 0);
        CHECK_EQ(ferry_patterns_decide(p, "a", "a", true), FERRY_RULE_INCLUDE);
        CHECK_EQ(ferry_patterns_decide(p, "a/x.c", "x.c", false),
                 FERRY_RULE_INCLUDE);
        CHECK_EQ(ferry_patterns_decide(p, "a/x.o", "x.o", false),
                 FERRY_RULE_EXCLUDE);
        ferry_patterns_free(p);

        /* the other order: the exclude comes first and wins */
        const struct ferry_filter_rule r2[] = {{"*.c", false},
                                               {"keep.c", true}};
        CHECK_EQ(ferry_patterns_new_rules(r2, 2, &p, NULL), 0);
        CHECK(match(p, "keep.c", false));
        CHECK_EQ(ferry_patterns_decide(p, "x.txt", "x.txt", false),
                 FERRY_RULE_NONE);
        ferry_patterns_free(p);

        const char *bad[] = {"!", "dir/***", ""};
        for (size_t i = 0; i < 3; i++) {
                const struct ferry_filter_rule b = {bad[i], true};
                const char *why = NULL;
                p = (struct ferry_patterns *)&p;
                CHECK_EQ(ferry_patterns_new_rules(&b, 1, &p, &why), EINVAL);
                CHECK(p == NULL);
                CHECK(why != NULL && *why);
        }
}

static void test_several_patterns(void)
{
        const char *pats[] = {"*.tmp", "/top.log", "build/", "a/deep/*.bin"};
        struct ferry_patterns *p = NULL;
        CHECK_EQ(ferry_patterns_new(pats, 4, &p), 0);
        CHECK(p != NULL);
        CHECK(ferry_patterns_need_path(p));
        const char *excluded[] = {"junk.tmp", "a/junk.tmp", "top.log",
                                  "a/deep/q.bin"};
        const char *kept[] = {"keep.txt",      "a/keep.txt", "a/top.log",
                              "a/deep2/q.bin", "q.bin",      "b/build"};
        for (size_t i = 0; i < 4; i++)
                CHECK(match(p, excluded[i], false));
        CHECK(match(p, "build", true));
        CHECK(match(p, "a/build", true));
        for (size_t i = 0; i < 6; i++)
                CHECK(!match(p, kept[i], false));
        ferry_patterns_free(p);
}

/* A --files-from file holding text (len bytes); its name into path. */
static bool list_file(char *path, const char *text, size_t len)
{
        strcpy(path, "/tmp/ferry-test-pattern.XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0)
                return false;
        bool ok = write(fd, text, len) == (ssize_t)len;
        close(fd);
        return ok;
}

static void test_files_from(void)
{
        char path[64];
        static const char text[] = "./a//b/\n/c\n\nd/e/f\n.\nc\n";
        CHECK(list_file(path, text, sizeof(text) - 1));
        struct ferry_options opt;
        ferry_options_init(&opt);
        opt.files_from = path;
        struct ferry_select *s = NULL;
        struct ferry_error err = {{0}};
        CHECK_EQ(ferry_select_new(&opt, &s, &err), 0);
        CHECK(s != NULL);
        /* listed: a/b, c, d/e/f; leading to them: a, d, d/e */
        CHECK(ferry_select_named(s, "a"));
        CHECK(ferry_select_named(s, "a/b"));
        CHECK(ferry_select_named(s, "d/e"));
        CHECK(!ferry_select_named(s, "a/x"));
        CHECK(!ferry_select_named(s, "a/b/inner")); /* not descended */
        CHECK(ferry_select_entry(s, "d", "d", true, false, 0));
        CHECK(!ferry_select_entry(s, "d", "d", false, true, 0)); /* a file */
        CHECK(ferry_select_entry(s, "c", "c", false, true, 9));
        CHECK(!ferry_select_protects(s, "d/e/f", false));
        CHECK(!ferry_select_protects(s, "d/e", true));
        CHECK(ferry_select_protects(s, "d/e", false));
        CHECK(ferry_select_protects(s, "a/b/inner", false));
        CHECK(ferry_select_protects(s, "zz", true));
        /* c was met above, a/b now: only d/e/f is reported */
        ferry_select_entry(s, "a/b", "b", true, false, 0);
        CHECK_EQ(ferry_select_missing(s, &opt), 1);
        ferry_select_free(s);

        static const char nul[] = "x\n\0y\0";
        unlink(path); /* each list its own file, none left in /tmp */
        CHECK(list_file(path, nul, sizeof(nul) - 1));
        opt.from0 = true;
        CHECK_EQ(ferry_select_new(&opt, &s, &err), 0);
        CHECK(ferry_select_named(s, "x\n")); /* a newline in a name */
        CHECK(ferry_select_named(s, "y"));
        CHECK(!ferry_select_named(s, "x"));
        ferry_select_free(s);

        static const char dots[] = "a/../../etc\n";
        unlink(path);
        CHECK(list_file(path, dots, sizeof(dots) - 1));
        opt.from0 = false;
        s = (struct ferry_select *)&s;
        CHECK_EQ(ferry_select_new(&opt, &s, &err), FERRY_EUSAGE);
        CHECK(s == NULL);
        CHECK(strstr(err.msg, "..") != NULL);
        unlink(path);
        opt.files_from = path; /* gone now */
        CHECK_EQ(ferry_select_new(&opt, &s, &err), FERRY_EUSAGE);
        CHECK(strstr(err.msg, "cannot read") != NULL);
}

static void test_rules_and_sizes(void)
{
        struct ferry_options opt;
        ferry_options_init(&opt);
        struct ferry_select *s = (struct ferry_select *)&s;
        struct ferry_error err = {{0}};
        CHECK_EQ(ferry_select_new(&opt, &s, &err), 0);
        CHECK(s == NULL); /* selects everything */
        CHECK(ferry_select_entry(NULL, "a", "a", false, true, 1));
        CHECK(!ferry_select_protects(NULL, "a", false));

        const struct ferry_filter_rule r[] = {{"keep/", true},
                                              {"/skip/", false}};
        opt.filters = r;
        opt.n_filters = 2;
        opt.min_size = 10;
        opt.max_size = 100;
        CHECK_EQ(ferry_select_new(&opt, &s, &err), 0);
        CHECK(!ferry_select_entry(s, "skip", "skip", true, false, 0));
        CHECK(ferry_select_entry(s, "a/skip", "skip", true, false, 0));
        CHECK(ferry_select_protects(s, "skip/x/y", false)); /* below it */
        CHECK(!ferry_select_protects(s, "a/skip/y", false));
        CHECK(ferry_select_entry(s, "f", "f", false, true, 10));
        CHECK(ferry_select_entry(s, "f", "f", false, true, 100));
        CHECK(!ferry_select_entry(s, "f", "f", false, true, 9));
        CHECK(!ferry_select_entry(s, "f", "f", false, true, 101));
        CHECK(ferry_select_entry(s, "l", "l", false, false, 5000)); /* link */
        ferry_select_free(s);

        opt.min_size = 101; /* above --max-size: nothing would be copied */
        CHECK_EQ(ferry_select_new(&opt, &s, &err), FERRY_EUSAGE);
        opt.min_size = -1;
        const struct ferry_filter_rule bad[] = {{"ok", true}, {"x/***", false}};
        opt.filters = bad;
        CHECK_EQ(ferry_select_new(&opt, &s, &err), FERRY_EUSAGE);
        CHECK(strstr(err.msg, "x/***") != NULL); /* names the bad one */
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_empty_list_and_refusals);
        RUN(test_basename_any_depth);
        RUN(test_slash_matches_relative_path);
        RUN(test_leading_slash_anchors);
        RUN(test_trailing_slash_dirs_only);
        RUN(test_several_patterns);
        RUN(test_double_star_classes_escapes);
        RUN(test_first_match_decides);
        RUN(test_files_from);
        RUN(test_rules_and_sizes);
        return unit_done();
}
