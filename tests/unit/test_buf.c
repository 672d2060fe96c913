/*
 * test_buf.c - the string buffer and the one escaper (src/buf.h,
 * ferry_escape in include/ferry.h).
 *
 * The escaper's message style is compared, on random bytes, with a copy of
 * the quoting that names.c had before it (ferry_names_quote at 2548bed):
 * the library's messages must stay byte for byte what they were. The
 * command line's styles are checked by test_cli.c.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "buf.h"

/* names.c's ferry_names_quote as it was: the oracle of the message style */
static void old_quote(char *out, size_t size, const char *s, size_t len)
{
        size_t o = strlen(out);
        if (o + 1 >= size)
                return;
        out[o++] = '\'';
        for (size_t i = 0; i < len && o + 5 < size; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch == '\\' || ch == '\'')
                        o += (size_t)snprintf(out + o, size - o, "\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        o += (size_t)snprintf(out + o, size - o, "\\x%02x", ch);
                else
                        out[o++] = (char)ch;
        }
        if (o + 1 < size)
                out[o++] = '\'';
        out[o] = '\0';
}

static void test_append(void)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        CHECK(b.buf && b.buf[0] == '\0' && b.len == 0);
        ferry_buf_reset(&b); /* on the shared empty string: no write */
        CHECK_EQ(ferry_buf_adds(&b, "abc"), 0);
        CHECK_EQ(ferry_buf_add(&b, "d\0e", 3), 0);
        CHECK_EQ(b.len, 6);
        CHECK(!memcmp(b.buf, "abcd\0e", 7));
        ferry_buf_reset(&b);
        CHECK(b.len == 0 && b.buf[0] == '\0');
        for (int i = 0; i < 1000; i++)
                CHECK_EQ(ferry_buf_addf(&b, "%d,", i % 10), 0);
        CHECK_EQ(b.len, 2000);
        CHECK(b.alloc > 2000 && !strncmp(b.buf, "0,1,2,", 6));
        CHECK(!strcmp(b.buf + 1994, "7,8,9,"));
        CHECK(!b.oom);
        ferry_buf_release(&b);
        CHECK(b.buf == ferry_buf_empty && b.alloc == 0);
}

static void test_paths(void)
{
        const struct {
                const char *dir, *name, *want;
        } cases[] = {
                {"", "a", "a"},
                {"/", "a", "/a"},
                {"d", "a", "d/a"},
                {"/d/e", "a", "/d/e/a"},
                {"d/", "a", "d/a"},
                {"d", "", "d/"},
                {"a b", "c\nd", "a b/c\nd"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *got = ferry_buf_join(cases[i].dir, cases[i].name);
                CHECK(got && !strcmp(got, cases[i].want));
                free(got);
        }
        struct ferry_buf b = FERRY_BUF_INIT;
        ferry_buf_add_path(&b, "x");
        ferry_buf_add_path(&b, "y");
        ferry_buf_add_path(&b, "z");
        size_t len = 0;
        char *s = ferry_buf_detach(&b, &len);
        CHECK(s && !strcmp(s, "x/y/z") && len == 5);
        CHECK(b.buf == ferry_buf_empty && b.len == 0);
        free(s);
        s = ferry_buf_detach(&b, &len); /* empty: still a string to free */
        CHECK(s && s[0] == '\0' && len == 0);
        free(s);
}

static void test_oom_is_sticky(void)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        ferry_buf_adds(&b, "kept");
        CHECK_EQ(ferry_buf_grow(&b, SIZE_MAX - 2), ENOMEM);
        CHECK(b.oom && !strcmp(b.buf, "kept"));
        CHECK(ferry_buf_detach(&b, NULL) == NULL);
        CHECK(b.buf == ferry_buf_empty && !b.oom);
}

static void test_move_to(void)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        char out[8];
        ferry_buf_adds(&b, "0123456789");
        ferry_buf_move_to(&b, out, sizeof(out));
        CHECK(!strcmp(out, "0123456"));
        CHECK(b.alloc == 0);
}

static void test_styles(void)
{
        const struct {
                const char *in;
                size_t len;
                unsigned flags;
                const char *want;
        } cases[] = {
                {"a'b\\c", 5, FERRY_ESC_QUOTE, "'a\\'b\\\\c'"},
                {"a\nb\tc", 5, FERRY_ESC_QUOTE, "'a\\x0ab\\x09c'"},
                {"\xff\xc3\xa9\x7f", 4, FERRY_ESC_QUOTE, "'\xff\xc3\xa9\\x7f'"},
                {"a\nb\tc", 5, FERRY_ESC_TERMINAL, "a\\nb\\tc"},
                {"it's", 4, FERRY_ESC_TERMINAL, "it's"},
                {"it's", 4, FERRY_ESC_TERMINAL | FERRY_ESC_QUOTE, "'it\\'s'"},
                {"\xff\xc3\xa9", 3, FERRY_ESC_TERMINAL, "\\xff\xc3\xa9"},
                {"q\"\n\xff", 4, FERRY_ESC_JSON | FERRY_ESC_QUOTE,
                 "\"q\\\"\\u000a\\u00ff\""},
                {"", 0, FERRY_ESC_QUOTE, "''"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char out[64];
                size_t n = ferry_escape(out, sizeof(out), cases[i].in,
                                        cases[i].len, cases[i].flags);
                if (n != strlen(cases[i].want) || strcmp(out, cases[i].want))
                        unit_fail(__FILE__, __LINE__,
                                  "case %zu: got '%s', want '%s'", i, out,
                                  cases[i].want);
                else
                        atomic_fetch_add(&unit_passed, 1);
                struct ferry_buf b = FERRY_BUF_INIT;
                ferry_buf_adds(&b, "<");
                ferry_buf_add_quoted(&b, cases[i].in, cases[i].len,
                                     cases[i].flags);
                CHECK(b.len == n + 1 && !strcmp(b.buf + 1, cases[i].want));
                ferry_buf_release(&b);
        }
        /* cut short like snprintf: the length of the whole, a NUL within */
        char small[4] = "zzz";
        CHECK_EQ(ferry_escape(small, sizeof(small), "abcdef", 6, 0), 6);
        CHECK(!strcmp(small, "abc"));
        CHECK_EQ(ferry_escape(NULL, 0, "a\n", 2, FERRY_ESC_QUOTE), 7);
}

static void test_message_style_is_the_old_quote(void)
{
        uint64_t seed = 99;
        char in[200];
        int bad = 0;
        for (int round = 0; round < 5000; round++) {
                size_t n = (size_t)(unit_rand(&seed) % sizeof(in));
                for (size_t i = 0; i < n; i++)
                        in[i] = (char)(unit_rand(&seed) >> 56);
                char want[1024] = "x: ";
                old_quote(want, sizeof(want), in, n);
                struct ferry_buf b = FERRY_BUF_INIT;
                ferry_buf_adds(&b, "x: ");
                ferry_buf_add_quoted(&b, in, n, FERRY_ESC_QUOTE);
                if (b.oom || strcmp(b.buf, want))
                        bad++;
                ferry_buf_release(&b);
        }
        CHECK_EQ(bad, 0);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_append);
        RUN(test_paths);
        RUN(test_oom_is_sticky);
        RUN(test_move_to);
        RUN(test_styles);
        RUN(test_message_style_is_the_old_quote);
        return unit_done();
}
