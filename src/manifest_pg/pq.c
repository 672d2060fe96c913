/*
 * manifest_pg/pq.c - loads libpq at its first use (pq.h says why).
 */
#define _GNU_SOURCE
#define FERRY_PQ_IMPL
#include "config.h"
#include "manifest_pg/pq.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ferry_pq_api ferry_pq;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[256];

static void load(void)
{
        const char *name = FERRY_PQ_LIBRARY;
#ifdef FERRY_TESTING
        /* t76: a machine without libpq */
        const char *t = getenv("FERRY_TEST_LIBPQ");
        if (t && *t)
                name = t;
#endif
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                snprintf(load_err, sizeof(load_err),
                         "a PostgreSQL manifest needs libpq (Debian's "
                         "libpq5): %s",
                         e ? e : "cannot load it");
                return;
        }
        /* never closed: the table points into it for the process's life */
#define FERRY_PQ_SYM(f)                                                        \
        if (!load_err[0] && !(*(void **)&ferry_pq.f = dlsym(h, #f)))           \
                snprintf(load_err, sizeof(load_err),                           \
                         FERRY_PQ_LIBRARY " has no %s", #f);
        FERRY_PQ_FUNCS(FERRY_PQ_SYM)
#undef FERRY_PQ_SYM
}

int ferry_pq_load(char *err, size_t size)
{
        pthread_once(&once, load);
        if (!load_err[0])
                return 0;
        snprintf(err, size, "%s", load_err);
        return -1;
}
