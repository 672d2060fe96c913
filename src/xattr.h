/*
 * xattr.h - an entry's extended attributes and POSIX ACLs as read from
 * SRC: names and values, sorted by name, filtered by the options, and
 * their digest.
 *
 * ACLs are the raw system.posix_acl_access and system.posix_acl_default
 * attributes, copied byte for byte (no libacl): the kernel's format
 * (version 2, little-endian entries of tag, perm and id) is the same on
 * every Linux file system that holds ACLs, so the copy is exact and uses
 * the same code path as every other xattr. Other system.* names
 * (nfs4_acl, richacl, ...) belong to one file system and are never kept.
 *
 * Calling sequence (one per copier; the memory is reused):
 *   struct ferry_xattrs xa;
 *   ferry_xattrs_init(&xa);
 *   ferry_xattrs_read_fd(&xa, fd, st.dev, FERRY_XA_XATTRS | FERRY_XA_ACLS);
 *   for (size_t i = 0; i < xa.n; i++) xa.v[i].name, .value, .len
 *   ferry_xattrs_digest(&xa);
 *   ferry_xattrs_release(&xa);
 * Reading costs one system call for an entry without attributes (the
 * list is read into a buffer, no size query first), and none at all on a
 * file system that said ENOTSUP once (remembered by its st_dev).
 */
#ifndef FERRY_XATTR_H
#define FERRY_XATTR_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ferry_xattr {
        const char *name; /* NUL-ended, in the list buffer */
        const void *value;
        size_t len;
        size_t val_off; /* private: value's offset while reading */
};

struct ferry_xattrs {
        struct ferry_xattr *v; /* n entries, sorted by name (strcmp) */
        size_t n;
        /* private */
        size_t cap;
        struct ferry_buf list;   /* the kernel's list of names */
        struct ferry_buf values; /* the values read, one after another */
        bool nosup;              /* the file system of nosup_dev has none */
        uint64_t nosup_dev;
};

/* What is kept (the options, and who runs): */
enum {
        FERRY_XA_XATTRS = 1,    /* xattrs but ACLs (--no-xattrs: not) */
        FERRY_XA_ACLS = 2,      /* POSIX ACLs (--no-acls: not) */
        FERRY_XA_USER_ONLY = 4, /* of the xattrs only user.*, as rsync -X
                                   as non-root: others need privileges */
        FERRY_XA_ALL = FERRY_XA_XATTRS | FERRY_XA_ACLS,
};

void ferry_xattrs_init(struct ferry_xattrs *xa);
void ferry_xattrs_release(struct ferry_xattrs *xa);

/* Whether name is kept: ACLs with FERRY_XA_ACLS, other names but
 * system.* with FERRY_XA_XATTRS (only user.* with FERRY_XA_USER_ONLY). */
bool ferry_xattr_kept(const char *name, unsigned keep);
/* Whether name is a POSIX ACL (system.posix_acl_access or _default). */
bool ferry_xattr_is_acl(const char *name);

/* Reads the kept attributes of the open entry fd (on device dev, from its
 * stat) into xa, replacing what was there. 0, or the errno of a list or
 * get that failed (a value that grew between list and get is read again;
 * ENOTSUP and ENODATA mean none). */
int ferry_xattrs_read_fd(struct ferry_xattrs *xa, int fd, uint64_t dev,
                         unsigned keep);
/* The same for entry name in directory dirfd, not followed: symlinks and
 * special files (FIFOs, sockets, devices). */
int ferry_xattrs_read_at(struct ferry_xattrs *xa, int dirfd, const char *name,
                         uint64_t dev, unsigned keep);

/* Index of name in xa, or -1. */
long ferry_xattrs_find(const struct ferry_xattrs *xa, const char *name);

/* XXH3-64 over the sorted pairs: for each, the name with its NUL, the
 * value's length as 8 bytes little-endian, the value, each hashed with
 * the digest so far as seed (starting from the digest of nothing). No
 * attributes give a fixed value. */
uint64_t ferry_xattrs_digest(const struct ferry_xattrs *xa);

#endif
