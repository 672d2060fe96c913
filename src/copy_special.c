/*
 * copy_special.c - special files (FIFOs, sockets, character and block
 * devices) in DST (copier.h): the node made under its temp name with
 * SRC's kind and device number, SRC's metadata applied to it by name,
 * then put in place under rule 9 (ferry_copier_install). A special's
 * content is its kind and device number: its hash (XXH3-128 of the two,
 * ferry_copy_special_hash), which verify compares, and the identity the
 * manifest records of what ferry put in DST (ferry_copy_special_id, kept
 * in dst_size: ferry_copy_matches compares it).
 */
#define _GNU_SOURCE
#include "config.h"
#include "copier.h"

#include "fsio.h"

#include <errno.h>
#include <limits.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool ferry_copy_is_special(uint32_t mode)
{
        return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) ||
               S_ISBLK(mode);
}

static bool is_device(uint32_t mode)
{
        return S_ISCHR(mode) || S_ISBLK(mode);
}

bool ferry_copy_can_make_devices(void)
{
        if (geteuid() != 0)
                return false;
        /* root in a container may lack CAP_MKNOD (docker --cap-drop) */
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        memset(d, 0, sizeof(d));
        if (syscall(SYS_capget, &h, d))
                return true; /* cannot tell: mknod will say */
        return d[CAP_MKNOD / 32].effective & (1u << (CAP_MKNOD % 32));
}

uint64_t ferry_copy_special_id(uint32_t mode, uint64_t rdev)
{
        uint64_t kind = mode & S_IFMT;
        uint64_t dev = is_device(mode) ? rdev : 0;
        return kind << 48 | (dev & ((UINT64_C(1) << 48) - 1));
}

void ferry_copy_special_hash(uint32_t mode, uint64_t rdev, uint8_t out[16])
{
        uint64_t id = ferry_copy_special_id(mode, rdev);
        unsigned char b[8];
        for (int k = 0; k < 8; k++) /* big-endian: the same on every host */
                b[k] = (unsigned char)(id >> (56 - 8 * k));
        XXH128_canonical_t canon;
        XXH128_canonicalFromHash(&canon, XXH3_128bits(b, sizeof(b)));
        memcpy(out, canon.digest, 16);
}

int ferry_copy_special_hash_at(int dirfd, const char *name, uint8_t out[16])
{
        struct ferry_stat st;
        int rc = ferry_fsio_statat(dirfd, name, &st);
        if (rc)
                return rc;
        /* another type of entry hashes as no special does */
        ferry_copy_special_hash(ferry_copy_is_special(st.mode) ? st.mode : 0,
                                st.rdev, out);
        return 0;
}

/* The node under tmp, a leftover of a crashed run replaced. */
static int make_node(struct ferry_copier *c, const char *tmp,
                     const struct ferry_stat *st)
{
        mode_t mode = (mode_t)(st->mode & S_IFMT) | S_IRUSR | S_IWUSR;
        uint64_t rdev = is_device(st->mode) ? st->rdev : 0;
        int rc = ferry_fsio_mknodat(c->dst_dir, tmp, mode, rdev);
        if (rc != EEXIST)
                return rc;
        ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
        return ferry_fsio_mknodat(c->dst_dir, tmp, mode, rdev);
}

int ferry_copier_special_once(struct ferry_copier *c, const char *name,
                              struct ferry_item *it, bool *changed,
                              const struct step **step)
{
        char tmp[NAME_MAX + 1];
        struct ferry_stat st;
        *changed = false;
        *step = &S_STAT_SRC;
        int rc = ferry_fsio_statat(c->src_dir, name, &st);
        if (rc)
                return rc;
        /* no longer a special file, or a device the run leaves out */
        if (!ferry_copy_is_special(st.mode) ||
            (is_device(st.mode) && !(c->cfg.devices && c->mknod))) {
                *changed = true;
                return 0;
        }
        if ((rc = ferry_copier_read_xattrs(c, -1, name, &st, it, step)))
                return rc;
        ferry_copy_temp_name(name, it->id, tmp);
        *step = ferry_copier_dst_step(FERRY_STEP_MKNOD);
        if ((rc = make_node(c, tmp, &st)))
                return rc;
        struct ferry_meta_target t = {-1, c->dst_dir, tmp, false, NULL};
        enum ferry_step fs = FERRY_STEP_NONE;
        it->meta_fail = (struct ferry_failure){0};
        rc = ferry_meta_apply(&c->cfg.meta, &t, &st, &c->xa, &it->applied, &fs);
        /* the node is made: a metadata shortfall does not fail it */
        if (rc && ferry_copier_meta_failed(c, it, rc, fs))
                rc = 0;
        if (rc)
                *step = ferry_copier_dst_step(fs);
        if (!rc) {
                *step = &S_RENAME;
                rc = ferry_copier_install(c, it, &st, tmp, name);
                if (!rc)
                        rc = ferry_copier_times_again(c, it, &st, name, step);
        }
        if (rc) {
                ferry_fsio_unlinkat(c->dst_dir, tmp, 0);
                return rc;
        }
        ferry_copy_special_hash(st.mode, st.rdev, it->hash);
        it->st = st;
        return 0;
}
