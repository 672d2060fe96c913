/*
 * mvfs.c - fault injection for the manifest (mvfs.h).
 *
 * A pass-through SQLite VFS over the default one. Each write and each sync
 * of any file SQLite opens through it (the manifest and its WAL) first asks
 * fsio's fault table (ops "mwrite" and "msync" of FERRY_FAULT), so a test
 * can make the nth write or fsync of the manifest fail. It is registered,
 * and used, only when FERRY_FAULT names one of those ops: a normal run
 * talks to SQLite's own VFS.
 */
#include "config.h"
#include "mvfs.h"

#include "fsio.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <string.h>

#ifdef FERRY_TESTING

#define SHIM_NAME "ferry-faults"

struct shim_file {
        sqlite3_file base;
        sqlite3_file *real; /* follows this struct in the same allocation */
};

static sqlite3_vfs shim_vfs;
static sqlite3_io_methods shim_io;
static pthread_once_t shim_once = PTHREAD_ONCE_INIT;
static bool shim_ok;

static sqlite3_file *real_of(sqlite3_file *f)
{
        return ((struct shim_file *)f)->real;
}

static int shim_close(sqlite3_file *f)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods ? r->pMethods->xClose(r) : SQLITE_OK;
}

static int shim_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xRead(r, buf, n, off);
}

static int shim_write(sqlite3_file *f, const void *buf, int n,
                      sqlite3_int64 off)
{
        int err = ferry_fsio_fault(FSIO_MWRITE);
        if (err)
                return err == ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
        sqlite3_file *r = real_of(f);
        return r->pMethods->xWrite(r, buf, n, off);
}

static int shim_truncate(sqlite3_file *f, sqlite3_int64 size)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xTruncate(r, size);
}

static int shim_sync(sqlite3_file *f, int flags)
{
        if (ferry_fsio_fault(FSIO_MSYNC))
                return SQLITE_IOERR_FSYNC;
        sqlite3_file *r = real_of(f);
        return r->pMethods->xSync(r, flags);
}

static int shim_size(sqlite3_file *f, sqlite3_int64 *size)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xFileSize(r, size);
}

static int shim_lock(sqlite3_file *f, int level)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xLock(r, level);
}

static int shim_unlock(sqlite3_file *f, int level)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xUnlock(r, level);
}

static int shim_check_lock(sqlite3_file *f, int *out)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xCheckReservedLock(r, out);
}

static int shim_control(sqlite3_file *f, int op, void *arg)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xFileControl(r, op, arg);
}

static int shim_sector(sqlite3_file *f)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xSectorSize(r);
}

static int shim_device(sqlite3_file *f)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xDeviceCharacteristics(r);
}

static int shim_shm_map(sqlite3_file *f, int pg, int size, int extend,
                        void volatile **p)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xShmMap(r, pg, size, extend, p);
}

static int shim_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xShmLock(r, off, n, flags);
}

static void shim_shm_barrier(sqlite3_file *f)
{
        sqlite3_file *r = real_of(f);
        r->pMethods->xShmBarrier(r);
}

static int shim_shm_unmap(sqlite3_file *f, int del)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xShmUnmap(r, del);
}

static int shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xFetch(r, off, n, p);
}

static int shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
        sqlite3_file *r = real_of(f);
        return r->pMethods->xUnfetch(r, off, p);
}

static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
                     int flags, int *out_flags)
{
        sqlite3_vfs *real_vfs = vfs->pAppData;
        struct shim_file *s = (struct shim_file *)f;
        s->real = (sqlite3_file *)(s + 1);
        int rc = real_vfs->xOpen(real_vfs, name, s->real, flags, out_flags);
        /* SQLite calls xClose only when pMethods is set */
        f->pMethods = s->real->pMethods ? &shim_io : NULL;
        return rc;
}

/* The default VFS's other methods, through pAppData. */
#define REAL(vfs) ((sqlite3_vfs *)(vfs)->pAppData)

static int shim_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
        return REAL(vfs)->xDelete(REAL(vfs), name, sync_dir);
}

static int shim_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
        return REAL(vfs)->xAccess(REAL(vfs), name, flags, out);
}

static int shim_full_path(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
        return REAL(vfs)->xFullPathname(REAL(vfs), name, n, out);
}

static int shim_random(sqlite3_vfs *vfs, int n, char *out)
{
        return REAL(vfs)->xRandomness(REAL(vfs), n, out);
}

static int shim_sleep(sqlite3_vfs *vfs, int us)
{
        return REAL(vfs)->xSleep(REAL(vfs), us);
}

static int shim_time(sqlite3_vfs *vfs, double *t)
{
        return REAL(vfs)->xCurrentTime(REAL(vfs), t);
}

static int shim_last_error(sqlite3_vfs *vfs, int n, char *out)
{
        return REAL(vfs)->xGetLastError(REAL(vfs), n, out);
}

static int shim_time64(sqlite3_vfs *vfs, sqlite3_int64 *t)
{
        return REAL(vfs)->xCurrentTimeInt64(REAL(vfs), t);
}

static void shim_register(void)
{
        sqlite3_vfs *real = sqlite3_vfs_find(NULL);
        if (!real || real->iVersion < 2)
                return;
        shim_io = (sqlite3_io_methods){
                .iVersion = 3,
                .xClose = shim_close,
                .xRead = shim_read,
                .xWrite = shim_write,
                .xTruncate = shim_truncate,
                .xSync = shim_sync,
                .xFileSize = shim_size,
                .xLock = shim_lock,
                .xUnlock = shim_unlock,
                .xCheckReservedLock = shim_check_lock,
                .xFileControl = shim_control,
                .xSectorSize = shim_sector,
                .xDeviceCharacteristics = shim_device,
                .xShmMap = shim_shm_map,
                .xShmLock = shim_shm_lock,
                .xShmBarrier = shim_shm_barrier,
                .xShmUnmap = shim_shm_unmap,
                .xFetch = shim_fetch,
                .xUnfetch = shim_unfetch,
        };
        shim_vfs = (sqlite3_vfs){
                .iVersion = 2,
                .szOsFile = (int)sizeof(struct shim_file) + real->szOsFile,
                .mxPathname = real->mxPathname,
                .zName = SHIM_NAME,
                .pAppData = real,
                .xOpen = shim_open,
                .xDelete = shim_delete,
                .xAccess = shim_access,
                .xFullPathname = shim_full_path,
                .xRandomness = shim_random,
                .xSleep = shim_sleep,
                .xCurrentTime = shim_time,
                .xGetLastError = shim_last_error,
                .xCurrentTimeInt64 = shim_time64,
        };
        shim_ok = sqlite3_vfs_register(&shim_vfs, 0) == SQLITE_OK;
}

const char *ferry_mvfs_name(void)
{
        if (!ferry_fsio_faults_on(FSIO_MWRITE) &&
            !ferry_fsio_faults_on(FSIO_MSYNC))
                return NULL;
        pthread_once(&shim_once, shim_register);
        return shim_ok ? SHIM_NAME : NULL;
}

#else

const char *ferry_mvfs_name(void)
{
        return NULL;
}

#endif
