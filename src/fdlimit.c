/*
 * fdlimit.c - the descriptor budget of a run (fdlimit.h).
 *
 * Owns nothing but the process's soft RLIMIT_NOFILE, which it raises once
 * per job: a default soft limit of 1024 (or 128 in some containers) is
 * meant for select(2) users, which ferry is not, and `ulimit -n` leaves
 * the hard limit for programs that need more. The fit is a pure function,
 * so tests/unit/test_fdlimit.c checks it without changing any limit.
 */
#define _GNU_SOURCE
#include "fdlimit.h"

#include "copy.h"
#include "coord.h"
#include "scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

unsigned long ferry_fdlimit_raise(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl))
                return 1024; /* cannot be: a guess that fits small runs */
        rlim_t want =
                rl.rlim_max == RLIM_INFINITY || rl.rlim_max > FERRY_FDLIMIT_CAP
                        ? FERRY_FDLIMIT_CAP
                        : rl.rlim_max;
        /* Linux refuses more than fs.nr_open even below the hard limit
         * (EPERM): then halve until it is taken, never below the soft */
        while (rl.rlim_cur != RLIM_INFINITY && want > rl.rlim_cur) {
                struct rlimit up = {want, rl.rlim_max};
                if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
                        rl.rlim_cur = want;
                        break;
                }
                want /= 2;
        }
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > FERRY_FDLIMIT_CAP)
                return FERRY_FDLIMIT_CAP;
        return (unsigned long)rl.rlim_cur;
}

unsigned long ferry_fdlimit_in_use(void)
{
        DIR *d = opendir("/proc/self/fd");
        if (d) {
                unsigned long n = 0;
                struct dirent *de;
                while ((de = readdir(d)))
                        n += de->d_name[0] != '.';
                closedir(d);
                return n ? n - 1 : 0; /* not the one reading it */
        }
        int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
                return 16; /* none free, or no descriptor 0: a guess */
        close(fd);
        return (unsigned long)fd;
}

static unsigned long need_of(unsigned long fixed, unsigned jobs,
                             unsigned scanners)
{
        return fixed + (unsigned long)jobs * FERRY_COPIER_FDS +
               (unsigned long)scanners * FERRY_SCAN_FDS;
}

void ferry_fdlimit_fit(unsigned long limit, unsigned long in_use, unsigned jobs,
                       unsigned scanners, struct ferry_fd_fit *out)
{
        memset(out, 0, sizeof(*out));
        jobs = jobs ? jobs : 1;
        scanners = scanners ? scanners : 1;
        unsigned long fixed = in_use + FERRY_COORD_FDS;
        out->need = need_of(fixed, jobs, scanners);
        out->jobs = jobs;
        out->scanners = scanners;
        if (out->need <= limit)
                return;
        out->reduced = true;
        for (unsigned k = jobs; k >= 1; k--) {
                unsigned s = (k + 1) / 2;
                s = s < scanners ? s : scanners;
                out->jobs = k;
                out->scanners = s;
                if (need_of(fixed, k, s) <= limit)
                        return;
        }
        out->tight = true; /* k and s are 1 */
}
