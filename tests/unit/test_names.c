/*
 * test_names.c - ferry_names_casecmp, the folding of names on a
 * case-insensitive destination: simple upper case of each UTF-8 character
 * of the Basic Multilingual Plane (as exFAT's and NTFS's up-case tables),
 * bytes that are not UTF-8 only equal to themselves, and an order that
 * sorting and binary search can use.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "names.h"

static bool same(const char *a, const char *b)
{
        return ferry_names_casecmp(a, b) == 0 && ferry_names_casecmp(b, a) == 0;
}

static void test_ascii(void)
{
        CHECK(same("Readme.txt", "README.TXT"));
        CHECK(same("", ""));
        CHECK(!same("a", "ab"));
        CHECK(!same("a_b", "a-b"));
        CHECK(ferry_names_casecmp("a", "ab") < 0);
        CHECK(ferry_names_casecmp("B", "a") > 0);
        /* letters compare as upper case: '_' (0x5f) after both */
        CHECK(ferry_names_casecmp("_", "a") > 0);
        CHECK(ferry_names_casecmp("_", "A") > 0);
}

static void test_beyond_ascii(void)
{
        CHECK(same("caf\xc3\xa9", "CAF\xc3\x89"));   /* é É */
        CHECK(same("\xc3\xa4rger", "\xc3\x84RGER")); /* ä Ä */
        CHECK(same("\xd0\xb4\xd0\xbe\xd0\xba", "\xd0\x94\xd0\x9e\xd0\x9a"));
        CHECK(same("\xce\xb1", "\xce\x91")); /* α Α */
        CHECK(!same("caf\xc3\xa9", "cafe"));
        /* ß has no one-character upper case: it stays itself */
        CHECK(!same("stra\xc3\x9f"
                    "e",
                    "STRASSE"));
        CHECK(same("stra\xc3\x9f"
                   "e",
                   "STRA\xc3\x9f"
                   "E"));
        /* ı and ſ have ASCII upper cases that exFAT does not use */
        CHECK(!same("\xc4\xb1", "I"));
        CHECK(!same("\xc5\xbf", "S"));
        CHECK(!same("\xc5\xbf", "s"));
        /* outside the 16-bit plane nothing folds (Deseret 𐐨 𐐀) */
        CHECK(!same("\xf0\x90\x90\xa8", "\xf0\x90\x90\x80"));
        CHECK(same("\xf0\x90\x90\xa8", "\xf0\x90\x90\xa8"));
}

static void test_invalid_utf8(void)
{
        /* a lone byte above 0x7f equals only itself, never a letter */
        CHECK(same("\xe9", "\xe9"));
        CHECK(!same("\xe9", "\xc9"));
        CHECK(!same("\xe9", "e"));
        /* a cut-short sequence is bytes, not the character */
        CHECK(!same("caf\xc3", "caf\xc3\xa9"));
        CHECK(!same("caf\xc3", "CAF\xc3\x89"));
        /* overlong forms and surrogates are not characters */
        CHECK(!same("\xc1\x81", "A"));
        CHECK(!same("\xe0\x81\x81", "A"));
        CHECK(!same("\xed\xa0\x80", "\xed\xa0\x81"));
        CHECK(same("\xed\xa0\x80", "\xed\xa0\x80"));
}

static int cmp(const void *a, const void *b)
{
        return ferry_names_casecmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted by ferry_names_casecmp, the spellings of one name lie together
 * and bsearch finds each from any of them. */
static void test_order(void)
{
        const char *v[] = {"zeta",         "CAF\xc3\x89", "alpha",   "\xe9",
                           "Caf\xc3\xa9",  "ALPHA",       "caf\xc3", "beta",
                           "\xc3\x84rger", "\xc3\xa4RGER"};
        size_t n = sizeof(v) / sizeof(v[0]);
        qsort(v, n, sizeof(v[0]), cmp);
        for (size_t i = 0; i + 1 < n; i++)
                CHECK(ferry_names_casecmp(v[i], v[i + 1]) <= 0);
        const char *keys[] = {"caf\xc3\xa9", "Alpha", "\xc3\xa4rger", "\xe9",
                              "caf\xc3"};
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
                const char *key = keys[k];
                CHECK(bsearch(&key, v, n, sizeof(v[0]), cmp) != NULL);
        }
        const char *absent = "cafe";
        CHECK(bsearch(&absent, v, n, sizeof(v[0]), cmp) == NULL);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_ascii);
        RUN(test_beyond_ascii);
        RUN(test_invalid_utf8);
        RUN(test_order);
        return unit_done();
}
