/*
 * slowfs - a read-only FUSE passthrough file system that adds a fixed
 * latency to every round trip, standing in for a CIFS/NFS share in
 * ferry's benchmarks.
 *
 *   slowfs [--latency-us N] [--latency-file FILE] [--threads N]
 *          [--max-background N] [--writable] [--stats-file FILE]
 *          SOURCE_DIR MOUNTPOINT [-f] [-d] [-s]
 *          [-o OPTIONS]
 *
 * Every lookup/getattr, readlink, opendir, readdir, open, read and release
 * sleeps N microseconds (default 1000) in the FUSE worker thread before it
 * touches SOURCE_DIR. The point is to measure how a copy tool copes with
 * per-file latency, so slowfs itself must not be the bottleneck: the
 * multi-threaded loop may run up to --threads (default 256) requests at
 * once, and init raises the kernel's max_background and
 * congestion_threshold so that many reads and releases can be in flight.
 *
 * With --writable it is a read-write passthrough instead (a destination
 * with latency, for the end-of-run tree work of bench scenario `tail`):
 * mkdir, rmdir, unlink, create, write, rename, link, symlink, chmod,
 * chown, truncate, utimens, fsync and fsyncdir sleep N microseconds too.
 *
 * With --latency-file FILE, slowfs reads FILE (a decimal number of
 * microseconds) at the start and again about every 100 ms, and uses what
 * it holds from then on: a bench changes the latency of a mounted share
 * mid-run by writing the file (write a temp and rename it over, or accept
 * that a half-written number is skipped). A missing or unreadable FILE
 * keeps the latency there was.
 *
 * With --stats-file FILE, slowfs counts what it serves (opens, reads and
 * the bytes they return, getattrs, readdirs, writes and their bytes,
 * fsyncs) and rewrites FILE (a temp file renamed over it, so a reader
 * never sees half of it) about every 100 ms while they change, at once
 * on SIGUSR1, and a last time with "final 1" when it is unmounted. FILE
 * holds one "NAME VALUE" line per counter, after "pid", "seq" (bumped
 * by each rewrite) and "final"; see bench/README.md for how a test reads
 * exact totals.
 *
 * The --writable operations are in slowfs_rw.c, the writing of
 * --stats-file in slowfs_stats.c, what they share in slowfs.h. Lookups
 * and readdirs of one directory run in parallel, as on a share's client
 * (slowfs_init.c works around libfuse before 3.17.1 not asking for it).
 *
 * Inode numbers are passed through (use_ino), so tools still see hardlinks.
 * Attributes and entries are cached for 1 s, as CIFS does by default; pass
 * -o attr_timeout=0,entry_timeout=0 for a share without attribute caching.
 * Without -f it daemonizes once the mount is in place; unmount with
 * `fusermount3 -u MOUNTPOINT`.
 */
#define _GNU_SOURCE

#include "slowfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* FILE's number of microseconds into fs; a missing file, or one that
 * does not hold just a number (being written), changes nothing. */
static void read_latency_file(struct slowfs *fs)
{
        char buf[64];
        int fd = open(fs->latency_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        buf[n] = '\0';
        char *end;
        errno = 0;
        unsigned long long us = strtoull(buf, &end, 10);
        while (*end == '\n' || *end == ' ' || *end == '\t')
                end++;
        if (errno || end == buf || *end || buf[0] == '-' || us > 60000000)
                return;
        atomic_store(&fs->latency_ns, (long long)us * 1000);
}

static void *latency_reader(void *arg)
{
        struct slowfs *fs = arg;
        for (;;) {
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
                read_latency_file(fs);
        }
        return NULL;
}

/* Unmounted: --stats-file's last rewrite. */
static void sf_destroy(void *private_data)
{
        struct slowfs *fs = private_data;
        if (fs->stats_file)
                slowfs_stats_final(fs);
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
        struct slowfs *fs = slowfs_fs();
        /* here, after the daemon's fork: the threads are the daemon's */
        pthread_t t;
        if (fs->latency_file &&
            pthread_create(&t, NULL, latency_reader, fs) == 0)
                pthread_detach(t);
        if (fs->stats_file)
                slowfs_stats_start(fs);
        cfg->use_ino = 1;
        conn->max_background = fs->max_background;
        conn->congestion_threshold = fs->max_background * 3 / 4;
        return fs;
}

static int sf_getattr(const char *path, struct stat *st,
                      struct fuse_file_info *fi)
{
        slowfs_delay();
        slowfs_count(ST_GETATTRS, 1);
        int rc = fi ? fstat((int)fi->fh, st)
                    : fstatat(slowfs_fs()->src, slowfs_rel(path), st,
                              AT_SYMLINK_NOFOLLOW);
        return rc < 0 ? -errno : 0;
}

static int sf_readlink(const char *path, char *buf, size_t size)
{
        slowfs_delay();
        ssize_t n =
                readlinkat(slowfs_fs()->src, slowfs_rel(path), buf, size - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return 0;
}

static int sf_opendir(const char *path, struct fuse_file_info *fi)
{
        slowfs_delay();
        int fd = openat(slowfs_fs()->src, slowfs_rel(path),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *dp = fd < 0 ? NULL : fdopendir(fd);
        if (!dp) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                return -err;
        }
        fi->fh = (uint64_t)(uintptr_t)dp;
        return 0;
}

/* Fills the whole directory in one call (libfuse serves it in chunks). */
static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
                      off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags)
{
        DIR *dp = (DIR *)(uintptr_t)fi->fh;
        struct dirent *e;
        slowfs_delay();
        slowfs_count(ST_READDIRS, 1);
        rewinddir(dp);
        errno = 0;
        while ((e = readdir(dp)) != NULL) {
                struct stat st = {0};
                st.st_ino = e->d_ino;
                st.st_mode = (mode_t)DTTOIF(e->d_type);
                if (filler(buf, e->d_name, &st, 0, 0))
                        return 0;
        }
        return -errno;
}

static int sf_releasedir(const char *path, struct fuse_file_info *fi)
{
        closedir((DIR *)(uintptr_t)fi->fh);
        return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
        slowfs_delay();
        if ((fi->flags & O_ACCMODE) != O_RDONLY && !slowfs_fs()->writable)
                return -EROFS;
        int fd = openat(slowfs_fs()->src, slowfs_rel(path),
                        (fi->flags & (O_ACCMODE | O_APPEND | O_TRUNC)) |
                                O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        slowfs_count(ST_OPENS, 1);
        fi->fh = (uint64_t)fd;
        return 0;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
        size_t done = 0;
        slowfs_delay();
        while (done < size) {
                ssize_t n = pread((int)fi->fh, buf + done, size - done,
                                  off + (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        slowfs_count(ST_READS, 1);
        slowfs_count(ST_READ_BYTES, done);
        return (int)done;
}

static int sf_release(const char *path, struct fuse_file_info *fi)
{
        slowfs_delay();
        close((int)fi->fh);
        return 0;
}

static int sf_statfs(const char *path, struct statvfs *sv)
{
        return fstatvfs(slowfs_fs()->src, sv) < 0 ? -errno : 0;
}

static const struct fuse_operations slowfs_ops = {
        .init = sf_init,
        .destroy = sf_destroy,
        .getattr = sf_getattr,
        .readlink = sf_readlink,
        .opendir = sf_opendir,
        .readdir = sf_readdir,
        .releasedir = sf_releasedir,
        .open = sf_open,
        .read = sf_read,
        .release = sf_release,
        .statfs = sf_statfs,
};

static void usage(FILE *f)
{
        fputs("usage: slowfs [--latency-us N] [--latency-file FILE] "
              "[--threads N]\n"
              "              [--max-background N] [--writable] "
              "[--stats-file FILE]\n"
              "              SOURCE_DIR MOUNTPOINT [-f] [-d] [-s] [-o "
              "OPTIONS]\n"
              "defaults: --latency-us 1000 --threads 256 --max-background "
              "256\n",
              f);
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = s ? strtoul(s, &end, 10) : 0;
        if (!s || errno || end == s || *end || s[0] == '-' || v > max)
                return -1;
        *out = (unsigned)v;
        return 0;
}

/* PATH made absolute (the daemon runs in /), in memory that lives as long
 * as slowfs; NULL for no PATH or no memory. */
static const char *absolute(const char *path)
{
        char cwd[PATH_MAX];
        if (!path || path[0] == '/')
                return path;
        if (!getcwd(cwd, sizeof(cwd)))
                return NULL;
        size_t n = strlen(cwd) + strlen(path) + 2;
        char *out = malloc(n);
        if (out)
                snprintf(out, n, "%s/%s", cwd, path);
        return out;
}

/* Takes slowfs' own options and SOURCE_DIR out of argv; the rest (the
 * mountpoint and FUSE options) go to args. Returns 1 for --help. */
static int parse_args(int argc, char **argv, struct slowfs *fs,
                      const char **source, struct fuse_args *args)
{
        unsigned us = 1000;
        int rc = fuse_opt_add_arg(args, argv[0]);
        for (int i = 1; rc == 0 && i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
                        return 1;
                if (strcmp(a, "--writable") == 0)
                        fs->writable = true;
                else if (strcmp(a, "--latency-us") == 0)
                        rc = parse_uint(argv[++i < argc ? i : 0], 60000000,
                                        &us);
                else if (strcmp(a, "--latency-file") == 0)
                        rc = (fs->latency_file =
                                      absolute(argv[++i < argc ? i : 0]))
                                     ? 0
                                     : -1;
                else if (strcmp(a, "--stats-file") == 0)
                        rc = (fs->stats_file =
                                      absolute(argv[++i < argc ? i : 0]))
                                     ? 0
                                     : -1;
                else if (strcmp(a, "--threads") == 0)
                        rc = parse_uint(argv[++i < argc ? i : 0], 100000,
                                        &fs->threads);
                else if (strcmp(a, "--max-background") == 0)
                        rc = parse_uint(argv[++i < argc ? i : 0], 65535,
                                        &fs->max_background);
                else if (a[0] != '-' && !*source)
                        *source = a;
                else if (strcmp(a, "-o") == 0 && i + 1 < argc)
                        rc = fuse_opt_add_arg(args, a) ||
                             fuse_opt_add_arg(args, argv[++i]);
                else
                        rc = fuse_opt_add_arg(args, a);
        }
        atomic_store(&fs->latency_ns, (long long)us * 1000);
        if (fs->latency_file)
                read_latency_file(fs); /* it wins over --latency-us */
        if (rc == 0 && !*source)
                rc = -1;
        return rc == 0 ? 0 : -1;
}

static int add_default_options(struct fuse_args *args, bool writable)
{
        if (fuse_opt_add_arg(args, writable ? "-odefault_permissions,"
                                              "fsname=slowfs,subtype=slowfs"
                                            : "-oro,default_permissions,"
                                              "fsname=slowfs,subtype=slowfs"))
                return -1;
        return geteuid() == 0 ? fuse_opt_add_arg(args, "-oallow_other") : 0;
}

static int run_loop(struct fuse *f, const struct slowfs *fs, int single)
{
        if (single)
                return fuse_loop(f);
        struct fuse_loop_config *cfg = fuse_loop_cfg_create();
        if (!cfg)
                return -1;
        fuse_loop_cfg_set_max_threads(cfg, fs->threads);
        fuse_loop_cfg_set_idle_threads(cfg, fs->threads);
        int rc = fuse_loop_mt(f, cfg);
        fuse_loop_cfg_destroy(cfg);
        return rc;
}

static int serve(struct fuse_args *args, struct slowfs *fs)
{
        struct fuse_cmdline_opts opts = {0};
        struct fuse *f = NULL;
        int rc = 1;
        if (fuse_parse_cmdline(args, &opts) != 0 || !opts.mountpoint) {
                usage(stderr);
                goto out;
        }
        struct fuse_operations ops = slowfs_ops;
        if (fs->writable)
                slowfs_add_rw_ops(&ops);
        f = fuse_new(args, &ops, sizeof(ops), fs);
        if (!f)
                goto out;
        if (fuse_mount(f, opts.mountpoint) != 0)
                goto out;
        if (slowfs_parallel_dirops(f) != 0) {
                fuse_unmount(f);
                goto out;
        }
        if (fuse_daemonize(opts.foreground) == 0 &&
            fuse_set_signal_handlers(fuse_get_session(f)) == 0) {
                rc = run_loop(f, fs, opts.singlethread) == 0 ? 0 : 1;
                fuse_remove_signal_handlers(fuse_get_session(f));
        }
        fuse_unmount(f);
out:
        if (f)
                fuse_destroy(f);
        free(opts.mountpoint);
        return rc;
}

int main(int argc, char **argv)
{
        struct slowfs fs = {.src = -1,
                            .threads = 256,
                            .max_background = 256,
                            .stats_lock = PTHREAD_MUTEX_INITIALIZER};
        struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
        const char *source = NULL;
        int rc = parse_args(argc, argv, &fs, &source, &args);
        if (rc != 0) {
                usage(rc == 1 ? stdout : stderr);
                fuse_opt_free_args(&args);
                return rc == 1 ? 0 : 1;
        }
        fs.src = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fs.src < 0) {
                fprintf(stderr, "slowfs: cannot open '%s': %s\n", source,
                        strerror(errno));
                fuse_opt_free_args(&args);
                return 1;
        }
        rc = add_default_options(&args, fs.writable) == 0 ? serve(&args, &fs)
                                                          : 1;
        fuse_opt_free_args(&args);
        close(fs.src);
        return rc;
}
