/*
 * fsio.h - every system call of the copy path goes through here.
 *
 * The wrappers retry EINTR, loop over short reads and writes, and return 0 or
 * a positive errno (never -1 with errno set), so callers can pass the value
 * up as is. In test builds (FERRY_TESTING) each wrapper first asks the fault
 * table, filled from the environment on first use:
 *
 *   FERRY_FAULT="op:nth:errno[,op:nth:errno...]"
 *       the nth call of op fails with errno (nth 0: every call)
 *   FERRY_FAULT_LOG=FILE
 *       each injected fault appends a line "op call errno" to FILE
 *   FERRY_CRASH="point:nth"
 *       _exit(86) the nth time the named crash point is passed
 *   FERRY_FD_WAIT_MS=N
 *       give up waiting for a free descriptor after N ms (default 60 s)
 *   FERRY_NO_OPENAT2 (any value)
 *       open paths as on a kernel without openat2 (fsio_open.c)
 *
 * ops: open read write fsync syncfs rename mkdir utimens chmod chown link
 * symlink stat unlink rmdir seek xattr, readdir (the scanner's, one call per
 * entry), probe (ferry_fsio_probe_dir: "DST's root no longer answers"), and for
 * the manifest (through an SQLite VFS shim, src/mvfs.c) mwrite and msync. Crash
 * points: see ferry_fsio_crashpoint callers (after_write, after_rename,
 * before_barrier, after_barrier, before_commit, after_commit,
 * after_done_commit: after the commit of a barrier's done marks, and
 * manifest_created: a new manifest opened, before its first write).
 */
#ifndef FERRY_FSIO_H
#define FERRY_FSIO_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

enum ferry_fsio_op {
        FSIO_OPEN,
        FSIO_READ,
        FSIO_WRITE,
        FSIO_FSYNC,
        FSIO_SYNCFS,
        FSIO_RENAME,
        FSIO_MKDIR,
        FSIO_UTIMENS,
        FSIO_CHMOD,
        FSIO_CHOWN,
        FSIO_LINK,
        FSIO_SYMLINK,
        FSIO_STAT,
        FSIO_UNLINK,
        FSIO_MWRITE,  /* the manifest's writes (main file and WAL) */
        FSIO_MSYNC,   /* the manifest's fsyncs */
        FSIO_READDIR, /* the scanner's readdir of a source directory */
        FSIO_PROBE,   /* ferry_fsio_probe_dir */
        FSIO_RMDIR,   /* ferry_fsio_rmdirat (and ferry_fsio_remove_tree's) */
        FSIO_SEEK,    /* ferry_fsio_seek_data, ferry_fsio_seek_hole */
        FSIO_XATTR,   /* every xattr call (fsio_xattr.c): list, get, set,
                         remove */
        FSIO_NOPS
};

/*
 * A file time as the kernel keeps it: seconds since 1970 (negative before)
 * and nanoseconds, 0 to 999999999. Never one 64-bit count of nanoseconds:
 * that ends on 2262-04-11 and begins in 1677, and file systems hold more
 * (ext4 1901 to 2446, XFS to 2486, tmpfs and btrfs any 64-bit second).
 */
struct ferry_time {
        int64_t sec;
        uint32_t nsec;
};

static inline bool ferry_time_eq(struct ferry_time a, struct ferry_time b)
{
        return a.sec == b.sec && a.nsec == b.nsec;
}

/* Whether a and b lie less than slack_ns (>= 0) apart; no overflow at any
 * pair of times. */
static inline bool ferry_time_near(struct ferry_time a, struct ferry_time b,
                                   int64_t slack_ns)
{
        if (a.sec < b.sec || (a.sec == b.sec && a.nsec < b.nsec)) {
                struct ferry_time t = a;
                a = b;
                b = t;
        }
        uint64_t secs = (uint64_t)a.sec - (uint64_t)b.sec; /* a >= b */
        if (secs > (uint64_t)(slack_ns / 1000000000) + 1)
                return false;
        int64_t apart =
                (int64_t)secs * 1000000000 + (int64_t)a.nsec - (int64_t)b.nsec;
        return apart < slack_ns;
}

/* What ferry needs to know of a file, from statx or fstat. */
struct ferry_stat {
        uint64_t size;
        uint64_t blocks; /* 512-byte blocks allocated */
        struct ferry_time mtime;
        struct ferry_time ctime;
        struct ferry_time atime;
        uint64_t dev;
        uint64_t ino;
        uint64_t rdev; /* devices: the device number (makedev) */
        uint32_t mode; /* type and permission bits */
        uint32_t nlink;
        uint32_t uid;
        uint32_t gid;
};

/*
 * Out of descriptors: EMFILE and ENFILE are back-pressure, never a file's
 * fault. Every wrapper below that makes a descriptor (openat, open_dir,
 * make_dirs, remove_tree) holds on a moment (100 ms) for one to come
 * free, then returns the errno. Its caller lets go of what descriptors it
 * holds (another thread may need them to finish) and calls
 * ferry_fsio_fd_wait before it tries again, without counting an attempt.
 * That wait is bounded: after a minute (FERRY_FD_WAIT_MS in test builds)
 * without a descriptor it says no, and from then on says no at once to
 * every caller, so the run stops (nothing would free one) rather than
 * fail file after file.
 */
/* Whether err is EMFILE or ENFILE: callers decide by this, not the text. */
bool ferry_fsio_out_of_fds(int err);
/* After err: when it is EMFILE or ENFILE and the wait that began at *since
 * (0 before the first call; caller-owned, one per operation) has not run
 * out, sleeps a little and returns true: try again. */
bool ferry_fsio_fd_wait(int64_t *since, int err);
/* Forgets an earlier give-up and the count below (a new job starts). */
void ferry_fsio_fd_reset(void);
/* How many calls had to wait for a descriptor since the reset. */
unsigned long ferry_fsio_fd_waits(void);

/* Opens name relative to dirfd; *fd gets the descriptor. A path longer than
 * PATH_MAX is opened one component at a time. */
int ferry_fsio_openat(int dirfd, const char *name, int flags, mode_t mode,
                      int *fd);
/* Opens the directory at relative path rel (may be "" for dirfd itself). */
int ferry_fsio_open_dir(int rootfd, const char *rel, int *fd);
/* Like open_dir, creating missing components with mode 0700; a file or
 * symlink where a directory must be is removed first (the source's type
 * changed), unless the directory lists it under another spelling (a
 * case-insensitive file system): then ENOTDIR. Never follows symlinks. */
int ferry_fsio_make_dirs(int rootfd, const char *rel, int *fd);

/* Reads up to len bytes, looping on short reads; *got < len only at EOF. */
int ferry_fsio_read(int fd, void *buf, size_t len, size_t *got);
int ferry_fsio_pread(int fd, void *buf, size_t len, off_t off, size_t *got);
/* Advice that [off, off + len) of fd (len 0: to its end) is not read
 * again: its cached pages may go (a large file's SRC, read once: the copy
 * does not push the rest of the page cache out). Advice only: nothing to
 * fail. */
void ferry_fsio_uncache(int fd, off_t off, size_t len);
/* Writes all len bytes. */
int ferry_fsio_write(int fd, const void *buf, size_t len);
int ferry_fsio_pwrite(int fd, const void *buf, size_t len, off_t off);

int ferry_fsio_fstat(int fd, struct ferry_stat *st);
int ferry_fsio_statat(int dirfd, const char *name, struct ferry_stat *st);
int ferry_fsio_fsync(int fd);
/* fdatasync (fault op "fsync"). */
int ferry_fsio_fdatasync(int fd);
/* ENOSPC when the file system of fd has less than len bytes free for
 * this user (fstatvfs: f_bavail); 0 when it has, or cannot say (fault op
 * "write"). */
int ferry_fsio_room(int fd, uint64_t len);
int ferry_fsio_syncfs(int fd);
/* What a syncfs of a file system leaves for the durability barrier to do
 * (coord/barrier.c), by the driver that runs it (the mount table's type,
 * checked against statfs's f_type, which 9p passes on from its server):
 *  - COMMITS: the syncfs makes durable every name made, renamed or
 *    removed in it before the syncfs: XFS (it forces the log), Btrfs (it
 *    commits the transaction), ext4 with a journal (jbd2 commits);
 *  - WRITES: ext2, ext3 and ext4 without a journal: the syncfs writes
 *    every dirty block and waits for it, directory blocks and inode
 *    tables among them, but the drive's cache is flushed (->sync_fs)
 *    before the last of them (sync_filesystem's final sync_blockdev); a
 *    second syncfs flushes after them;
 *  - DIRS: anything else, or not known (FUSE, NFS, CIFS, 9p, FAT, tmpfs,
 *    overlay...): each directory's own fsync is what reaches the disk or
 *    the server. */
enum ferry_fs_sync {
        FERRY_FS_SYNC_DIRS,
        FERRY_FS_SYNC_WRITES,
        FERRY_FS_SYNC_COMMITS
};
enum ferry_fs_sync ferry_fsio_fs_sync(int fd);
/* Makes what was written to directory fd's file system before the call
 * durable as far as syncfs can: a syncfs (two under WRITES); a file
 * system found read-only after it is EROFS (one that failed and was set
 * read-only: its syncfs returns 0 having written nothing; since Linux 6.6
 * a failed ext4 is not set read-only, and the fsync below reports it);
 * then under COMMITS and WRITES an fsync of fd, which reports a file
 * system that failed, as its syncfs may not (before Linux 5.17 syncfs
 * ignored ->sync_fs's errors): *covered then, every directory of that
 * file system is durable and needs no fsync of its own for what was done
 * before the call. 0 or an errno (fault ops "syncfs", "fsync"). */
int ferry_fsio_sync_device(int fd, bool *covered);
int ferry_fsio_ftruncate(int fd, off_t len);
/* Frees len bytes of fd at off, its size kept (a hole reads as zeros):
 * 0, or an errno (EOPNOTSUPP where the file system cannot). No fault op
 * of its own: the writes around it are what tests count. */
int ferry_fsio_punch_hole(int fd, off_t off, off_t len);
int ferry_fsio_renameat(int dirfd, const char *from, const char *to);
/* Renames from to to unless to exists: EEXIST then, and nothing changed.
 * Where the file system cannot say (no RENAME_NOREPLACE), it looks first:
 * another writer could slip in between. */
int ferry_fsio_rename_noreplace(int dirfd, const char *from, const char *to);
int ferry_fsio_unlinkat(int dirfd, const char *name, int flags);
/* Removes the empty directory name (unlinkat AT_REMOVEDIR); fault op
 * "rmdir", so that a test reaches --delete's directory removal. */
int ferry_fsio_rmdirat(int dirfd, const char *name);
/* lseek(fd, from, SEEK_DATA) and SEEK_HOLE: *at gets the offset of the
 * next data or hole at or after from. ENXIO when from is at or beyond the
 * end (for SEEK_DATA also: no data after from). Fault op "seek". */
int ferry_fsio_seek_data(int fd, off_t from, off_t *at);
int ferry_fsio_seek_hole(int fd, off_t from, off_t *at);
int ferry_fsio_mkdirat(int dirfd, const char *name, mode_t mode);
int ferry_fsio_symlinkat(const char *target, int dirfd, const char *name);
/* A FIFO, socket or device node (mknodat); faults as FSIO_SYMLINK, the
 * other node made under a temp name. */
int ferry_fsio_mknodat(int dirfd, const char *name, mode_t mode, uint64_t rdev);
int ferry_fsio_linkat(int fromfd, const char *from, int dirfd,
                      const char *name);
/* Reads a symlink's target; caller frees *target. */
int ferry_fsio_readlinkat(int dirfd, const char *name, char **target,
                          size_t *len);
/* EOVERFLOW when a time does not fit this system's time_t. */
int ferry_fsio_futimens(int fd, struct ferry_time atime,
                        struct ferry_time mtime);
int ferry_fsio_utimensat(int dirfd, const char *name, struct ferry_time atime,
                         struct ferry_time mtime, int flags);
int ferry_fsio_fchmod(int fd, mode_t mode);
int ferry_fsio_fchmodat(int dirfd, const char *name, mode_t mode);
int ferry_fsio_fchown(int fd, uid_t uid, gid_t gid);
int ferry_fsio_lchownat(int dirfd, const char *name, uid_t uid, gid_t gid);
/*
 * Extended attributes (fsio_xattr.c), fault op "xattr". By descriptor, or
 * by name in dirfd, never followed (symlinks and special files, which
 * cannot be opened safely): the l*xattr calls on
 * "/proc/self/fd/<dirfd>/<name>", which resolves the directory through
 * the descriptor, as openat would, and the last component without
 * following it. *len gets the bytes the kernel filled (list: NUL-ended
 * names); size 0 asks for the size only. ERANGE: buf is too small.
 */
int ferry_fsio_flistxattr(int fd, char *buf, size_t size, size_t *len);
int ferry_fsio_fgetxattr(int fd, const char *name, void *buf, size_t size,
                         size_t *len);
int ferry_fsio_fsetxattr(int fd, const char *name, const void *value,
                         size_t size);
int ferry_fsio_fremovexattr(int fd, const char *name);
int ferry_fsio_llistxattrat(int dirfd, const char *entry, char *buf,
                            size_t size, size_t *len);
int ferry_fsio_lgetxattrat(int dirfd, const char *entry, const char *name,
                           void *buf, size_t size, size_t *len);
int ferry_fsio_lsetxattrat(int dirfd, const char *entry, const char *name,
                           const void *value, size_t size);
int ferry_fsio_lremovexattrat(int dirfd, const char *entry, const char *name);

/* Closes fd if >= 0 and sets it to -1; close errors are returned. */
int ferry_fsio_close(int *fd);

/*
 * Asks whether the file system of directory dirfd (DST's root) still
 * answers: 0 when it does, else the errno of the first look that failed:
 * the directory's own stat (forced past attribute caches: a network file
 * system asks its server), ENOENT when the directory was removed, EROFS
 * when the file system is read-only, then an unnamed file (O_TMPFILE,
 * where the file system has it) with one byte written and fsynced, which
 * leaves no name and no mtime change behind. Which errno means "gone" is
 * the caller's policy (ferry_copy_dst_failed). Raw system calls: only the
 * "probe" fault fakes a failure, never another op's.
 */
int ferry_fsio_probe_dir(int dirfd);

/* Removes the tree at name under dirfd (used when a type changed). */
int ferry_fsio_remove_tree(int dirfd, const char *name);

/* A stream of directory dirfd's entries of its own, from the first
 * (dirfd stays open and where it was); closedir ends it. 0 or an errno. */
int ferry_fsio_opendir(int dirfd, DIR **d);

/* The entries of directory dirfd but "." and ".." into *n (a dry run's
 * guess whether rmdir would find it empty); dirfd stays open. */
int ferry_fsio_count_entries(int dirfd, uint64_t *n);

#ifdef FERRY_TESTING
/* Test builds: called before each ferry_fsio_pread (a unit test counts
 * which descriptor is read, and how much). Not thread-safe to set while
 * copies run. */
extern void (*ferry_fsio_pread_hook)(int fd, size_t len, off_t off);
#endif

/* Test builds: _exit(86) when the crash point's counter reaches its nth. */
void ferry_fsio_crashpoint(const char *point);
/* The errno to inject for this call of op (0: none; always 0 outside test
 * builds), and whether FERRY_FAULT names op at all. */
int ferry_fsio_fault(enum ferry_fsio_op op);
bool ferry_fsio_faults_on(enum ferry_fsio_op op);

#endif
