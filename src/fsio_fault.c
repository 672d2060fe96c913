/*
 * fsio_fault.c - the test hooks of fsio: the fault table, the fault log
 * and the crash points described in src/fsio.h.
 *
 * In a test build (FERRY_TESTING) FERRY_FAULT, FERRY_FAULT_LOG, FERRY_CRASH
 * and FERRY_FD_WAIT_MS are read once, on first use; each wrapper in fsio.c
 * and fsio_open.c asks ferry_fsio_fault first (FAULT, fsio_impl.h). In
 * other builds every hook says "no fault" and the crash points do nothing.
 */
#define _GNU_SOURCE
#include "config.h"
#include "ferry.h"
#include "fsio.h"
#include "fsio_impl.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FERRY_TESTING
#define MAX_FAULTS 16

struct fault {
        int op;
        long nth; /* 0 = every call */
        int err;
};

static const char *const op_names[FSIO_NOPS] = {
        "open",    "read",  "write",   "fsync", "syncfs",  "rename", "mkdir",
        "utimens", "chmod", "chown",   "link",  "symlink", "stat",   "unlink",
        "mwrite",  "msync", "readdir", "probe", "rmdir",   "seek",   "xattr",
};

static struct fault faults[MAX_FAULTS];
static int n_faults;
static atomic_long op_calls[FSIO_NOPS];
static char crash_point[64];
static long crash_nth;
static atomic_long crash_calls;
static pthread_once_t faults_once = PTHREAD_ONCE_INIT;
static long fd_wait_test_ms = -1; /* FERRY_FD_WAIT_MS, -1: not set */

static int op_by_name(const char *name, size_t len)
{
        for (int i = 0; i < FSIO_NOPS; i++)
                if (strlen(op_names[i]) == len &&
                    !memcmp(op_names[i], name, len))
                        return i;
        return -1;
}

static void parse_fault(const char *spec, size_t len)
{
        char buf[128];
        if (len >= sizeof(buf) || n_faults == MAX_FAULTS)
                return;
        memcpy(buf, spec, len);
        buf[len] = '\0';
        char *c1 = strchr(buf, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
                return;
        int op = op_by_name(buf, (size_t)(c1 - buf));
        if (op < 0)
                return;
        faults[n_faults].op = op;
        faults[n_faults].nth = strtol(c1 + 1, NULL, 10);
        faults[n_faults].err = (int)strtol(c2 + 1, NULL, 10);
        n_faults++;
}

static void load_faults(void)
{
        const char *spec = getenv("FERRY_FAULT");
        while (spec && *spec) {
                size_t len = strcspn(spec, ",");
                parse_fault(spec, len);
                spec += len + (spec[len] == ',');
        }
        const char *crash = getenv("FERRY_CRASH");
        if (crash) {
                const char *colon = strchr(crash, ':');
                size_t len = colon ? (size_t)(colon - crash) : strlen(crash);
                if (len < sizeof(crash_point)) {
                        memcpy(crash_point, crash, len);
                        crash_point[len] = '\0';
                        crash_nth = colon ? strtol(colon + 1, NULL, 10) : 1;
                }
        }
        const char *wait = getenv("FERRY_FD_WAIT_MS"); /* t34: a short wait */
        if (wait)
                fd_wait_test_ms = strtol(wait, NULL, 10);
}

/* FERRY_FAULT_LOG=FILE: each injected fault appends "op call errno" to
 * FILE, so a test tells a fault that fired from one never reached; a call
 * that waits for a descriptor appends "fdwait N errno" (N: the waits so
 * far), so a test sees whether the descriptor budget held. */
static void log_line(const char *what, long call, int err)
{
        const char *path = getenv("FERRY_FAULT_LOG");
        if (!path)
                return;
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        char line[64];
        int n = snprintf(line, sizeof(line), "%s %ld %d\n", what, call, err);
        if (n > 0 && write(fd, line, (size_t)n) < 0) {
                /* a test that reads the log will find the line missing */
        }
        close(fd);
}

/* Returns the errno to inject for this call of op, or 0. */
static int injected(enum ferry_fsio_op op)
{
        pthread_once(&faults_once, load_faults);
        if (!n_faults)
                return 0;
        long call = atomic_fetch_add(&op_calls[op], 1) + 1;
        for (int i = 0; i < n_faults; i++)
                if (faults[i].op == (int)op &&
                    (faults[i].nth == 0 || faults[i].nth == call)) {
                        log_line(op_names[op], call, faults[i].err);
                        return faults[i].err;
                }
        return 0;
}

bool ferry_fsio_faults_on(enum ferry_fsio_op op)
{
        pthread_once(&faults_once, load_faults);
        for (int i = 0; i < n_faults; i++)
                if (faults[i].op == (int)op)
                        return true;
        return false;
}

void ferry_fsio_log(const char *what, long call, int err)
{
        log_line(what, call, err);
}

long ferry_fsio_fd_wait_test_ms(void)
{
        pthread_once(&faults_once, load_faults);
        return fd_wait_test_ms;
}

void ferry_fsio_crashpoint(const char *point)
{
        pthread_once(&faults_once, load_faults);
        if (!crash_point[0] || strcmp(point, crash_point) != 0)
                return;
        if (atomic_fetch_add(&crash_calls, 1) + 1 == crash_nth)
                _exit(86);
}
#else
static int injected(enum ferry_fsio_op op)
{
        (void)op;
        return 0;
}

void ferry_fsio_log(const char *what, long call, int err)
{
        (void)what;
        (void)call;
        (void)err;
}

long ferry_fsio_fd_wait_test_ms(void)
{
        return -1;
}

void ferry_fsio_crashpoint(const char *point)
{
        (void)point;
}

bool ferry_fsio_faults_on(enum ferry_fsio_op op)
{
        (void)op;
        return false;
}
#endif

bool ferry_test_hooks_built(void)
{
#ifdef FERRY_TESTING
        return true;
#else
        return false;
#endif
}

int ferry_fsio_fault(enum ferry_fsio_op op)
{
        return injected(op);
}
