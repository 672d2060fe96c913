/*
 * manifest/open.c - opening a manifest for a run or --verify: the checks
 * before anything is written, the schema and its forward-only migrations
 * (sql/NNN_*.sql, embedded at build time), the connection's settings, and
 * closing. Read-only access for `ferry status` is reader.c's.
 *
 * Safety checks on open, before anything is written: the file must carry
 * a sound SQLite header and size (check_header), ferry's application_id and
 * a schema version this build knows (mf_check_identity), and, when it is
 * small enough to read through, pass SQLite's own check (check.c, before
 * the first COMMIT);
 * otherwise the user's file is left untouched and the run stops. Damage
 * met later makes every call fail with a message that says so
 * (mf_db_fail).
 */
#define _GNU_SOURCE
#include "manifest/internal.h"

#include "fsio.h"
#include "mvfs.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum open_stmt {
        O_BEGIN,
        O_COMMIT,
        O_ROLLBACK,
        O_APP_ID,
        O_USER_VERSION,
        O_SCHEMA_COUNT,
        O_SET_APP_ID,  /* a prefix: PRAGMA takes no parameters */
        O_SET_VERSION, /* a prefix */
        O_WAL,
        O_SYNC_OFF,
        O_SYNC_NORMAL,
        O_CONFIGURE, /* several statements, for sqlite3_exec */
        O_NSTMTS
};

static const char *const open_sql[O_NSTMTS] = {
        [O_BEGIN] = "BEGIN IMMEDIATE",
        [O_COMMIT] = "COMMIT",
        [O_ROLLBACK] = "ROLLBACK",
        [O_APP_ID] = "PRAGMA application_id",
        [O_USER_VERSION] = "PRAGMA user_version",
        [O_SCHEMA_COUNT] = "SELECT count(*) FROM sqlite_schema",
        [O_SET_APP_ID] = "PRAGMA application_id = ",
        [O_SET_VERSION] = "PRAGMA user_version = ",
        [O_WAL] = "PRAGMA journal_mode = WAL",
        [O_SYNC_OFF] = "PRAGMA synchronous = OFF",
        /* and the commits that must survive a power cut sync the -wal
         * themselves: results.c, the commit policy */
        [O_SYNC_NORMAL] = "PRAGMA synchronous = NORMAL",
        [O_CONFIGURE] = "PRAGMA cache_size = -2048;"
                        /* a statement journal (UPDATE of many rows in a
                         * transaction) spills to a temp file past 64 KiB;
                         * in memory it grew ~130 bytes per row (t16) */
                        "PRAGMA temp_store = FILE;"
                        "PRAGMA wal_autocheckpoint = 4000;",
};
_Static_assert(O_NSTMTS <= MF_TABLE_MAX, "open.c: statement table too big");

int mf_pragma_int(struct ferry_manifest *m, int id, int64_t *v)
{
        return mf_select_ints(m, mf_stmt(m, T_OPEN, id, open_sql[id]), 0, v, 1);
}

int mf_schema_version(struct ferry_manifest *m, int64_t *version)
{
        return mf_pragma_int(m, O_USER_VERSION, version);
}

/*
 * What the file says about itself, read before SQLite opens it: SQLite
 * trusts a short file (it reads the missing bytes as zeros) and reads only
 * the pages a query needs, so damage must be looked for on purpose.
 */
struct file_facts {
        bool exists;
        bool empty;      /* 0 bytes, no -wal: taken as no manifest */
        int64_t size;    /* bytes */
        bool wal_frames; /* a non-empty -wal: the main file may lag it */
        bool wal_mode;   /* the header says WAL (bytes 18, 19 are 2) */
};

static uint32_t be32(const unsigned char *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
               (uint32_t)p[2] << 8 | p[3];
}

static int damaged(struct ferry_error *err, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));

static int damaged(struct ferry_error *err, const char *path, const char *fmt,
                   ...)
{
        char why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        snprintf(err->msg, sizeof(err->msg),
                 "manifest '%s' is damaged: %s (left untouched)", path, why);
        return FERRY_EMANIFEST;
}

/* Has the -wal next to path any content? (It exists during a run, and
 * after a crash until the next run replays it.) */
static bool has_wal_frames(const char *path)
{
        char *wal = NULL;
        struct stat st;
        bool frames = asprintf(&wal, "%s-wal", path) < 0 || stat(wal, &st) != 0
                              ? false
                              : st.st_size > 0;
        free(wal);
        return frames;
}

/*
 * The 100-byte file header and the file size (SQLite's file format, "The
 * Database Header"). In WAL mode the main file lags the -wal until a
 * checkpoint, and a checkpoint cut short by a crash writes page 1 (with the
 * new size) before the pages after it: while the -wal holds frames, the
 * size checks prove nothing and are skipped. The -wal is looked at after
 * the size, so a run that checkpoints and ends meanwhile is no false alarm.
 */
static int check_file(int fd, const char *path, struct file_facts *f,
                      struct ferry_error *err)
{
        unsigned char h[100];
        struct stat st;
        ssize_t n = pread(fd, h, sizeof(h), 0);
        if (n == 0 && !has_wal_frames(path)) {
                snprintf(err->msg, sizeof(err->msg),
                         "manifest '%s' is empty (0 bytes): it was cut to "
                         "nothing, or a run was killed as it made it; to "
                         "start the job anew, remove it (left untouched)",
                         path);
                return FERRY_EMANIFEST;
        }
        if (n < 16 || memcmp(h, "SQLite format 3", 16) != 0) {
                snprintf(err->msg, sizeof(err->msg),
                         "manifest '%s' is not an SQLite database (left "
                         "untouched)",
                         path);
                return FERRY_EMANIFEST;
        }
        if (fstat(fd, &st)) {
                snprintf(err->msg, sizeof(err->msg),
                         "cannot read manifest '%s': %s", path,
                         strerror(errno));
                return FERRY_EMANIFEST;
        }
        f->size = (int64_t)st.st_size;
        if (n < (ssize_t)sizeof(h))
                return damaged(err, path,
                               "cut to %lld bytes, inside SQLite's header",
                               (long long)f->size);
        uint32_t page = (uint32_t)h[16] << 8 | h[17];
        if (page == 1)
                page = 65536;
        if (page < 512 || page > 65536 || (page & (page - 1)) || h[18] < 1 ||
            h[18] > 2 || h[19] < 1 || h[19] > 2)
                return damaged(err, path, "its header is not valid");
        f->wal_mode = h[18] == 2 && h[19] == 2;
        f->wal_frames = has_wal_frames(path);
        if (f->wal_frames)
                return 0;
        if (f->size % page)
                return damaged(err, path,
                               "cut short: %lld bytes are not a whole number "
                               "of %u-byte pages",
                               (long long)f->size, page);
        /* the in-header size is valid when nonzero and its change counter
         * matches the version-valid-for number */
        uint32_t pages = be32(h + 28);
        if (pages && be32(h + 24) == be32(h + 92) &&
            f->size < (int64_t)pages * page)
                return damaged(err, path,
                               "cut short: %lld of the %u pages its header "
                               "records",
                               (long long)(f->size / page), pages);
        return 0;
}

/* An SQLite database with sound header and size, or nothing at all. */
static int check_header(const char *path, int flags, struct file_facts *f,
                        struct ferry_error *err)
{
        memset(f, 0, sizeof(*f));
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                snprintf(err->msg, sizeof(err->msg),
                         "cannot open manifest '%s': %s", path,
                         strerror(errno));
                return FERRY_EMANIFEST;
        }
        /* SQLite makes the file at open and writes its first page a
         * moment later: a first run killed in between leaves 0 bytes, and
         * no DST or an empty one (MF_EMPTY_NEW). Made anew in place, never
         * removed (it may be a file the user made for --manifest). Else, or
         * with -wal frames beside it (not what ferry leaves), check_file
         * refuses. */
        struct stat st;
        if ((flags & MF_EMPTY_NEW) && !fstat(fd, &st) && S_ISREG(st.st_mode) &&
            st.st_size == 0 && !has_wal_frames(path)) {
                close(fd);
                f->empty = true;
                return 0;
        }
        f->exists = true;
        int rc = check_file(fd, path, f, err);
        close(fd);
        return rc;
}

static int max_version(void)
{
        return ferry_n_migrations
                       ? ferry_migrations[ferry_n_migrations - 1].version
                       : 0;
}

static int migrate(struct ferry_manifest *m, int64_t from)
{
        for (int i = 0; i < ferry_n_migrations; i++) {
                const struct ferry_migration *mg = &ferry_migrations[i];
                if (mg->version <= from)
                        continue;
                char sql[128];
                snprintf(sql, sizeof(sql), "%s%d;", open_sql[O_SET_VERSION],
                         mg->version);
                int rc = mf_exec_sql(m, open_sql[O_BEGIN], "migration");
                if (!rc)
                        rc = mf_exec_sql(m, mg->sql, mg->name);
                if (!rc)
                        rc = mf_exec_sql(m, sql, "migration");
                if (!rc)
                        rc = mf_exec_sql(m, open_sql[O_COMMIT], "migration");
                if (rc) {
                        sqlite3_exec(m->db, open_sql[O_ROLLBACK], NULL, NULL,
                                     NULL);
                        return rc;
                }
        }
        return 0;
}

/* Why an existing manifest could not be read while it was checked. */
static int refuse_unreadable(struct ferry_manifest *m)
{
        if (mf_is_damage(sqlite3_errcode(m->db)))
                return mf_fail(m,
                               "manifest '%s' is damaged: %s (left untouched)",
                               m->path, sqlite3_errmsg(m->db));
        return mf_fail(m, "manifest '%s' is unreadable: %s", m->path,
                       sqlite3_errmsg(m->db));
}

/* Identity and version checks of an existing manifest; reads only. */
int mf_check_identity(struct ferry_manifest *m)
{
        int64_t app = 0, version = 0;
        if (mf_pragma_int(m, O_APP_ID, &app) ||
            mf_pragma_int(m, O_USER_VERSION, &version))
                return refuse_unreadable(m);
        if (app != FERRY_APPLICATION_ID)
                return mf_fail(m,
                               "'%s' is an SQLite database but not a ferry "
                               "manifest (left untouched)",
                               m->path);
        if (version > max_version())
                return mf_fail(m,
                               "manifest '%s' has schema version %lld, newer "
                               "than this ferry knows (%d): upgrade ferry",
                               m->path, (long long)version, max_version());
        int64_t n = 0;
        if (mf_pragma_int(m, O_SCHEMA_COUNT, &n))
                return refuse_unreadable(m);
        return 0;
}

static int set_app_id(struct ferry_manifest *m)
{
        char sql[96];
        snprintf(sql, sizeof(sql), "%s%d;", open_sql[O_SET_APP_ID],
                 FERRY_APPLICATION_ID);
        return mf_exec_sql(m, sql, "creation");
}

/* The main file of a new manifest to disk (SQLite's sync, fault shim
 * included). */
static int sync_main(struct ferry_manifest *m)
{
        sqlite3_file *f = NULL;
        if (sqlite3_file_control(m->db, "main", SQLITE_FCNTL_FILE_POINTER,
                                 &f) != SQLITE_OK ||
            !f || !f->pMethods)
                return mf_fail(m, "manifest '%s' could not be created",
                               m->path);
        int rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
        return rc == SQLITE_OK ? 0
                               : mf_fail(m,
                                         "manifest '%s' could not be "
                                         "created: its sync failed: %s",
                                         m->path, sqlite3_errstr(rc));
}

/*
 * The settings, then WAL mode. A new manifest (fresh) is set up without a
 * sync until it is complete, and costs one: its first page, written in
 * rollback mode with ferry's application_id in it, is synced once in WAL
 * mode; the schema that follows goes to a new -wal, whose frames recovery
 * takes only as far as they are whole and chained (sqlite.org/wal.html),
 * so a power cut leaves a ferry manifest of an older schema version that
 * the next run migrates, never a foreign or damaged one. Its -wal is made
 * durable with the run's first sync (results.c), with its directory (SQLite
 * syncs a new -wal's directory once). Then synchronous=NORMAL (results.c,
 * the commit policy).
 */
static int configure(struct ferry_manifest *m, bool memory, bool fresh)
{
        fresh = fresh && !memory;
        int rc = mf_exec_sql(m, open_sql[O_CONFIGURE], "configuration");
        if (!rc)
                rc = mf_exec_sql(m,
                                 open_sql[fresh ? O_SYNC_OFF : O_SYNC_NORMAL],
                                 "configuration");
        if (!rc && fresh)
                rc = set_app_id(m);
        if (!rc && !memory)
                rc = mf_exec_sql(m, open_sql[O_WAL], "setting WAL mode");
        return !rc && fresh ? sync_main(m) : rc;
}

/* A new manifest's application_id (already there in a file: configure)
 * and schema, then the level of syncs every later commit keeps. */
static int setup_new(struct ferry_manifest *m, bool memory)
{
        int rc = memory ? set_app_id(m) : 0;
        if (!rc)
                rc = migrate(m, 0);
        return rc || memory ? rc
                            : mf_exec_sql(m, open_sql[O_SYNC_NORMAL],
                                          "configuration");
}

static void remove_new(const char *path)
{
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
        for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
                char p[PATH_MAX];
                if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffix[i]) <
                    sizeof(p))
                        unlink(p);
        }
}
/* The URI that opens path as an immutable file; free with sqlite3_free. */
static char *immutable_uri(const char *path)
{
        sqlite3_str *s = sqlite3_str_new(NULL);
        /* "file:" and a relative path, or "file://" (no authority) and an
         * absolute one; everything but plain characters %-escaped */
        sqlite3_str_appendall(s, path[0] == '/' ? "file://" : "file:");
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                unsigned c = *p;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '/' || c == '.' ||
                    c == '_' || c == '-')
                        sqlite3_str_appendchar(s, 1, (char)c);
                else
                        sqlite3_str_appendf(s, "%%%02X", c);
        }
        sqlite3_str_appendall(s, "?immutable=1");
        return sqlite3_str_finish(s);
}

/* Opens m->db: name with oflags, or as immutable (above). */
int mf_open_db(struct ferry_manifest *m, const char *name, int oflags,
               bool immutable)
{
        char *uri = NULL;
        if (immutable) {
                if (!(uri = immutable_uri(name)))
                        return mf_fail(m, "out of memory");
                oflags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
        }
        int rc = sqlite3_open_v2(uri ? uri : name, &m->db,
                                 oflags | SQLITE_OPEN_NOMUTEX,
                                 ferry_mvfs_name());
        sqlite3_free(uri);
        if (rc != SQLITE_OK)
                return mf_fail(m, "cannot open manifest '%s': %s", name,
                               m->db ? sqlite3_errmsg(m->db) : "out of memory");
        /* a run and `ferry status` meet here: wait for each other's locks
         * instead of reporting a busy manifest as unreadable */
        sqlite3_busy_timeout(m->db, 10000);
        sqlite3_extended_result_codes(m->db, 1);
        return 0;
}
/* A manifest refused after its checks: its -wal is not replayed into it
 * when the connection closes (the file is left as it was). rc back. */
static int refuse(struct ferry_manifest *m, const struct file_facts *f, int rc)
{
        if (f->wal_frames)
                sqlite3_db_config(m->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1,
                                  NULL);
        return rc;
}

/* Opens, checks and sets up a manifest for a run or --verify. */
static int open_writer(struct ferry_manifest *m, int flags,
                       const struct file_facts *f)
{
        bool memory = flags & MF_MEMORY;
        /* beside the scan only when configure() writes nothing before the
         * verdict: a rollback-journal file is switched to WAL there */
        if (!f->wal_mode)
                flags &= ~MF_CHECK_BESIDE;
        int rc = mf_open_db(m, memory ? ":memory:" : m->path,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, false);
        if (!rc && !memory && !f->exists)
                ferry_fsio_crashpoint("manifest_created"); /* t27 */
        if (!rc && !memory && sqlite3_db_readonly(m->db, "main") == 1)
                rc = mf_fail(m,
                             "manifest '%s' is not writable: a run%s writes to "
                             "it (`ferry status` only reads)",
                             m->path,
                             flags & MF_THOROUGH
                                     ? " and --verify, which marks the files "
                                       "it finds missing or changed,"
                                     : "");
        if (!rc && f->exists) {
                rc = mf_check_identity(m);
                if (!rc && !(flags & MF_CHECK_BESIDE))
                        rc = mf_check_content(m, f->size, flags & MF_THOROUGH);
                if (rc)
                        return refuse(m, f, rc);
        }
        if (!rc)
                rc = configure(m, memory, !f->exists);
        if (rc)
                return rc;
        int64_t version = 0;
        rc = f->exists ? mf_pragma_int(m, O_USER_VERSION, &version)
                       : setup_new(m, memory);
        if (rc || !f->exists)
                return rc;
        /* beside the scan, unless a migration is to write first */
        if (flags & MF_CHECK_BESIDE)
                rc = version == max_version()
                             ? mf_check_start(m, f->size, f->wal_frames)
                             : mf_check_content(m, f->size, false);
        return rc ? refuse(m, f, rc) : migrate(m, version);
}

int ferry_manifest_open(const char *path, int flags,
                        struct ferry_manifest **out, struct ferry_error *err)
{
        *out = NULL;
        bool memory = flags & MF_MEMORY, readonly = flags & MF_READONLY;
        struct file_facts f = {.exists = false};
        if (!memory) {
                int rc = check_header(path, flags, &f, err);
                if (rc)
                        return rc;
                if (!f.exists && !(flags & MF_CREATE)) {
                        snprintf(err->msg, sizeof(err->msg),
                                 "no manifest at '%s'", path);
                        return FERRY_EMANIFEST;
                }
        }
        struct ferry_manifest *m = calloc(1, sizeof(*m));
        if (!m || !(m->path = strdup(path ? path : ":memory:"))) {
                free(m);
                snprintf(err->msg, sizeof(err->msg), "out of memory");
                return FERRY_EINTERNAL;
        }
        int rc = readonly ? mf_open_reader(m, f.wal_frames)
                          : open_writer(m, flags, &f);
        if (rc) {
                snprintf(err->msg, sizeof(err->msg), "%s", m->errmsg);
                ferry_manifest_close(m);
                /* A manifest this call created but could not set up (a
                 * write or fsync failed) would be refused by every later
                 * run: remove it, it holds nothing yet. Found with the
                 * manifest fault injection (mwrite:1, msync:1). */
                if (!memory && !readonly && !f.exists && !f.empty)
                        remove_new(path);
                return rc;
        }
        *out = m;
        return 0;
}

/*
 * The last commits of a run (its result, the uncertain note cleared) were
 * made with synchronous=NORMAL: the checkpoint that closing runs makes
 * them durable (it syncs the -wal first). A reader in the way (`ferry
 * status`) stops that checkpoint, and then the -wal is synced here: a
 * lost result would make the run look cut short, and written_since would
 * take what appears in DST later for ferry's.
 */
static void durable_at_close(struct ferry_manifest *m)
{
        int log = 0, done = 0;
        if (!m->db || !m->unsynced || m->immutable ||
            !sqlite3_get_autocommit(m->db))
                return;
        int rc = sqlite3_wal_checkpoint_v2(
                m->db, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &done);
        if (rc != SQLITE_OK || done < log)
                ferry_manifest_sync(m);
}

void ferry_manifest_close(struct ferry_manifest *m)
{
        if (!m)
                return;
        mf_check_free(m); /* before a checkpoint: refused, it runs none */
        durable_at_close(m);
        mf_finalize_all(m);
        mf_dcache_clear(m);
        sqlite3_close(m->db);
        free(m->path);
        free(m);
}
