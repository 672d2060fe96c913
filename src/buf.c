/*
 * buf.c - the growing string buffer of buf.h, and ferry_escape (ferry.h),
 * the one escaper of names: the library's messages, the command line's
 * paths and its JSON strings all go through esc() below.
 *
 * Growth doubles, from 64 bytes. The escaper writes into a sink that
 * counts what does not fit, so ferry_escape needs no memory and
 * ferry_buf_add_quoted measures first and writes once.
 */
#define _GNU_SOURCE
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char ferry_buf_empty[1];

void ferry_buf_init(struct ferry_buf *b)
{
        *b = (struct ferry_buf)FERRY_BUF_INIT;
}

void ferry_buf_release(struct ferry_buf *b)
{
        if (b->alloc)
                free(b->buf);
        ferry_buf_init(b);
}

void ferry_buf_reset(struct ferry_buf *b)
{
        b->len = 0;
        if (b->alloc) /* never a write to the shared ferry_buf_empty */
                b->buf[0] = '\0';
}

int ferry_buf_grow(struct ferry_buf *b, size_t extra)
{
        if (extra >= SIZE_MAX - b->len - 1) {
                b->oom = true;
                return ENOMEM;
        }
        size_t need = b->len + extra + 1;
        if (need <= b->alloc)
                return 0;
        size_t cap = b->alloc ? b->alloc : 64;
        while (cap < need)
                cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        char *p = realloc(b->alloc ? b->buf : NULL, cap);
        if (!p) {
                b->oom = true;
                return ENOMEM;
        }
        if (!b->alloc)
                p[0] = '\0';
        b->buf = p;
        b->alloc = cap;
        return 0;
}

int ferry_buf_add(struct ferry_buf *b, const void *data, size_t len)
{
        if (ferry_buf_grow(b, len))
                return ENOMEM;
        memcpy(b->buf + b->len, data, len);
        b->len += len;
        b->buf[b->len] = '\0';
        return 0;
}

int ferry_buf_adds(struct ferry_buf *b, const char *s)
{
        return ferry_buf_add(b, s, strlen(s));
}

int ferry_buf_addf(struct ferry_buf *b, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0 || ferry_buf_grow(b, (size_t)n)) {
                b->oom = true;
                return ENOMEM;
        }
        va_start(ap, fmt);
        vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
        return 0;
}

int ferry_buf_add_path(struct ferry_buf *b, const char *name)
{
        if (b->len && b->buf[b->len - 1] != '/' && ferry_buf_add(b, "/", 1))
                return ENOMEM;
        return ferry_buf_adds(b, name);
}

char *ferry_buf_detach(struct ferry_buf *b, size_t *len)
{
        if (b->oom || (!b->alloc && ferry_buf_grow(b, 0))) {
                ferry_buf_release(b);
                return NULL;
        }
        char *s = b->buf;
        if (len)
                *len = b->len;
        ferry_buf_init(b);
        return s;
}

void ferry_buf_move_to(struct ferry_buf *b, char *out, size_t size)
{
        if (size)
                snprintf(out, size, "%s", b->buf);
        ferry_buf_release(b);
}

char *ferry_buf_join(const char *dir, const char *name)
{
        struct ferry_buf b = FERRY_BUF_INIT;
        ferry_buf_adds(&b, dir);
        ferry_buf_add_path(&b, name);
        return ferry_buf_detach(&b, NULL);
}

/* ---- the escaper -------------------------------------------------------- */

/* Where esc() writes: out holds size bytes; n counts all, fitting or not. */
struct sink {
        char *out;
        size_t size;
        size_t n;
};

static void put(struct sink *k, const void *p, size_t len)
{
        if (k->n < k->size) {
                size_t room = k->size - k->n;
                memcpy(k->out + k->n, p, len < room ? len : room);
        }
        k->n += len;
}

/* A backslash, then ch itself (digits 0), or "x" and 2 hex digits, or "u"
 * and 4 (a JSON \u00HH). */
static void put_esc(struct sink *k, unsigned char ch, char kind, int digits)
{
        static const char hex[] = "0123456789abcdef";
        char tmp[8] = {'\\', digits ? kind : (char)ch};
        size_t n = 2;
        for (int i = digits - 1; i >= 0; i--)
                tmp[n++] = i < 2 ? hex[(ch >> (4 * i)) & 0xf] : '0';
        put(k, tmp, n);
}

/* Length of the valid UTF-8 sequence at s (left bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
        /* well-formed UTF-8 only (RFC 3629): no overlong forms, no
         * surrogates, nothing above U+10FFFF */
        size_t n;
        unsigned char lo = 0x80, hi = 0xbf;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                n = 2;
        else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                n = 3;
                if (s[0] == 0xe0)
                        lo = 0xa0;
                else if (s[0] == 0xed)
                        hi = 0x9f;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                n = 4;
                if (s[0] == 0xf0)
                        lo = 0x90;
                else if (s[0] == 0xf4)
                        hi = 0x8f;
        } else
                return 0;
        if (n > left || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

/* One byte that is not part of valid UTF-8 (or any byte, for messages). */
static void esc_byte(struct sink *k, unsigned char ch, unsigned flags)
{
        bool term = flags & FERRY_ESC_TERMINAL;
        if (flags & FERRY_ESC_JSON) {
                if (ch == '"' || ch == '\\')
                        put_esc(k, ch, 0, 0);
                else if (ch < 0x20 || ch >= 0x7f)
                        /* invalid UTF-8 bytes become U+00XX: lossy but
                         * valid */
                        put_esc(k, ch, 'u', 4);
                else
                        put(k, &ch, 1);
        } else if (term && ch == '\n') {
                put(k, "\\n", 2);
        } else if (term && ch == '\t') {
                put(k, "\\t", 2);
        } else if (ch == '\\' || ((flags & FERRY_ESC_QUOTE) && ch == '\'')) {
                put_esc(k, ch, 0, 0);
        } else if (ch < 0x20 || ch == 0x7f || (term && ch > 0x7f)) {
                put_esc(k, ch, 'x', 2);
        } else {
                put(k, &ch, 1);
        }
}

static void esc(struct sink *k, const char *str, size_t len, unsigned flags)
{
        const unsigned char *s = (const unsigned char *)str;
        bool json = flags & FERRY_ESC_JSON;
        bool quote = !json && (flags & FERRY_ESC_QUOTE);
        bool utf8 = json || (flags & FERRY_ESC_TERMINAL);
        if (json || quote)
                put(k, json ? "\"" : "'", 1);
        for (size_t i = 0; i < len;) {
                size_t u = utf8 && s[i] >= 0x80 ? utf8_len(s + i, len - i) : 0;
                if (u) {
                        put(k, s + i, u);
                        i += u;
                        continue;
                }
                esc_byte(k, s[i++], flags);
        }
        if (json || quote)
                put(k, json ? "\"" : "'", 1);
}

size_t ferry_escape(char *out, size_t size, const char *s, size_t len,
                    unsigned flags)
{
        struct sink k = {out, size ? size - 1 : 0, 0};
        esc(&k, s, len, flags);
        if (size)
                out[k.n < size ? k.n : size - 1] = '\0';
        return k.n;
}

int ferry_buf_add_quoted(struct ferry_buf *b, const char *s, size_t len,
                         unsigned flags)
{
        struct sink k = {NULL, 0, 0};
        esc(&k, s, len, flags);
        if (ferry_buf_grow(b, k.n))
                return ENOMEM;
        k = (struct sink){b->buf + b->len, k.n, 0};
        esc(&k, s, len, flags);
        b->len += k.n;
        b->buf[b->len] = '\0';
        return 0;
}
