/*
 * xattr.c - reading SRC's extended attributes and ACLs into struct
 * ferry_xattrs (xattr.h): the list, the filter, the values (retried when
 * one grows between list and get), the sort, and the digest.
 */
#define _GNU_SOURCE
#include "xattr.h"

#include "fsio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define LIST_START  1024 /* the list buffer's first size */
#define VALUE_START 1024 /* the value buffer's first room */
#define RANGE_TRIES 8    /* a value or list that keeps growing: EAGAIN */

/* The entry read: by descriptor (fd >= 0) or name in dirfd. */
struct src {
        int fd, dirfd;
        const char *name;
};

static int do_list(const struct src *s, char *buf, size_t size, size_t *len)
{
        return s->fd >= 0 ? ferry_fsio_flistxattr(s->fd, buf, size, len)
                          : ferry_fsio_llistxattrat(s->dirfd, s->name, buf,
                                                    size, len);
}

static int do_get(const struct src *s, const char *name, void *buf, size_t size,
                  size_t *len)
{
        return s->fd >= 0 ? ferry_fsio_fgetxattr(s->fd, name, buf, size, len)
                          : ferry_fsio_lgetxattrat(s->dirfd, s->name, name, buf,
                                                   size, len);
}

void ferry_xattrs_init(struct ferry_xattrs *xa)
{
        memset(xa, 0, sizeof(*xa));
        ferry_buf_init(&xa->list);
        ferry_buf_init(&xa->values);
}

void ferry_xattrs_release(struct ferry_xattrs *xa)
{
        free(xa->v);
        ferry_buf_release(&xa->list);
        ferry_buf_release(&xa->values);
        ferry_xattrs_init(xa);
}

bool ferry_xattr_is_acl(const char *name)
{
        return !strcmp(name, "system.posix_acl_access") ||
               !strcmp(name, "system.posix_acl_default");
}

bool ferry_xattr_kept(const char *name, unsigned keep)
{
        if (ferry_xattr_is_acl(name))
                return keep & FERRY_XA_ACLS;
        if (!(keep & FERRY_XA_XATTRS))
                return false;
        if (keep & FERRY_XA_USER_ONLY)
                return !strncmp(name, "user.", 5);
        return strncmp(name, "system.", 7) != 0;
}

/* The list of names into xa->list (len: its bytes), one call when it
 * fits the buffer. */
static int read_list(struct ferry_xattrs *xa, const struct src *s, size_t *len)
{
        ferry_buf_reset(&xa->list);
        if (ferry_buf_grow(&xa->list, LIST_START))
                return ENOMEM;
        for (int i = 0; i < RANGE_TRIES; i++) {
                int rc = do_list(s, xa->list.buf, xa->list.alloc - 1, len);
                if (rc != ERANGE)
                        return rc;
                size_t need = 0;
                if ((rc = do_list(s, NULL, 0, &need)))
                        return rc;
                if (ferry_buf_grow(&xa->list, need + 64))
                        return ENOMEM;
        }
        return EAGAIN;
}

/* Appends name's value to xa->values; *got false when it vanished. */
static int read_value(struct ferry_xattrs *xa, const struct src *s,
                      const char *name, size_t *len, bool *got)
{
        struct ferry_buf *b = &xa->values;
        *got = true;
        if (ferry_buf_grow(b, b->alloc > b->len + 256 ? 0 : VALUE_START))
                return ENOMEM;
        for (int i = 0; i < RANGE_TRIES; i++) {
                int rc = do_get(s, name, b->buf + b->len, b->alloc - b->len - 1,
                                len);
                if (rc == ENODATA || rc == ENOTSUP) {
                        *got = false;
                        return 0;
                }
                if (rc != ERANGE)
                        return rc;
                size_t need = 0;
                if ((rc = do_get(s, name, NULL, 0, &need)))
                        return rc == ENODATA ? (*got = false, 0) : rc;
                if (ferry_buf_grow(b, need + 64))
                        return ENOMEM;
        }
        return EAGAIN;
}

static int add_entry(struct ferry_xattrs *xa, const char *name, size_t off,
                     size_t len)
{
        if (xa->n == xa->cap) {
                size_t cap = xa->cap ? xa->cap * 2 : 16;
                struct ferry_xattr *v = realloc(xa->v, cap * sizeof(*v));
                if (!v)
                        return ENOMEM;
                xa->v = v;
                xa->cap = cap;
        }
        xa->v[xa->n++] = (struct ferry_xattr){name, NULL, len, off};
        return 0;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(((const struct ferry_xattr *)a)->name,
                      ((const struct ferry_xattr *)b)->name);
}

static int read_all(struct ferry_xattrs *xa, const struct src *s, uint64_t dev,
                    unsigned keep)
{
        xa->n = 0;
        if (!(keep & FERRY_XA_ALL) || (xa->nosup && xa->nosup_dev == dev))
                return 0;
        size_t len = 0;
        int rc = read_list(xa, s, &len);
        if (rc == ENOTSUP) {
                xa->nosup = true;
                xa->nosup_dev = dev;
                return 0;
        }
        if (rc || !len)
                return rc;
        ferry_buf_reset(&xa->values);
        for (size_t at = 0; at < len;) {
                const char *name = xa->list.buf + at;
                at += strnlen(name, len - at) + 1;
                if (!ferry_xattr_kept(name, keep))
                        continue;
                size_t off = xa->values.len, vlen = 0;
                bool got;
                if ((rc = read_value(xa, s, name, &vlen, &got)))
                        return rc;
                if (!got)
                        continue;
                xa->values.len += vlen;
                if ((rc = add_entry(xa, name, off, vlen)))
                        return rc;
        }
        for (size_t i = 0; i < xa->n; i++)
                xa->v[i].value = xa->values.buf + xa->v[i].val_off;
        if (xa->n) /* qsort of NULL, even of 0 entries, is undefined */
                qsort(xa->v, xa->n, sizeof(*xa->v), by_name);
        return 0;
}

int ferry_xattrs_read_fd(struct ferry_xattrs *xa, int fd, uint64_t dev,
                         unsigned keep)
{
        struct src s = {fd, -1, NULL};
        int rc = read_all(xa, &s, dev, keep);
        if (rc)
                xa->n = 0;
        return rc;
}

int ferry_xattrs_read_at(struct ferry_xattrs *xa, int dirfd, const char *name,
                         uint64_t dev, unsigned keep)
{
        struct src s = {-1, dirfd, name};
        int rc = read_all(xa, &s, dev, keep);
        if (rc)
                xa->n = 0;
        return rc;
}

long ferry_xattrs_find(const struct ferry_xattrs *xa, const char *name)
{
        size_t lo = 0, hi = xa->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(xa->v[mid].name, name);
                if (!c)
                        return (long)mid;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1;
}

uint64_t ferry_xattrs_digest(const struct ferry_xattrs *xa)
{
        uint64_t h = XXH3_64bits(NULL, 0);
        for (size_t i = 0; i < xa->n; i++) {
                const struct ferry_xattr *e = &xa->v[i];
                unsigned char le[8];
                for (int k = 0; k < 8; k++)
                        le[k] = (unsigned char)((uint64_t)e->len >> (8 * k));
                h = XXH3_64bits_withSeed(e->name, strlen(e->name) + 1, h);
                h = XXH3_64bits_withSeed(le, sizeof(le), h);
                h = XXH3_64bits_withSeed(e->value, e->len, h);
        }
        return h;
}
