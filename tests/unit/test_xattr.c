/*
 * test_xattr.c - SRC's xattrs and ACLs (src/xattr.h) and their
 * application (src/meta.h) on a real directory: sorted reads by
 * descriptor and by name, the option filter, lists and values beyond the
 * first buffers, the digest, raw ACLs keeping their mask through
 * ferry_meta_apply, removal in place, skipped namespaces, and the fault
 * op "xattr" and the ENOTSUP memory in children.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "fsio.h"
#include "manifest_types.h"
#include "meta.h"
#include "xattr.h"

#include <sys/xattr.h>
#include <xxhash.h>

#define ACL_ACCESS "system.posix_acl_access"

/* The raw ACL user::rw- user:65534:rw- group::r-- mask::rw- other::r--,
 * as the kernel keeps it (version 2, little-endian tag, perm, id). */
static size_t acl_bytes(unsigned char *out)
{
        static const struct {
                uint16_t tag, perm;
                uint32_t id;
        } e[] = {{1, 6, 0xffffffff},
                 {2, 6, 65534},
                 {4, 4, 0xffffffff},
                 {0x10, 6, 0xffffffff},
                 {0x20, 4, 0xffffffff}};
        size_t n = 0;
        out[n++] = 2, out[n++] = 0, out[n++] = 0, out[n++] = 0;
        for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
                out[n++] = (unsigned char)e[i].tag;
                out[n++] = (unsigned char)(e[i].tag >> 8);
                out[n++] = (unsigned char)e[i].perm;
                out[n++] = (unsigned char)(e[i].perm >> 8);
                for (int k = 0; k < 4; k++)
                        out[n++] = (unsigned char)(e[i].id >> (8 * k));
        }
        return n;
}

static int make_file(int root, const char *name)
{
        int fd = openat(root, name, O_RDWR | O_CREAT | O_EXCL, 0644);
        if (fd < 0)
                unit_fail(__FILE__, __LINE__, "cannot create %s", name);
        return fd;
}

static bool has_xattrs(int fd)
{
        if (fsetxattr(fd, "user.probe", "1", 1, 0))
                return false;
        fremovexattr(fd, "user.probe");
        return true;
}

static void test_read_sorted_and_filtered(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "xattr");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int fd = make_file(root, "f");
        if (!has_xattrs(fd)) {
                fprintf(stderr, "SKIP: %s holds no user xattrs\n", dir);
                atomic_fetch_add(&unit_skipped, 1);
                close(fd), close(root), unit_rmtree(dir);
                return;
        }
        unsigned char acl[64];
        size_t acl_len = acl_bytes(acl);
        CHECK_EQ(fsetxattr(fd, "user.b", "two", 3, 0), 0);
        CHECK_EQ(fsetxattr(fd, "user.a", "one", 3, 0), 0);
        CHECK_EQ(fsetxattr(fd, "user.empty", "", 0, 0), 0);
        CHECK_EQ(fsetxattr(fd, ACL_ACCESS, acl, acl_len, 0), 0);
        struct stat sb;
        fstat(fd, &sb);
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, sb.st_dev, FERRY_XA_ALL), 0);
        CHECK_EQ(xa.n, 4);
        if (xa.n == 4) {
                CHECK(!strcmp(xa.v[0].name, ACL_ACCESS));
                CHECK_EQ(xa.v[0].len, acl_len);
                CHECK(!memcmp(xa.v[0].value, acl, acl_len));
                CHECK(!strcmp(xa.v[1].name, "user.a"));
                CHECK(!strcmp(xa.v[2].name, "user.b"));
                CHECK(xa.v[2].len == 3 && !memcmp(xa.v[2].value, "two", 3));
                CHECK(!strcmp(xa.v[3].name, "user.empty"));
                CHECK_EQ(xa.v[3].len, 0);
        }
        CHECK_EQ(ferry_xattrs_find(&xa, "user.b"), 2);
        CHECK_EQ(ferry_xattrs_find(&xa, "user.c"), -1);
        /* --no-xattrs keeps the ACL alone, --no-acls all but it */
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, sb.st_dev, FERRY_XA_ACLS), 0);
        CHECK(xa.n == 1 && !strcmp(xa.v[0].name, ACL_ACCESS));
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, sb.st_dev, FERRY_XA_XATTRS), 0);
        CHECK(xa.n == 3 && !strcmp(xa.v[0].name, "user.a"));
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, sb.st_dev, 0), 0);
        CHECK_EQ(xa.n, 0);
        /* by name, the same */
        CHECK_EQ(ferry_xattrs_read_at(&xa, root, "f", sb.st_dev, FERRY_XA_ALL),
                 0);
        CHECK_EQ(xa.n, 4);
        CHECK_EQ(ferry_xattrs_read_at(&xa, root, "missing", sb.st_dev,
                                      FERRY_XA_ALL),
                 ENOENT);
        CHECK(!ferry_xattr_kept("system.nfs4_acl", FERRY_XA_ALL));
        /* not root: only user.* of the xattrs, as rsync -X */
        unsigned user = FERRY_XA_ALL | FERRY_XA_USER_ONLY;
        CHECK(ferry_xattr_kept("user.x", user));
        CHECK(ferry_xattr_kept(ACL_ACCESS, user));
        CHECK(!ferry_xattr_kept("security.capability", user));
        CHECK(!ferry_xattr_kept("trusted.x", user));
        CHECK(ferry_xattr_kept("security.capability", FERRY_XA_XATTRS));
        CHECK(!ferry_xattr_kept("security.capability", FERRY_XA_ACLS));
        ferry_xattrs_release(&xa);
        close(fd);
        close(root);
        unit_rmtree(dir);
}

/* A list beyond 1024 bytes (one file) and values beyond the first room
 * of the value buffer (another: ext4 keeps one block of xattrs). */
static void test_big_list_and_values(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "xattr");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int fd = make_file(root, "f"), g = make_file(root, "g");
        if (!has_xattrs(fd)) {
                atomic_fetch_add(&unit_skipped, 1);
                close(fd), close(g), close(root), unit_rmtree(dir);
                return;
        }
        char name[64], val[1500];
        int made = 0;
        for (int i = 0; i < 40; i++) {
                snprintf(name, sizeof(name), "user.a-rather-long-name-%03d", i);
                memset(val, 'a' + i % 26, 4);
                if (!fsetxattr(fd, name, val, 1 + (size_t)i % 4, 0))
                        made++;
        }
        CHECK_EQ(made, 40);
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 1, FERRY_XA_ALL), 0);
        CHECK_EQ(xa.n, 40);
        for (size_t i = 0; i < xa.n; i++) {
                const struct ferry_xattr *e = &xa.v[i];
                int k = atoi(e->name + strlen("user.a-rather-long-name-"));
                CHECK_EQ(e->len, 1 + (size_t)k % 4);
                CHECK(((const char *)e->value)[0] == 'a' + k % 26);
        }
        for (size_t i = 1; i < xa.n; i++)
                CHECK(strcmp(xa.v[i - 1].name, xa.v[i].name) < 0);
        /* two values of 1500: the second does not fit what is left */
        memset(val, 'Y', sizeof(val));
        CHECK_EQ(fsetxattr(g, "user.big0", val, sizeof(val), 0), 0);
        memset(val, 'Z', sizeof(val));
        CHECK_EQ(fsetxattr(g, "user.big1", val, sizeof(val), 0), 0);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, g, 1, FERRY_XA_ALL), 0);
        CHECK_EQ(xa.n, 2);
        if (xa.n == 2) {
                CHECK_EQ(xa.v[1].len, sizeof(val));
                CHECK(!memcmp(xa.v[1].value, val, sizeof(val)));
                memset(val, 'Y', sizeof(val));
                CHECK(!memcmp(xa.v[0].value, val, sizeof(val)));
        }
        ferry_xattrs_release(&xa);
        close(fd), close(g), close(root);
        unit_rmtree(dir);
}

static void test_digest(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "xattr");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int a = make_file(root, "a"), b = make_file(root, "b");
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, a, 1, FERRY_XA_ALL), 0);
        CHECK_EQ(xa.n, 0);
        CHECK(ferry_xattrs_digest(&xa) == XXH3_64bits(NULL, 0));
        if (has_xattrs(a)) {
                /* set in another order: the same digest */
                fsetxattr(a, "user.x", "1", 1, 0);
                fsetxattr(a, "user.y", "22", 2, 0);
                fsetxattr(b, "user.y", "22", 2, 0);
                fsetxattr(b, "user.x", "1", 1, 0);
                ferry_xattrs_read_fd(&xa, a, 1, FERRY_XA_ALL);
                uint64_t da = ferry_xattrs_digest(&xa);
                ferry_xattrs_read_fd(&xa, b, 1, FERRY_XA_ALL);
                CHECK(ferry_xattrs_digest(&xa) == da);
                CHECK(da != XXH3_64bits(NULL, 0));
                /* a name's bytes moved into the value: another digest */
                fsetxattr(b, "user.y", "2", 1, 0);
                ferry_xattrs_read_fd(&xa, b, 1, FERRY_XA_ALL);
                CHECK(ferry_xattrs_digest(&xa) != da);
        }
        ferry_xattrs_release(&xa);
        close(a), close(b), close(root);
        unit_rmtree(dir);
}

static struct ferry_meta_cfg meta_cfg(void)
{
        struct ferry_meta_cfg mc = {.perms = true,
                                    .owner = true,
                                    .times = true,
                                    .xattrs = true,
                                    .acls = true,
                                    .root = geteuid() == 0};
        ferry_dst_caps_all(&mc.caps);
        return mc;
}

static char *list_of(int fd)
{
        static char buf[4096];
        ssize_t n = flistxattr(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                n = 0;
        for (ssize_t i = 0; i < n; i++)
                if (!buf[i])
                        buf[i] = ',';
        buf[n] = '\0';
        return buf;
}

/* ferry_meta_apply: the ACL after the chmod keeps its mask, in place
 * removes what SRC lacks, a namespace DST cannot hold is skipped. */
static void test_apply(void)
{
        char dir[PATH_MAX];
        unit_tmpdir(dir, "xattr");
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        int s = make_file(root, "s"), d = make_file(root, "d");
        if (!has_xattrs(s)) {
                atomic_fetch_add(&unit_skipped, 1);
                close(s), close(d), close(root), unit_rmtree(dir);
                return;
        }
        unsigned char acl[64], got[64];
        size_t acl_len = acl_bytes(acl);
        fchmod(s, 0664);
        CHECK_EQ(fsetxattr(s, ACL_ACCESS, acl, acl_len, 0), 0);
        fsetxattr(s, "user.keep", "k", 1, 0);
        fsetxattr(d, "user.extra", "e", 1, 0);
        struct ferry_stat st;
        CHECK_EQ(ferry_fsio_fstat(s, &st), 0);
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, s, st.dev, FERRY_XA_ALL), 0);
        struct ferry_meta_cfg mc = meta_cfg();
        struct ferry_meta_target t = {d, -1, NULL, false, NULL};
        uint32_t ap = 0;
        enum ferry_step step = FERRY_STEP_NONE;
        CHECK_EQ(ferry_meta_apply(&mc, &t, &st, &xa, &ap, &step), 0);
        CHECK((ap & (MF_AP_XATTRS | MF_AP_ACLS | MF_AP_PERMS | MF_AP_TIMES)) ==
              (MF_AP_XATTRS | MF_AP_ACLS | MF_AP_PERMS | MF_AP_TIMES));
        CHECK_EQ(fgetxattr(d, ACL_ACCESS, got, sizeof(got)), (long)acl_len);
        CHECK(!memcmp(got, acl, acl_len));
        struct stat sb;
        fstat(d, &sb);
        CHECK_EQ(sb.st_mode & 0777, 0664); /* group rw- is the mask */
        CHECK(strstr(list_of(d), "user.extra") != NULL); /* not in place */
        t.in_place = true;
        CHECK_EQ(ferry_meta_apply(&mc, &t, &st, &xa, &ap, &step), 0);
        CHECK(strstr(list_of(d), "user.extra") == NULL);
        CHECK(strstr(list_of(d), "user.keep") != NULL);
        /* SRC without an ACL: in place removes DST's */
        fremovexattr(s, ACL_ACCESS);
        ferry_xattrs_read_fd(&xa, s, st.dev, FERRY_XA_ALL);
        CHECK_EQ(ferry_meta_apply(&mc, &t, &st, &xa, &ap, &step), 0);
        CHECK(fgetxattr(d, ACL_ACCESS, NULL, 0) < 0 && errno == ENODATA);
        /* DST holds no user xattrs: skipped, no error, not in full */
        fremovexattr(d, "user.keep");
        mc.caps.xattrs_user = false;
        CHECK_EQ(ferry_meta_apply(&mc, &t, &st, &xa, &ap, &step), 0);
        CHECK(!(ap & MF_AP_XATTRS) && (ap & MF_AP_ACLS));
        CHECK(strstr(list_of(d), "user.keep") == NULL);
        ferry_xattrs_release(&xa);
        close(s), close(d), close(root);
        unit_rmtree(dir);
}

/* ---- in children: the fault table is read once ---- */

/* FERRY_FAULT=xattr:1:5,xattr:3:5: the first list fails with EIO, and
 * the third call, the in-place list of DST. */
static int child_fault(void)
{
        int fd = open(getenv("UNIT_FILE"), O_RDONLY);
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 1, FERRY_XA_ALL), EIO);
        CHECK_EQ(xa.n, 0);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 1, FERRY_XA_ALL), 0);
        /* apply: the xattr part fails, times still applied, first rc */
        struct ferry_meta_cfg mc = meta_cfg();
        struct ferry_meta_target t = {fd, -1, NULL, true, NULL};
        struct ferry_stat st;
        ferry_fsio_fstat(fd, &st);
        uint32_t ap = 0;
        enum ferry_step step = FERRY_STEP_NONE;
        mc.owner = false;
        mc.perms = false;
        CHECK_EQ(ferry_meta_apply(&mc, &t, &st, &xa, &ap, &step), EIO);
        CHECK_EQ(step, FERRY_STEP_XATTR);
        CHECK(ap == MF_AP_TIMES);
        ferry_xattrs_release(&xa);
        close(fd);
        fflush(NULL);
        _exit(atomic_load(&unit_failed) ? 1 : 0);
}

/* FERRY_FAULT=xattr:1:95,xattr:2:5: a file system that says ENOTSUP
 * (a FUSE or network file system without xattrs) is not asked again; one
 * on another device is. */
static int child_nosup(void)
{
        int fd = open(getenv("UNIT_FILE"), O_RDONLY);
        struct ferry_xattrs xa;
        ferry_xattrs_init(&xa);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 7, FERRY_XA_ALL),
                 0); /* call 1 */
        CHECK(xa.nosup);
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 7, FERRY_XA_ALL), 0); /* none */
        CHECK_EQ(ferry_xattrs_read_fd(&xa, fd, 8, FERRY_XA_ALL), EIO); /* 2 */
        ferry_xattrs_release(&xa);
        close(fd);
        fflush(NULL);
        _exit(atomic_load(&unit_failed) ? 1 : 0);
}

static void test_faults(void)
{
        char dir[PATH_MAX], var[PATH_MAX + 16];
        unit_tmpdir(dir, "xattr");
        snprintf(var, sizeof(var), "UNIT_FILE=%s/f", dir);
        int root = open(dir, O_RDONLY | O_DIRECTORY);
        close(make_file(root, "f"));
        const char *env[] = {"FERRY_FAULT=xattr:1:5,xattr:3:5", var, NULL};
        CHECK(unit_exited(unit_run_child("fault", env), 0));
        const char *env2[] = {"FERRY_FAULT=xattr:1:95,xattr:2:5", var, NULL};
        CHECK(unit_exited(unit_run_child("nosup", env2), 0));
        close(root);
        unit_rmtree(dir);
}

int main(int argc, char **argv)
{
        unit_init(argc, argv);
        if (argc > 1) {
                if (!strcmp(argv[1], "fault"))
                        return child_fault();
                if (!strcmp(argv[1], "nosup"))
                        return child_nosup();
                fprintf(stderr, "unknown child mode '%s'\n", argv[1]);
                return 2;
        }
        RUN(test_read_sorted_and_filtered);
        RUN(test_big_list_and_values);
        RUN(test_digest);
        RUN(test_apply);
        RUN(test_faults);
        return unit_done();
}
