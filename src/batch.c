/*
 * batch.c - constructors of the inter-thread messages (batch.h).
 * Strings live in a growable arena addressed by offsets, so a message stays
 * one owner and a batch can grow without invalidating its items.
 */
#include "batch.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int arena_put(char **arena, size_t *len, size_t *cap, const void *s,
                     size_t n, uint32_t *off)
{
        if (*len + n + 1 > *cap) {
                size_t ncap = *cap ? *cap : 1024;
                while (ncap < *len + n + 1)
                        ncap *= 2;
                if (ncap > UINT32_MAX)
                        return ENOMEM;
                char *p = realloc(*arena, ncap);
                if (!p)
                        return ENOMEM;
                *arena = p;
                *cap = ncap;
        }
        memcpy(*arena + *len, s, n);
        (*arena)[*len + n] = '\0';
        *off = (uint32_t)*len;
        *len += n + 1;
        return 0;
}

struct ferry_listing *ferry_listing_new(const char *path, size_t len,
                                        size_t cap)
{
        struct ferry_listing *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        l->msg.kind = MSG_LISTING;
        l->entries = malloc(cap * sizeof(*l->entries));
        l->path = malloc(len + 1);
        if (!l->entries || !l->path) {
                ferry_listing_free(l);
                return NULL;
        }
        memcpy(l->path, path, len);
        l->path[len] = '\0';
        l->path_len = len;
        l->cap = cap;
        return l;
}

void ferry_listing_free(struct ferry_listing *l)
{
        if (!l)
                return;
        free(l->entries);
        free(l->path);
        free(l->arena);
        free(l);
}

int ferry_listing_add(struct ferry_listing *l, const char *name, size_t len,
                      const struct ferry_stat *st)
{
        if (l->n == l->cap)
                return ENOBUFS;
        struct ferry_entry *e = &l->entries[l->n];
        int rc = arena_put(&l->arena, &l->arena_len, &l->arena_cap, name, len,
                           &e->name_off);
        if (rc)
                return rc;
        e->name_len = (uint32_t)len;
        e->st = *st;
        l->n++;
        return 0;
}

struct ferry_batch *ferry_batch_new(int work, size_t cap)
{
        struct ferry_batch *b = calloc(1, sizeof(*b));
        if (!b)
                return NULL;
        b->msg.kind = MSG_BATCH;
        b->work = work;
        b->given_back = SIZE_MAX; /* none, whatever n becomes */
        b->items = calloc(cap, sizeof(*b->items));
        if (!b->items) {
                free(b);
                return NULL;
        }
        b->cap = cap;
        /* offset 0 is the empty string, so 0 can mean "none" */
        uint32_t off;
        if (arena_put(&b->arena, &b->arena_len, &b->arena_cap, "", 0, &off)) {
                ferry_batch_free(b);
                return NULL;
        }
        return b;
}

void ferry_batch_free(struct ferry_batch *b)
{
        if (!b)
                return;
        free(b->items);
        free(b->arena);
        free(b);
}

int ferry_batch_str(struct ferry_batch *b, const void *s, size_t len,
                    uint32_t *off)
{
        return arena_put(&b->arena, &b->arena_len, &b->arena_cap, s, len, off);
}

int ferry_batch_reserve(struct ferry_batch *b, size_t len, uint32_t *off)
{
        /* the block starts at a multiple of 8 (realloc's memory is aligned
         * at least so); arena_put adds one byte, which ends it */
        size_t start = (b->arena_len + 7) & ~(size_t)7;
        size_t n = start - b->arena_len + len;
        uint32_t at;
        char *zero = calloc(1, n ? n : 1);
        if (!zero)
                return ENOMEM;
        int rc = arena_put(&b->arena, &b->arena_len, &b->arena_cap, zero, n,
                           &at);
        free(zero);
        if (rc)
                return rc;
        *off = (uint32_t)start;
        return 0;
}
