/*
 * job_lock.c - the job lock, one run per manifest (rule 6), and its holder
 * (job.h).
 *
 * The lock is an open-file-description lock (F_OFD_SETLK) on
 * "<manifest>.lock", which holds the owner's pid. F_OFD_GETLK tells whether
 * someone holds it without taking it, so `ferry status` can see a run going
 * on without disturbing it; unlike classic POSIX locks, closing another
 * descriptor of the file in the same process does not drop it. The kernel
 * drops it when the holder dies, so a lock left by a killed run is free;
 * the pid in the file only names the holder. A held lock whose file names
 * no live process is still held: its holder is reported as unknown, never
 * as a made-up pid.
 */
#define _GNU_SOURCE
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* This host's name into host (size > 0), "" when it has none. */
static void this_host(char *host, size_t size)
{
        if (gethostname(host, size))
                host[0] = '\0';
        host[size - 1] = '\0';
}

/* The pid and host the lock file at fd names (host "" when it names
 * none, as an older ferry wrote it); the pid 0 when it names none. */
static long named_holder(int fd, char *host, size_t size)
{
        char buf[320] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        char *end = buf;
        long pid = strtol(buf, &end, 10);
        host[0] = '\0';
        if (*end == ' ') {
                size_t len = strcspn(end + 1, "\n");
                snprintf(host, size, "%.*s", (int)len, end + 1);
        }
        return pid > 0 ? pid : 0;
}

long ferry_job_lock_holder(int fd, char *host, size_t size)
{
        char me[256];
        host[0] = '\0';
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_OFD_GETLK, &fl) || fl.l_type == F_UNLCK)
                return 0;
        this_host(me, sizeof(me));
        /* the holder writes its pid just after taking the lock: until then
         * the file is empty or names an earlier, dead run */
        for (int tries = 0; tries < 50; tries++) {
                long pid = named_holder(fd, host, size);
                /* a pid of another host cannot be looked at from here */
                bool other = host[0] && strcmp(host, me);
                if (pid > 0 &&
                    (other || kill((pid_t)pid, 0) == 0 || errno == EPERM))
                        return pid;
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        host[0] = '\0';
        return FERRY_LOCK_HOLDER_UNKNOWN;
}

/* The refusal when the lock is taken: the holder named, or said unknown. */
static int held(long pid, const char *host, const char *lock_path,
                const char *manifest_path, struct ferry_error *err)
{
        char me[256];
        this_host(me, sizeof(me));
        if (pid > 0 && host[0] && strcmp(host, me))
                return ferry_job_errf(err, FERRY_ELOCKED,
                                      "job is already running in process %ld "
                                      "on host %s (manifest '%s')",
                                      pid, host, manifest_path);
        if (pid > 0)
                return ferry_job_errf(err, FERRY_ELOCKED,
                                      "job is already running in process %ld "
                                      "(manifest '%s')",
                                      pid, manifest_path);
        return ferry_job_errf(err, FERRY_ELOCKED,
                              "job is already running in a process that "
                              "cannot be named: its lock '%s' is held but "
                              "names no live process (a run in another PID "
                              "namespace or on another host?) (manifest "
                              "'%s')",
                              lock_path, manifest_path);
}

/* Opens the lock file with the manifest's permissions (as SQLite gives
 * them to the -wal and -shm), so that whoever may read the manifest sees
 * from the lock whether a run goes on; for a new manifest that is SQLite's
 * 0644 less the umask. */
static int open_lock(const char *manifest_path, const char *lock_path,
                     bool verify, int *lockfd, bool *fix, mode_t *mode_out,
                     struct ferry_error *err)
{
        struct stat st;
        bool exists = stat(manifest_path, &st) == 0;
        mode_t mode = exists ? st.st_mode & 0666 : 0644;
        *mode_out = mode;
        *lockfd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
        if (*lockfd < 0 && verify &&
            (errno == EACCES || errno == EPERM || errno == EROFS))
                return ferry_job_errf(err, FERRY_EMANIFEST,
                                      "--verify needs write access to the "
                                      "manifest (it marks the files it finds "
                                      "missing or changed): cannot open lock "
                                      "'%s': %s",
                                      lock_path, strerror(errno));
        if (*lockfd < 0)
                return ferry_job_errf(err, FERRY_EMANIFEST,
                                      "cannot open lock '%s': %s", lock_path,
                                      strerror(errno));
        /* a lock made before its manifest had other permissions (or by
         * an older ferry, 0600) is brought in line by its owner, once it
         * holds the lock */
        *fix = exists && !fstat(*lockfd, &st) && st.st_uid == geteuid() &&
               (st.st_mode & 07777) != mode;
        return 0;
}

int ferry_job_lock_take(const char *manifest_path, bool verify, int *lockfd,
                        char **lock_path, struct ferry_error *err)
{
        if (asprintf(lock_path, "%s.lock", manifest_path) < 0) {
                *lock_path = NULL;
                return ferry_job_errf(err, FERRY_EINTERNAL, "out of memory");
        }
        bool fix = false;
        mode_t mode = 0;
        int rc = open_lock(manifest_path, *lock_path, verify, lockfd, &fix,
                           &mode, err);
        if (rc)
                return rc;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        /* a run that ends between the try and the look leaves the lock
         * free: try again, a few times */
        for (int tries = 1; fcntl(*lockfd, F_OFD_SETLK, &fl); tries++) {
                if (errno != EAGAIN && errno != EACCES)
                        return ferry_job_errf(err, FERRY_EMANIFEST,
                                              "cannot lock '%s': %s",
                                              *lock_path, strerror(errno));
                char host[256];
                long pid = ferry_job_lock_holder(*lockfd, host, sizeof(host));
                if (pid || tries == 3)
                        return held(pid, host, *lock_path, manifest_path, err);
        }
        if (fix)
                (void)fchmod(*lockfd, mode);
        char buf[320], host[256];
        this_host(host, sizeof(host));
        int n = snprintf(buf, sizeof(buf), "%ld %s\n", (long)getpid(), host);
        if (ftruncate(*lockfd, 0) == 0 &&
            pwrite(*lockfd, buf, (size_t)n, 0) != n)
                return ferry_job_errf(err, FERRY_EMANIFEST,
                                      "cannot write lock '%s'", *lock_path);
        return 0;
}
