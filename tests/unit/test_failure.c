/*
 * test_failure.c - struct ferry_failure as words (src/failure.c): the
 * cause a status groups by, its key, and the row messages, which must stay
 * the words ferry wrote before failures were data ("read source: ...").
 */
#define _GNU_SOURCE
#include "unit.h"

#include "failure.h"

static const char *str(enum ferry_side side, enum ferry_step step, int err)
{
        static char buf[256];
        struct ferry_failure f = {side, step, err};
        return ferry_failure_str(&f, buf, sizeof(buf));
}

static const char *msg(enum ferry_side side, enum ferry_step step, int err,
                       bool dir)
{
        static char buf[256];
        struct ferry_failure f = {side, step, err};
        return ferry_failure_message(&f, dir, buf, sizeof(buf));
}

static void test_cause_words(void)
{
        CHECK_STR(str(FERRY_SIDE_SRC, FERRY_STEP_READ, EACCES),
                  "permission denied reading SRC");
        CHECK_STR(str(FERRY_SIDE_DST, FERRY_STEP_CREATE, ENOSPC),
                  "no space left on device creating a file in DST");
        CHECK_STR(str(FERRY_SIDE_SRC, FERRY_STEP_OPENDIR, EIO),
                  "input/output error opening a directory of SRC");
        CHECK_STR(str(FERRY_SIDE_SRC, FERRY_STEP_CHANGED, 0),
                  "SRC changed while copied");
        CHECK_STR(str(FERRY_SIDE_DST, FERRY_STEP_NAME, 0),
                  "name not allowed or taken on DST");
        /* a row of an older ferry: nothing recorded */
        CHECK_STR(str(FERRY_SIDE_NONE, FERRY_STEP_NONE, 0),
                  "failed (cause not recorded: an older ferry wrote it)");
        CHECK_STR(ferry_side_str(FERRY_SIDE_MANIFEST), "manifest");
        CHECK_STR(ferry_step_str((enum ferry_step)999), "");
}

static void test_keys(void)
{
        char a[64], b[64];
        struct ferry_failure f = {FERRY_SIDE_SRC, FERRY_STEP_READ, EACCES};
        struct ferry_failure g = f;
        CHECK_STR(ferry_failure_key(&f, a, sizeof(a)), "src:read:13");
        CHECK_STR(ferry_failure_key(&g, b, sizeof(b)), a);
        g.err = EIO;
        CHECK(strcmp(ferry_failure_key(&g, b, sizeof(b)), a) != 0);
        g = f;
        g.side = FERRY_SIDE_DST;
        CHECK(strcmp(ferry_failure_key(&g, b, sizeof(b)), a) != 0);
        /* every step has a name of its own and words */
        static const int steps[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,
                                    10, 11, 12, 13, 14, 15, 16, 17, 18,
                                    19, 20, 21, 22, 40, 41, 42, 43, 44};
        size_t n = sizeof(steps) / sizeof(steps[0]);
        for (size_t i = 0; i < n; i++) {
                const char *name = ferry_step_str((enum ferry_step)steps[i]);
                CHECK(name[0] != '\0');
                for (size_t k = 0; k < i; k++)
                        CHECK(strcmp(name, ferry_step_str(
                                                   (enum ferry_step)steps[k])));
                int err = steps[i] < 40 ? EIO : 0;
                CHECK(strncmp(str(FERRY_SIDE_DST, (enum ferry_step)steps[i],
                                  err),
                              "failed (", 8) != 0);
        }
}

/* The messages copy.c and the coordinator wrote as text before: unchanged. */
static void test_row_messages(void)
{
        static const struct {
                enum ferry_side side;
                enum ferry_step step;
                bool dir;
                const char *phrase;
        } was[] = {
                {FERRY_SIDE_DST, FERRY_STEP_COPY, false, "copy"},
                {FERRY_SIDE_SRC, FERRY_STEP_OPEN, false, "open source"},
                {FERRY_SIDE_SRC, FERRY_STEP_OPENDIR, false,
                 "open source directory"},
                {FERRY_SIDE_SRC, FERRY_STEP_READ, false, "read source"},
                {FERRY_SIDE_SRC, FERRY_STEP_READLINK, false,
                 "read source link"},
                {FERRY_SIDE_SRC, FERRY_STEP_STAT, false, "stat source"},
                {FERRY_SIDE_DST, FERRY_STEP_MKDIR, false,
                 "create destination directory"},
                {FERRY_SIDE_DST, FERRY_STEP_CREATE, false,
                 "create destination"},
                {FERRY_SIDE_DST, FERRY_STEP_SYMLINK, false,
                 "create destination link"},
                {FERRY_SIDE_DST, FERRY_STEP_WRITE, false, "write destination"},
                {FERRY_SIDE_DST, FERRY_STEP_FSYNC, false, "fsync destination"},
                {FERRY_SIDE_DST, FERRY_STEP_CLOSE, false, "close destination"},
                {FERRY_SIDE_DST, FERRY_STEP_CHOWN, false, "set owner"},
                {FERRY_SIDE_DST, FERRY_STEP_CHMOD, false, "set mode"},
                {FERRY_SIDE_DST, FERRY_STEP_UTIMES, false, "set times"},
                {FERRY_SIDE_DST, FERRY_STEP_LCHOWN, false, "set link owner"},
                {FERRY_SIDE_DST, FERRY_STEP_LUTIMES, false, "set link times"},
                {FERRY_SIDE_DST, FERRY_STEP_LINK, false, "link to first name"},
                {FERRY_SIDE_DST, FERRY_STEP_RENAME, false, "rename into place"},
                {FERRY_SIDE_DST, FERRY_STEP_VERIFY, false, "destination"},
                {FERRY_SIDE_SRC, FERRY_STEP_VERIFY, false, "source"},
                {FERRY_SIDE_DST, FERRY_STEP_MISSING, false, "destination"},
                {FERRY_SIDE_SRC, FERRY_STEP_DIFFERS, false, "source"},
                {FERRY_SIDE_SRC, FERRY_STEP_OPENDIR, true,
                 "cannot read directory"},
                {FERRY_SIDE_SRC, FERRY_STEP_READDIR, true,
                 "cannot read directory"},
                {FERRY_SIDE_SRC, FERRY_STEP_STAT, true,
                 "cannot read directory"},
                {FERRY_SIDE_DST, FERRY_STEP_MKDIR, true, "create directory"},
                {FERRY_SIDE_DST, FERRY_STEP_CHOWN, true, "set directory owner"},
                {FERRY_SIDE_DST, FERRY_STEP_CHMOD, true, "set directory mode"},
                {FERRY_SIDE_DST, FERRY_STEP_UTIMES, true,
                 "set directory times"},
        };
        for (size_t i = 0; i < sizeof(was) / sizeof(was[0]); i++) {
                char want[256];
                snprintf(want, sizeof(want), "%s: %s", was[i].phrase,
                         strerror(EIO));
                CHECK_STR(msg(was[i].side, was[i].step, EIO, was[i].dir), want);
        }
        CHECK_STR(msg(FERRY_SIDE_SRC, FERRY_STEP_CHANGED, 0, false),
                  "source changed while copied");
        CHECK_STR(msg(FERRY_SIDE_DST, FERRY_STEP_NAME, 0, false),
                  "name not allowed or taken on the destination");
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_cause_words);
        RUN(test_keys);
        RUN(test_row_messages);
        return unit_done();
}
