/*
 * manifest/internal.h - what the files of src/manifest/ share: the
 * manifest struct, the statement cache, the SQL spelling of row values,
 * and the helpers that bind and read columns (times, names, stats).
 *
 * Each file of src/manifest/ owns one verb of the manifest and one
 * statement table: an enum of its statements beside their SQL, prepared
 * lazily through mf_stmt(). No SQL is written anywhere else. Row values
 * are spelled in SQL with the SQL_* macros below, built from
 * manifest_types.h, never as bare numbers.
 */
#ifndef FERRY_MANIFEST_INTERNAL_H
#define FERRY_MANIFEST_INTERNAL_H

#include "manifest.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* Row values as SQL literals (manifest_types.h). Literals, not bound
 * parameters: the partial indexes files_pending and files_removed serve a
 * query only when its WHERE names the same constants. */
#define SQL_PENDING  MF_SQL_INT(MF_ST_PENDING)
#define SQL_DONE     MF_SQL_INT(MF_ST_DONE)
#define SQL_FAILED   MF_SQL_INT(MF_ST_FAILED)
#define SQL_SKIPPED  MF_SQL_INT(MF_ST_SKIPPED)
#define SQL_VANISHED MF_SQL_INT(MF_ST_VANISHED)
#define SQL_REMOVED  MF_SQL_INT(MF_ST_REMOVED)
#define SQL_REG      MF_SQL_INT(MF_FT_REG)
#define SQL_LINK     MF_SQL_INT(MF_FT_LINK)
#define SQL_SPECIAL  MF_SQL_INT(MF_FT_SPECIAL)
#define SQL_TO_APPLY MF_SQL_INT(MF_DS_TO_APPLY)
#define SQL_APPLIED  MF_SQL_INT(MF_DS_APPLIED)
#define SQL_MARKING  MF_SQL_INT(MF_LISTED_MARKING)
/* files.hl of a hardlink group's first name (sql/001_schema.sql) */
#define MF_HL_LEADER -1
#define SQL_LEADER   MF_SQL_INT(MF_HL_LEADER)
/* dirs.mtime_ns no directory has: the next scan finds it changed */
#define MF_MTIME_NONE  -1
#define SQL_MTIME_NONE MF_SQL_INT(MF_MTIME_NONE)
/* "state IN (vanished, removed)": the WHERE of the files_removed index */
#define SQL_GONE "(" SQL_VANISHED ", " SQL_REMOVED ")"

/* The statement tables, one per file of src/manifest/. */
enum mf_table {
        T_OPEN,    /* open.c */
        T_META,    /* meta.c */
        T_SCAN,    /* scan.c */
        T_LINKS,   /* links.c */
        T_DIRS,    /* dirs.c */
        T_RESULTS, /* results.c */
        T_QUERY,   /* query.c */
        T_STATUS,  /* status.c */
        MF_NTABLES
};
#define MF_TABLE_MAX 32 /* statements in one table, at most */

/* The directories of the listings being recorded (record_listing). */
#define MF_DIR_CACHE 8
struct mf_dir_slot {
        char *path;
        size_t len;
        int64_t id;
        bool is_new, marking;
};

struct ferry_manifest {
        sqlite3 *db;
        sqlite3_stmt *stmt[MF_NTABLES][MF_TABLE_MAX];
        char *path;       /* for messages */
        int64_t upserted; /* the row of the last changed or resumed upsert */
        bool immutable;   /* read as a file nobody writes: reader.c */
        bool moved;       /* ... and it changed meanwhile: read it again */
        struct stat st;   /* the file before an immutable read began */
        struct mf_dir_slot dcache[MF_DIR_CACHE];
        unsigned dcache_next;
        char errmsg[1024];
};

/* core.c: errors */
int mf_fail(struct ferry_manifest *m, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
bool mf_is_damage(int code);
/* Damage met at any point ends the run with a message that says so. */
int mf_db_fail(struct ferry_manifest *m, const char *what);

/* core.c: statements. mf_stmt returns statement id of table t (its SQL
 * sql), prepared once, reset and with no bindings; NULL when it cannot be
 * prepared. */
sqlite3_stmt *mf_stmt(struct ferry_manifest *m, enum mf_table t, int id,
                      const char *sql);
/* Steps a statement that returns no rows. */
int mf_exec_stmt(struct ferry_manifest *m, sqlite3_stmt *s, const char *what);
/* The statement, with row bound to ?1, stepped once (no rows). */
int mf_exec_id(struct ferry_manifest *m, sqlite3_stmt *s, int64_t row,
               const char *what);
/* Runs sql (one or more statements, no parameters) with sqlite3_exec. */
int mf_exec_sql(struct ferry_manifest *m, const char *sql, const char *what);
/* Steps s, a query of one row, with arg bound to ?1 if it has one, and
 * stores its first n columns (NULL reads as 0) in v. s may be NULL (not
 * prepared): a read failure. */
int mf_select_ints(struct ferry_manifest *m, sqlite3_stmt *s, int64_t arg,
                   int64_t *v, int n);
void mf_finalize_all(struct ferry_manifest *m);

/* core.c: columns */
void mf_bind_bytes(sqlite3_stmt *s, int i, const char *p, size_t len);
void mf_bind_time(sqlite3_stmt *s, int i, struct ferry_time t);
struct ferry_time mf_column_time(sqlite3_stmt *s, int col);
/* Text of a blob column, NUL-terminated by SQLite ("" for an empty one). */
const char *mf_column_str(sqlite3_stmt *s, int col);
/* size, mtime, ctime, mode, uid, gid, dev, ino to first .. first + 7 */
void mf_bind_stat(sqlite3_stmt *s, int first, const struct ferry_stat *st);
/* f's side, step and errno to first .. first + 2 (fail_side, fail_step,
 * fail_errno: sql/005_failure.sql); left NULL when f is NULL */
void mf_bind_failure(sqlite3_stmt *s, int first, const struct ferry_failure *f);
/* Binds path and the range of its subtree, ["path/", "path0") ('0'
 * follows '/'), to the parameters i, i + 1 and i + 2; ENOMEM or 0. */
int mf_bind_subtree(sqlite3_stmt *s, int i, const char *path, size_t len);
enum ferry_ftype mf_ftype_of(uint32_t mode);
/* The length of path's parent ("" for a top-level name). */
size_t mf_parent_len(const char *path, size_t len);

/* open.c: opens m->db (name with oflags, or immutable: reader.c) */
int mf_open_db(struct ferry_manifest *m, const char *name, int oflags,
               bool immutable);
int mf_check_identity(struct ferry_manifest *m);
int mf_pragma_int(struct ferry_manifest *m, int id, int64_t *v);
/* The schema version of the open file (PRAGMA user_version): a manifest
 * read without write access is not migrated. */
int mf_schema_version(struct ferry_manifest *m, int64_t *version);

/* reader.c: read-only access for `ferry status` */
int mf_open_reader(struct ferry_manifest *m, bool wal_frames);
/* After an immutable read: nobody wrote the main file meanwhile. */
bool mf_still_alone(const struct ferry_manifest *m);

/* links.c: the hl column for a new or changed row (0: NULL) */
int mf_hardlink_of(struct ferry_manifest *m, const struct ferry_stat *st,
                   bool hard_links, int64_t self, int64_t *hl);

#endif
