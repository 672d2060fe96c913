/*
 * dstcaps.c - learning which metadata DST can hold (ferry_dst_caps_probe,
 * dstcaps.h) and saying it in words (ferry_dst_caps_missing).
 *
 * A probe file in DST's root is given a mode, another owner (as root),
 * xattrs and an ACL, each read back or its call's result taken; a probe
 * symlink gets its own times and a probe FIFO is made; the probe file,
 * given a time and closed, is renamed and its mtime read back (fusefat
 * sets it to now on a rename). The largest file
 * size comes from the file system's type (statfs, and for FUSE the
 * subtype in /proc/self/mountinfo): FAT holds files up to 4 GiB - 1.
 * Learning it by extending the probe file is no choice: a file system
 * without holes (exFAT, FAT) allocates, and may zero, what it extends.
 * Plain system calls, not fsio, so that the fault injection of the tests
 * does not count them; DST's root gets its times back afterwards.
 */
#define _GNU_SOURCE
#include "dstcaps.h"

#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define FAT_MAX_SIZE 0xffffffffULL /* 4 GiB - 1 */
#define MSDOS_MAGIC  0x4d44
#define FUSE_MAGIC   0x65735546
#define PROBE_ID     54321 /* the other owner a root probe gives its file */

/* ".ferry-probe.<pid>.<what>.ferry-part" (ferry_probe_sweep knows each) */
static void probe_name(char *out, size_t size, const char *what)
{
        char middle[8];
        snprintf(middle, sizeof(middle), ".%s", what);
        ferry_probe_name(out, size, (long)getpid(), middle, "");
}

/* The ACL "u::rw-,u:PROBE_ID:r--,g::r--,m::r--,o::---" in the kernel's
 * system.posix_acl_access format (version 2, then tag, perm, id). */
static size_t probe_acl(unsigned char *out)
{
        static const struct {
                uint16_t tag, perm;
                uint32_t id;
        } ents[] = {{0x01, 6, UINT32_MAX},
                    {0x02, 4, PROBE_ID},
                    {0x04, 4, UINT32_MAX},
                    {0x10, 4, UINT32_MAX},
                    {0x20, 0, UINT32_MAX}};
        uint32_t version = 2;
        memcpy(out, &version, 4);
        size_t n = 4;
        for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
                memcpy(out + n, &ents[i].tag, 2);
                memcpy(out + n + 2, &ents[i].perm, 2);
                memcpy(out + n + 4, &ents[i].id, 4);
                n += 8;
        }
        return n;
}

static bool probe_xattr(int fd, const char *name)
{
        if (fsetxattr(fd, name, "1", 1, 0))
                return false;
        fremovexattr(fd, name);
        return true;
}

/* Mode, owner, xattrs and ACLs on an open probe file. */
static void probe_file(int fd, bool root, struct ferry_dst_caps *c)
{
        struct stat st;
        c->perms = !fchmod(fd, 0640) && !fstat(fd, &st) &&
                   (st.st_mode & 07777) == 0640;
        /* not root: ferry chowns nothing, DST's owners do not matter */
        c->owner =
                !root || (!fchown(fd, PROBE_ID, PROBE_ID) && !fstat(fd, &st) &&
                          st.st_uid == PROBE_ID && st.st_gid == PROBE_ID);
        c->xattrs_user = probe_xattr(fd, "user.ferry-probe");
        c->xattrs_other =
                root ? probe_xattr(fd, "trusted.ferry-probe") : c->xattrs_user;
        unsigned char acl[4 + 5 * 8];
        size_t len = probe_acl(acl);
        c->acls = !fsetxattr(fd, "system.posix_acl_access", acl, len, 0);
        if (c->acls)
                fremovexattr(fd, "system.posix_acl_access");
}

static bool probe_symlink_times(int dirfd)
{
        char name[NAME_MAX + 1];
        probe_name(name, sizeof(name), "l");
        unlinkat(dirfd, name, 0);
        struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
        bool ok = !symlinkat("ferry-probe", dirfd, name) &&
                  !utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
        unlinkat(dirfd, name, 0); /* whatever a refusal left */
        return ok;
}

/* Whether name (the probe file) takes a second name: exFAT says EPERM.
 * Only a refusal that means "never" counts (a share may report a link
 * count of 1, or refuse once for a passing reason). */
static bool probe_hard_link(int dirfd, const char *name)
{
        char second[NAME_MAX + 1];
        probe_name(second, sizeof(second), "h");
        unlinkat(dirfd, second, 0);
        bool ok = !linkat(dirfd, name, dirfd, second, 0) ||
                  (errno != EPERM && errno != EOPNOTSUPP && errno != ENOSYS);
        unlinkat(dirfd, second, 0);
        return ok;
}

static bool probe_fifo(int dirfd)
{
        char name[NAME_MAX + 1];
        probe_name(name, sizeof(name), "p");
        unlinkat(dirfd, name, 0);
        struct stat st;
        /* fusefat makes a plain file of it, and says it failed */
        bool ok = !mkfifoat(dirfd, name, 0600) &&
                  !fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) &&
                  S_ISFIFO(st.st_mode);
        unlinkat(dirfd, name, 0);
        return ok;
}

/* The type /proc/self/mountinfo gives the mount of dev ("fuse.fusefat",
 * "vfat"), or "" when it cannot tell. */
static void mount_type(dev_t dev, char *type, size_t size)
{
        type[0] = '\0';
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return;
        char line[4096];
        while (fgets(line, sizeof(line), f)) {
                unsigned maj, min;
                if (sscanf(line, "%*d %*d %u:%u", &maj, &min) != 2 ||
                    makedev(maj, min) != dev)
                        continue;
                const char *sep = strstr(line, " - ");
                char t[64];
                if (sep && sscanf(sep + 3, "%63s", t) == 1)
                        snprintf(type, size, "%s", t);
                break;
        }
        fclose(f);
}

uint64_t ferry_dst_caps_max_size(long fs_type, const char *mount_type)
{
        static const char *const fat[] = {
                "vfat", "msdos", "fat", "fuse.fusefat", "fusefat", "fuse.vfat"};
        if (fs_type == MSDOS_MAGIC)
                return FAT_MAX_SIZE;
        for (size_t i = 0; mount_type && i < sizeof(fat) / sizeof(fat[0]); i++)
                if (!strcmp(mount_type, fat[i]))
                        return FAT_MAX_SIZE;
        return UINT64_MAX;
}

static uint64_t probe_max_size(int dirfd)
{
        struct statfs sf;
        struct stat st;
        if (fstatfs(dirfd, &sf))
                return UINT64_MAX;
        char type[64] = "";
        if (sf.f_type == FUSE_MAGIC && !fstat(dirfd, &st))
                mount_type(st.st_dev, type, sizeof(type));
        return ferry_dst_caps_max_size((long)sf.f_type, type);
}

#define PROBE_TIME 1000000000 /* 2001-09-09, even: FAT keeps 2 s */

/* Whether the mtime the copier's way set on probe file name (futimens,
 * then close) stays when it is renamed; the file is removed either way.
 * A DST that refused the time (set false) or refuses the rename tells
 * nothing: true (a refused rename fails the copy anyway). */
static bool probe_rename_times(int dirfd, const char *name, bool set)
{
        char moved[NAME_MAX + 1];
        probe_name(moved, sizeof(moved), "r");
        unlinkat(dirfd, moved, 0);
        struct stat st;
        bool ok = true;
        if (set && !renameat(dirfd, name, dirfd, moved)) {
                /* FAT keeps 2 s, exFAT 10 ms */
                ok = fstatat(dirfd, moved, &st, AT_SYMLINK_NOFOLLOW) ||
                     (st.st_mtim.tv_sec >= PROBE_TIME - 2 &&
                      st.st_mtim.tv_sec <= PROBE_TIME + 2);
                unlinkat(dirfd, moved, 0);
        }
        unlinkat(dirfd, name, 0);
        return ok;
}

static int probe_all(int dirfd, struct ferry_dst_caps *c)
{
        char name[NAME_MAX + 1];
        probe_name(name, sizeof(name), "m");
        bool root = geteuid() == 0;
        int fd = openat(dirfd, name,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600);
        if (fd < 0 && errno == EEXIST) { /* a crashed run's, of this pid */
                unlinkat(dirfd, name, 0);
                fd = openat(dirfd, name,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                                    O_CLOEXEC,
                            0600);
        }
        if (fd < 0)
                return errno;
        probe_file(fd, root, c);
        struct timespec ts[2] = {{PROBE_TIME, 0}, {PROBE_TIME, 0}};
        bool set = !futimens(fd, ts);
        close(fd);
        c->hard_links = probe_hard_link(dirfd, name);
        c->times_survive_rename = probe_rename_times(dirfd, name, set);
        c->symlink_times = probe_symlink_times(dirfd);
        c->specials = probe_fifo(dirfd);
        return 0;
}

int ferry_dst_caps_probe(int dirfd, struct ferry_dst_caps *c)
{
        ferry_dst_caps_all(c);
        c->max_size = probe_max_size(dirfd);
        struct stat before;
        bool have = fstat(dirfd, &before) == 0;
        struct ferry_dst_caps p = *c;
        int rc = probe_all(dirfd, &p);
        if (!rc)
                *c = p; /* a DST that took no probe file: assume all */
        if (have)
                ferry_probe_restore_times(dirfd, &before.st_atim,
                                          &before.st_mtim);
        return rc;
}

static void add_word(char *buf, size_t size, const char *word, size_t *n,
                     size_t total)
{
        size_t len = strlen(buf);
        const char *sep = !*n ? "" : *n + 1 == total ? " or " : ", ";
        snprintf(buf + len, size - len, "%s%s", sep, word);
        (*n)++;
}

bool ferry_dst_caps_missing(const struct ferry_dst_caps *c,
                            const struct ferry_dst_wants *w, char *buf,
                            size_t size)
{
        const char *words[7];
        size_t total = 0;
        if (w->owner && !c->owner)
                words[total++] = "owners";
        if (w->perms && !c->perms)
                words[total++] = "modes";
        if (w->xattrs && !c->xattrs_user)
                words[total++] = "xattrs";
        else if (w->xattrs && !c->xattrs_other)
                words[total++] = "security or trusted xattrs";
        if (w->acls && !c->acls)
                words[total++] = "ACLs";
        if (w->times && !c->symlink_times)
                words[total++] = "symlink times";
        if (w->specials && !c->specials)
                words[total++] = "special files";
        if (w->hard_links && !c->hard_links)
                words[total++] = "hard links";
        buf[0] = '\0';
        if (!total)
                return false;
        snprintf(buf, size, "the destination keeps no ");
        size_t n = 0;
        for (size_t i = 0; i < total; i++)
                add_word(buf, size, words[i], &n, total);
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, ": copying data%s",
                 w->times ? " and times" : "");
        return true;
}
