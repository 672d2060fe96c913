/*
 * control.c - the control file of a running job (control.h) and `ferry
 * set` (ferry_set in ferry.h), with the parsing of --bwlimit RATE and
 * --window HH:MM-HH:MM and the window's clock. The running job's side,
 * which polls the file and applies it, is coord/control.c.
 */
#define _GNU_SOURCE
#include "config.h"
#include "control.h"

#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "ferry-control 1\n"

char *ferry_control_path(const char *manifest)
{
        char *p = NULL;
        return asprintf(&p, "%s" FERRY_CONTROL_SUFFIX, manifest) < 0 ? NULL : p;
}

static int format(char *buf, size_t size, const struct ferry_control *c)
{
        return snprintf(buf, size,
                        MAGIC "pid %ld\nserial %llu\nbwlimit %llu\njobs %u\n"
                              "paused %d\nwindow %d %d\nend\n",
                        c->pid, (unsigned long long)c->serial,
                        (unsigned long long)c->bwlimit, c->jobs, c->paused,
                        c->window_start, c->window_end);
}

static int parse(const char *buf, struct ferry_control *c)
{
        unsigned long long serial, bw;
        int paused, n = 0;
        memset(c, 0, sizeof(*c));
        if (strncmp(buf, MAGIC, strlen(MAGIC)))
                return EAGAIN;
        if (sscanf(buf + strlen(MAGIC),
                   "pid %ld\nserial %llu\nbwlimit %llu\njobs %u\npaused "
                   "%d\nwindow %d %d\nend\n%n",
                   &c->pid, &serial, &bw, &c->jobs, &paused, &c->window_start,
                   &c->window_end, &n) != 7 ||
            !n)
                return EAGAIN;
        c->serial = serial;
        c->bwlimit = bw;
        c->paused = paused != 0;
        return 0;
}

/* The whole of fd's file into buf: 0 or an errno. */
static int read_fd(int fd, char *buf, size_t size)
{
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return errno;
        buf[n] = '\0';
        return 0;
}

static int write_fd(int fd, const struct ferry_control *c)
{
        char buf[512];
        int n = format(buf, sizeof(buf), c);
        if (n < 0 || (size_t)n >= sizeof(buf))
                return EOVERFLOW;
        ssize_t w = pwrite(fd, buf, (size_t)n, 0);
        if (w < 0)
                return errno;
        if (w != n)
                return EIO;
        return ftruncate(fd, n) ? errno : 0;
}

int ferry_control_write(const char *path, const struct ferry_control *c)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return errno;
        int rc = flock(fd, LOCK_EX) ? errno : write_fd(fd, c);
        close(fd); /* drops the flock */
        return rc;
}

int ferry_control_load(const char *path, struct ferry_control *c)
{
        char buf[512];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno;
        /* a shared lock, never waited for: a write under way is EAGAIN */
        int rc = flock(fd, LOCK_SH | LOCK_NB) ? EAGAIN
                                              : read_fd(fd, buf, sizeof(buf));
        close(fd);
        return rc ? rc : parse(buf, c);
}

void ferry_control_status(const char *manifest, struct ferry_status_info *info)
{
        char *path = ferry_control_path(manifest);
        struct ferry_control c;
        if (path && info->running_pid && !ferry_control_load(path, &c) &&
            (info->running_pid < 0 || c.pid == info->running_pid)) {
                info->has_control = true;
                info->control = c;
        }
        free(path);
}

/* ---- ferry set ---------------------------------------------------------- */

static void apply_req(struct ferry_control *c, const struct ferry_set_req *r)
{
        if (r->set_bwlimit)
                c->bwlimit = r->bwlimit;
        if (r->set_jobs)
                c->jobs = r->jobs;
        if (r->pause >= 0)
                c->paused = r->pause == 1;
        if (r->set_window) {
                c->window_start = r->window_start;
                c->window_end = r->window_end;
        }
        c->serial++;
}

/* Who runs the job of manifest path: its pid, -1 unknown, 0 nobody. */
static long holder(const char *manifest)
{
        char *lock = NULL;
        if (asprintf(&lock, "%s.lock", manifest) < 0)
                return 0;
        int fd = open(lock, O_RDONLY | O_CLOEXEC);
        free(lock);
        if (fd < 0)
                return 0;
        char host[256];
        long pid = ferry_job_lock_holder(fd, host, sizeof(host));
        close(fd);
        return pid;
}

/* Changes the control file at path of the run pid under its flock. */
static int set_file(const char *path, long pid, const struct ferry_set_req *req,
                    struct ferry_control *now, struct ferry_error *err)
{
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "the job is running but has no control "
                                      "file '%s' (it is starting, or is an "
                                      "older ferry): try again",
                                      path);
        if (fd < 0)
                return ferry_job_errf(err, FERRY_EPATH, "cannot open '%s': %s",
                                      path, strerror(errno));
        char buf[512];
        int rc = flock(fd, LOCK_EX) ? errno : read_fd(fd, buf, sizeof(buf));
        if (!rc)
                rc = parse(buf, now);
        if (!rc && pid > 0 && now->pid != pid)
                rc = ESRCH; /* left by an earlier run: this one starts */
        if (!rc) {
                apply_req(now, req);
                rc = write_fd(fd, now);
        }
        close(fd);
        if (rc == ESRCH || rc == EAGAIN)
                return ferry_job_errf(err, FERRY_EUSAGE,
                                      "the job is starting: try again in a "
                                      "moment");
        if (rc)
                return ferry_job_errf(err, FERRY_EPATH, "cannot write '%s': %s",
                                      path, strerror(rc));
        return 0;
}

int ferry_set(const char *manifest, const char *src, const char *dst,
              const struct ferry_set_req *req, struct ferry_control *now,
              struct ferry_error *err)
{
        char *path = NULL, *cpath = NULL;
        memset(now, 0, sizeof(*now));
        int rc = ferry_job_manifest_of(manifest, src, dst, &path, err);
        if (rc)
                return rc;
        long pid = holder(path);
        if (!pid)
                rc = ferry_job_errf(err, FERRY_EUSAGE,
                                    "no run of this job is going on "
                                    "(manifest '%s'): `ferry set` changes a "
                                    "running job; give --bwlimit or --window "
                                    "to the run itself",
                                    path);
        else if (!(cpath = ferry_control_path(path)))
                rc = ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        else
                rc = set_file(cpath, pid, req, now, err);
        free(cpath);
        free(path);
        return rc;
}

/* ---- parsing and the clock --------------------------------------------- */

int ferry_parse_rate(const char *s, uint64_t *out)
{
        if (!s || *s < '0' || *s > '9')
                return -1;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        double mult = 1;
        switch (*end) {
        case 'k':
        case 'K': mult = 1024.0; break;
        case 'm':
        case 'M': mult = 1024.0 * 1024; break;
        case 'g':
        case 'G': mult = 1024.0 * 1024 * 1024; break;
        case '\0': break;
        default: return -1;
        }
        if (*end && end[1])
                return -1;
        v *= mult;
        if (errno || v != v || v >= 1e18 || (v > 0 && v < 1024))
                return -1; /* 0, or at least 1K */
        *out = (uint64_t)v;
        return 0;
}

static bool digit(char c)
{
        return c >= '0' && c <= '9';
}

/* "H:MM" or "HH:MM" at s into minutes; the next byte into *end. */
static int parse_hhmm(const char *s, const char **end)
{
        int h = 0, i = 0;
        while (i < 2 && digit(s[i]))
                h = h * 10 + (s[i++] - '0');
        if (!i || s[i] != ':' || !digit(s[i + 1]) || !digit(s[i + 2]))
                return -1;
        int m = (s[i + 1] - '0') * 10 + (s[i + 2] - '0');
        if (h > 23 || m > 59)
                return -1;
        *end = s + i + 3;
        return h * 60 + m;
}

int ferry_parse_window(const char *s, int *start, int *end)
{
        const char *p;
        int a = parse_hhmm(s, &p);
        if (a < 0 || *p != '-')
                return -1;
        int b = parse_hhmm(p + 1, &p);
        if (b < 0 || *p || a == b)
                return -1;
        *start = a;
        *end = b;
        return 0;
}

bool ferry_window_inside(int start, int end, int now)
{
        if (start < 0 || end < 0)
                return true;
        return start < end ? now >= start && now < end
                           : now >= start || now < end;
}

int ferry_window_now(void)
{
#ifdef FERRY_TESTING
        const char *fake = getenv("FERRY_TEST_CLOCK");
        const char *end;
        int m = fake ? parse_hhmm(fake, &end) : -1;
        if (m >= 0 && !*end)
                return m;
#endif
        time_t t = time(NULL);
        struct tm tm;
        localtime_r(&t, &tm);
        return tm.tm_hour * 60 + tm.tm_min;
}
