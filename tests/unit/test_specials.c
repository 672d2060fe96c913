/*
 * test_specials.c - special files (FIFOs, sockets, devices) in the
 * manifest and in rule 9: what a scan makes of them under the options of
 * its listing (skipped or pending, and back), their device number kept
 * (files.rdev) and handed out, a changed kind or rdev a changed row, and
 * ferry_copy_matches comparing kind and rdev.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "batch.h"
#include "copier.h"
#include "manifest.h"

#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static struct ferry_stat mkstat(uint32_t mode, uint64_t rdev, uint64_t ino)
{
        struct ferry_stat st;
        memset(&st, 0, sizeof(st));
        st.mode = mode;
        st.rdev = rdev;
        st.mtime = (struct ferry_time){1000, 5};
        st.ctime = (struct ferry_time){1007, 0};
        st.dev = 0xfe00;
        st.ino = ino;
        st.nlink = 1;
        return st;
}

static struct ferry_manifest *mem_open(void)
{
        struct ferry_manifest *m = NULL;
        struct ferry_error err;
        CHECK_EQ(ferry_manifest_open(NULL, MF_MEMORY | MF_CREATE, &m, &err), 0);
        if (m)
                CHECK_EQ(ferry_manifest_begin(m), 0);
        return m;
}

/* One scan of a root holding "fifo" and "null" (a char device of rdev),
 * with the options given; out[0] is the fifo's, out[1] the device's. */
static int64_t scan(struct ferry_manifest *m, bool specials, bool devices,
                    uint64_t rdev, struct ferry_entry_rec out[2])
{
        int64_t gen = 0;
        uint64_t files, bytes;
        CHECK_EQ(ferry_manifest_scan_start(m, &gen, &files, &bytes), 0);
        struct ferry_listing *l = ferry_listing_new("", 0, 4);
        CHECK(l != NULL);
        if (!l)
                return gen;
        l->dir_st = mkstat(S_IFDIR | 0755, 0, 1);
        l->first = l->last = true;
        l->seen = 2;
        struct ferry_stat f = mkstat(S_IFIFO | 0640, 0, 2);
        struct ferry_stat d = mkstat(S_IFCHR | 0620, rdev, 3);
        CHECK_EQ(ferry_listing_add(l, "fifo", 4, &f), 0);
        CHECK_EQ(ferry_listing_add(l, "null", 4, &d), 0);
        struct ferry_listing_rec how = {
                .gen = gen, .specials = specials, .devices = devices};
        CHECK_EQ(ferry_manifest_record_listing(m, l, &how, out), 0);
        ferry_listing_free(l);
        CHECK_EQ(ferry_manifest_scan_complete(m, gen), 0);
        return gen;
}

/* How many rows the first copy pass of scan gen hands out, and the
 * device number of "null" in *rdev (0 when not handed out). */
static size_t handed(struct ferry_manifest *m, int64_t gen, uint64_t *rdev)
{
        struct ferry_handout h;
        ferry_manifest_handout_start(&h, PASS_COPY_FIRST, gen);
        struct ferry_batch *b = ferry_batch_new(WORK_COPY, 16);
        CHECK(b != NULL);
        if (!b)
                return 0;
        CHECK_EQ(ferry_manifest_handout(m, &h, b, 16, UINT64_MAX), 0);
        *rdev = 0;
        size_t n = b->n;
        for (size_t i = 0; i < b->n; i++)
                if (!strcmp(ferry_batch_at(b, b->items[i].name_off), "null"))
                        *rdev = b->items[i].st.rdev;
        ferry_batch_free(b);
        return n;
}

static void test_scan_gates_specials(void)
{
        struct ferry_manifest *m = mem_open();
        if (!m)
                return;
        struct ferry_entry_rec out[2];
        uint64_t dev = makedev(1, 3), rdev = 0;
        /* none copied: both skipped */
        scan(m, false, false, dev, out);
        CHECK_EQ(out[0].res, UP_NEW);
        CHECK(out[0].skipped && out[1].skipped);
        /* the same options again: unchanged, still skipped */
        scan(m, false, false, dev, out);
        CHECK_EQ(out[0].res, UP_UNCHANGED);
        CHECK(out[0].skipped && out[1].skipped);
        /* FIFOs allowed now: the fifo is pending, the device skipped */
        scan(m, true, false, dev, out);
        CHECK_EQ(out[0].res, UP_CHANGED);
        CHECK(!out[0].skipped && out[1].skipped);
        CHECK_EQ(out[1].res, UP_UNCHANGED);
        /* and devices: pending too, handed out with their rdev */
        int64_t gen = scan(m, true, true, dev, out);
        CHECK(!out[0].skipped && !out[1].skipped);
        CHECK_EQ(out[1].res, UP_CHANGED);
        CHECK_EQ(handed(m, gen, &rdev), 2);
        CHECK_EQ(rdev, dev);
        /* a pending device the options leave out again: skipped */
        gen = scan(m, true, false, dev, out);
        CHECK(out[1].skipped);
        CHECK_EQ(out[1].res, UP_CHANGED);
        CHECK_EQ(handed(m, gen, &rdev), 1);
        /* another device number: a changed row */
        gen = scan(m, true, true, dev, out);
        CHECK_EQ(handed(m, gen, &rdev), 2);
        gen = scan(m, true, true, makedev(1, 5), out);
        CHECK_EQ(out[1].res, UP_CHANGED);
        CHECK_EQ(out[0].res, UP_RESUMED);
        CHECK_EQ(handed(m, gen, &rdev), 2);
        CHECK_EQ(rdev, makedev(1, 5));
        ferry_manifest_close(m);
}

static void test_matches_kind_and_rdev(void)
{
        struct ferry_stat fifo = mkstat(S_IFIFO | 0600, 0, 2);
        struct ferry_stat sock = mkstat(S_IFSOCK | 0600, 0, 2);
        struct ferry_stat null = mkstat(S_IFCHR | 0600, makedev(1, 3), 2);
        struct ferry_stat zero = mkstat(S_IFCHR | 0600, makedev(1, 5), 2);
        struct ferry_stat blk = mkstat(S_IFBLK | 0600, makedev(1, 3), 2);
        struct ferry_stat reg = mkstat(S_IFREG | 0600, 0, 2);
        struct ferry_dst_rec rec = {FT_SPECIAL,
                                    ferry_copy_special_id(null.mode, null.rdev),
                                    null.mtime};
        CHECK(ferry_copy_matches(&rec, &null));
        CHECK(!ferry_copy_matches(&rec, &zero)); /* another rdev */
        CHECK(!ferry_copy_matches(&rec, &blk));  /* another kind */
        CHECK(!ferry_copy_matches(&rec, &reg));
        rec.size = ferry_copy_special_id(fifo.mode, 0);
        CHECK(ferry_copy_matches(&rec, &fifo));
        CHECK(!ferry_copy_matches(&rec, &sock));
        /* a FIFO's rdev plays no part */
        CHECK_EQ(ferry_copy_special_id(fifo.mode, 77), rec.size);
        uint8_t a[16], b[16];
        ferry_copy_special_hash(null.mode, null.rdev, a);
        ferry_copy_special_hash(zero.mode, zero.rdev, b);
        CHECK(memcmp(a, b, 16) != 0);
        ferry_copy_special_hash(blk.mode, blk.rdev, b);
        CHECK(memcmp(a, b, 16) != 0);
        ferry_copy_special_hash(null.mode, null.rdev, b);
        CHECK_MEM(a, b, 16);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        RUN(test_scan_gates_specials);
        RUN(test_matches_kind_and_rdev);
        return unit_done();
}
