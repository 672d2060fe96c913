/*
 * manifest/reader.c - how `ferry status` reads a manifest: through its
 * -wal and -shm when it may write beside it, else as an immutable file,
 * and how it learns that a run changed the file meanwhile
 * (ferry_manifest_moved). Its connection never writes (PRAGMA query_only).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "retry.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum reader_stmt { R_QUERY_ONLY, R_NSTMTS };

static const char *const reader_sql[R_NSTMTS] = {
        [R_QUERY_ONLY] = "PRAGMA query_only = 1",
};

/*
 * How `ferry status` opens a manifest: read-write if it could write next to
 * it, so that closing removes the -wal and -shm it created (as the last
 * connection; a running job keeps them), read-only otherwise. Its SQL
 * cannot write either way (PRAGMA query_only).
 */
static int status_open_flags(const char *path)
{
        char *dir = strdup(path);
        if (!dir)
                return SQLITE_OPEN_READONLY;
        char *slash = strrchr(dir, '/');
        if (slash)
                slash[slash == dir] = '\0';
        bool writable = access(path, W_OK) == 0 &&
                        access(slash ? dir : ".", W_OK | X_OK) == 0;
        free(dir);
        return writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
}
/*
 * Reading without write access: a read-only mount, or a monitoring user
 * who may read the manifest but not write it or its directory.
 *
 * The manifest is in WAL mode, and SQLite reads a WAL database through
 * its -shm, the shared index of the -wal, which a reader creates when it
 * is missing (sqlite.org/wal.html, "Read-Only Databases"). While a run
 * goes on, or after one was cut short, the -wal and -shm exist (SQLite
 * gives them the manifest's permissions) and a read-only connection uses
 * them as they are. Between runs there are none, and a reader that cannot
 * create them cannot open the manifest at all. The main file then holds
 * every committed row, and it is opened as immutable (URI parameter
 * immutable=1: no -shm, no locks, no -wal looked at).
 *
 * Immutable means that nobody changes the file meanwhile, and nothing
 * stops a run from starting during the read. The run's commits go to a
 * new -wal and leave the main file alone, but a checkpoint (every 4000
 * pages, and at the end of the run) writes into it. So the read counts
 * only if afterwards the main file still has the identity, size, mtime
 * and ctime it had before and still no -wal with frames beside it: a
 * checkpoint copies frames of the -wal, which goes away only when the run
 * closes the manifest after its last checkpoint (and a -wal once written
 * is not emptied before). Otherwise ferry_manifest_moved says so, and the
 * caller reads again.
 */

/* The file path+suffix exists, and holds more than max_size bytes. */
static bool beside(const char *path, const char *suffix, off_t max_size)
{
        char p[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix) >= sizeof(p))
                return true; /* cannot tell: assume it does */
        if (lstat(p, &st))
                return errno != ENOENT;
        return st.st_size > max_size;
}

/* Nothing but the main file holds rows: no -wal with frames (an empty one
 * stays behind a reader that had write access), no -journal. */
static bool on_its_own(const char *path)
{
        return !beside(path, "-wal", 0) && !beside(path, "-journal", -1);
}

/* The main file is on its own (above); *st is it. */
static bool alone(const char *path, struct stat *st)
{
        return on_its_own(path) && stat(path, st) == 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
               a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
               a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* After an immutable read: nobody wrote the main file meanwhile. */
bool mf_still_alone(const struct ferry_manifest *m)
{
        struct stat st;
        return stat(m->path, &st) == 0 && same_file(&st, &m->st) &&
               on_its_own(m->path);
}

/* The primary result code of the last failure on m->db, 0 without one. */
static int last_code(const struct ferry_manifest *m)
{
        return m->db ? sqlite3_errcode(m->db) & 0xff : 0;
}

/* The last failure came from the -shm or -wal this user cannot make. */
static bool cannot_share(const struct ferry_manifest *m)
{
        int code = last_code(m);
        return code == SQLITE_CANTOPEN || code == SQLITE_READONLY;
}

/* The same, met by a query of a reader that shares the -wal read-only. */
bool mf_shared_read_torn(const struct ferry_manifest *m)
{
        return last_code(m) == SQLITE_READONLY && !m->immutable &&
               sqlite3_db_readonly(m->db, "main") == 1;
}

/* Opens m->db for `ferry status` through the -wal and -shm as they are. */
static int open_shared(struct ferry_manifest *m, bool wal_frames)
{
        int rc = mf_open_db(m, m->path, status_open_flags(m->path), false);
        /* a -wal left by a crashed run is replayed by the next run, not by
         * a reader */
        if (!rc && wal_frames)
                sqlite3_db_config(m->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
                                  NULL);
        if (!rc)
                rc = mf_exec_sql(m, reader_sql[R_QUERY_ONLY], "configuration");
        return rc ? rc : mf_check_identity(m);
}

static void close_db(struct ferry_manifest *m)
{
        mf_finalize_all(m);
        sqlite3_close(m->db);
        m->db = NULL;
}

/*
 * A run that starts or ends during the open makes its -wal and -shm
 * appear or go away under a reader that cannot write them, and for that
 * moment the reader can neither use them (SQLite answers SQLITE_READONLY:
 * a -shm the run has not set up yet, or one it is taking down) nor read
 * the main file on its own (the -wal still has frames). The state passes
 * within milliseconds; it is tried again SHARE_TRIES times, after the
 * copier's backoff (about 1.5 s in all), before the manifest is called
 * unreadable (a -wal left by a crashed run does stay). Found by t35 E:
 * 1 of 47 polls failed while 20 runs came and went.
 */
#define SHARE_TRIES 5

/* Opens and checks a manifest for `ferry status`: through its -wal and
 * -shm where it can, else as immutable (above). */
int mf_open_reader(struct ferry_manifest *m, bool wal_frames)
{
        for (unsigned attempt = 0;; attempt++) {
                int rc = open_shared(m, wal_frames);
                if (!rc || !cannot_share(m))
                        return rc;
                if (alone(m->path, &m->st))
                        break;
                if (attempt == SHARE_TRIES)
                        return mf_fail(m,
                                       "manifest '%s' is unreadable without "
                                       "write access to its directory: %s",
                                       m->path, sqlite3_errmsg(m->db));
                close_db(m);
                ferry_copy_backoff(attempt);
        }
        close_db(m); /* the statements of the first connection */
        m->immutable = true;
        int rc = mf_open_db(m, m->path, 0, true);
        if (!rc)
                rc = mf_exec_sql(m, reader_sql[R_QUERY_ONLY], "configuration");
        return rc ? rc : mf_check_identity(m);
}

bool ferry_manifest_moved(const struct ferry_manifest *m)
{
        return m->moved;
}
