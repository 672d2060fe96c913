/*
 * buf.h - a growing string buffer, path joins and the one escaper of names
 * (in the manner of git's strbuf.h and curl's dynbuf).
 *
 * Calling sequence:
 *   struct ferry_buf b = FERRY_BUF_INIT;
 *   ferry_buf_adds(&b, dir);
 *   ferry_buf_add_path(&b, name);             // "dir/name"
 *   ferry_buf_add_quoted(&b, s, len, FERRY_ESC_QUOTE);
 *   if (b.oom) ...                            // one check at the end
 *   char *s = ferry_buf_detach(&b, NULL);     // caller frees; or
 *   ferry_buf_release(&b);
 *
 * b.buf is always a NUL-terminated string (an empty static one until the
 * first append), so it may be read at any time. An append that cannot get
 * memory returns ENOMEM, leaves what was there, and sets b.oom, which
 * stays set until release: a caller may append several times and look
 * once. Memory: the buffer owns b.buf; detach hands it to the caller.
 */
#ifndef FERRY_BUF_H
#define FERRY_BUF_H

#include "ferry.h" /* FERRY_ESC_*, ferry_escape */

#include <stdbool.h>
#include <stddef.h>

struct ferry_buf {
        char *buf;    /* NUL-terminated; ferry_buf_empty before growing */
        size_t len;   /* bytes before the NUL */
        size_t alloc; /* bytes allocated, 0 while buf is ferry_buf_empty */
        bool oom;     /* an append failed: the content is short */
};

extern char ferry_buf_empty[];
#define FERRY_BUF_INIT                                                         \
        {                                                                      \
                ferry_buf_empty, 0, 0, false                                   \
        }

void ferry_buf_init(struct ferry_buf *b);
/* Frees the memory and makes b empty again (as after init). */
void ferry_buf_release(struct ferry_buf *b);
/* Empties b, keeping its memory (and its oom). */
void ferry_buf_reset(struct ferry_buf *b);
/* Makes room for extra more bytes (and the NUL). 0 or ENOMEM. */
int ferry_buf_grow(struct ferry_buf *b, size_t extra);

/* Appends; each returns 0 or ENOMEM (then b.oom is set). */
int ferry_buf_add(struct ferry_buf *b, const void *data, size_t len);
int ferry_buf_adds(struct ferry_buf *b, const char *s);
int ferry_buf_addf(struct ferry_buf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* Appends name as a path component: a '/' first unless b is empty or
 * ends with one ("" + "a" is "a", "/" + "a" is "/a", "d" + "a" is "d/a"). */
int ferry_buf_add_path(struct ferry_buf *b, const char *name);
/* Appends s (len bytes, any bytes) escaped as flags say (ferry.h). */
int ferry_buf_add_quoted(struct ferry_buf *b, const char *s, size_t len,
                         unsigned flags);

/* Hands the string to the caller, who frees it; *len (may be NULL) gets
 * its length. b is empty again. NULL when b.oom (b is released). */
char *ferry_buf_detach(struct ferry_buf *b, size_t *len);
/* Copies b's string into out (size bytes), cut short when it does not
 * fit, and releases b. */
void ferry_buf_move_to(struct ferry_buf *b, char *out, size_t size);

/* dir joined with name as ferry_buf_add_path joins them; caller frees;
 * NULL when out of memory. */
char *ferry_buf_join(const char *dir, const char *name);

#endif
