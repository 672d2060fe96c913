/* thread.c - see thread.h */
#define _GNU_SOURCE
#include "thread.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

int ferry_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
        /* 10 ms, doubling to 320 ms: 20 tries, about 2.2 s in all */
        long wait_ms = 10;
        int rc;
        for (unsigned attempt = 0;; attempt++) {
                rc = pthread_create(t, NULL, fn, arg);
                if (rc != EAGAIN || attempt == 19)
                        return rc;
                struct timespec ts = {0, wait_ms * 1000000L};
                nanosleep(&ts, NULL);
                if (wait_ms < 320)
                        wait_ms *= 2;
        }
}

void ferry_thread_quiet(void)
{
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
}
