/*
 * fsio_impl.h - what the files of fsio (fsio.c, fsio_open.c, fsio_fault.c)
 * share; private to them. The interface is fsio.h.
 */
#ifndef FERRY_FSIO_IMPL_H
#define FERRY_FSIO_IMPL_H

#include "fsio.h"

/* First thing in a wrapper: return the injected errno, if any. */
#define FAULT(op)                                                              \
        do {                                                                   \
                int fault_ = ferry_fsio_fault(op);                             \
                if (fault_)                                                    \
                        return fault_;                                         \
        } while (0)

/* Test builds with FERRY_FAULT_LOG: appends "what call err" to the log;
 * nothing otherwise. */
void ferry_fsio_log(const char *what, long call, int err);
/* Test builds: FERRY_FD_WAIT_MS when it is set; else -1. */
long ferry_fsio_fd_wait_test_ms(void);

#endif
