/*
 * manifest_types.h - the values a manifest row holds: file types, file-row
 * states and directory-row states, one definition for C and for SQL.
 *
 * Each value is a macro first and an enum constant second, so that the
 * statement strings in src/manifest/ are built from the same numbers
 * (MF_SQL_INT) instead of repeating them as literals; test_manifest checks
 * that the schema and migrations in sql/ use these numbers too. The row
 * lifecycle (which function moves a row from one state to another) is in
 * manifest.h. Kept apart from manifest.h so that batch.h, which carries
 * rows between threads, can include it without including the manifest.
 */
#ifndef FERRY_MANIFEST_TYPES_H
#define FERRY_MANIFEST_TYPES_H

/* files.type (dirs have a table of their own) */
#define MF_FT_REG     1
#define MF_FT_LINK    2
#define MF_FT_SPECIAL 3 /* fifo, device, socket */

/* files.state */
#define MF_ST_PENDING  0
#define MF_ST_DONE     1
#define MF_ST_FAILED   2
#define MF_ST_SKIPPED  3 /* special files */
#define MF_ST_VANISHED 4 /* gone between scan and copy */
#define MF_ST_REMOVED  5 /* no longer in SRC (sql/002_listed.sql) */

/* dirs.state */
#define MF_DS_TO_APPLY 0 /* mode and times still to be applied in DST */
#define MF_DS_APPLIED  1

/* files.applied, dirs.applied (sql/006_meta.sql): what of the metadata
 * ferry applied to the DST entry */
#define MF_AP_PERMS  1
#define MF_AP_OWNER  2
#define MF_AP_TIMES  4
#define MF_AP_XATTRS 8
#define MF_AP_ACLS   16
#define MF_AP_LINKS  32 /* a hardlink group's names are links in DST */
#define MF_AP_ATIMES 64

/* files.need: what a pending row needs */
#define MF_NEED_DATA 0 /* its data: a copy, or a link to its first name */
#define MF_NEED_META 1 /* its metadata only, applied in place */

/* dirs.listed while a scan marks the directory's rows one by one */
#define MF_LISTED_MARKING -1

/* A value above as an SQL literal: MF_SQL_INT(MF_ST_DONE) is "1". */
#define MF_SQL_STR_(x) #x
#define MF_SQL_INT(x)  MF_SQL_STR_(x)

/* Types of file rows. */
enum ferry_ftype {
        FT_REG = MF_FT_REG,
        FT_LINK = MF_FT_LINK,
        FT_SPECIAL = MF_FT_SPECIAL
};

/* File-row states, as stored in the manifest (manifest.h: lifecycle). */
enum ferry_state {
        ST_PENDING = MF_ST_PENDING,
        ST_DONE = MF_ST_DONE,
        ST_FAILED = MF_ST_FAILED,
        ST_SKIPPED = MF_ST_SKIPPED,
        ST_VANISHED = MF_ST_VANISHED,
        ST_REMOVED = MF_ST_REMOVED,
};

/* Directory-row states (dirs.state). */
enum ferry_dir_state {
        DS_TO_APPLY = MF_DS_TO_APPLY,
        DS_APPLIED = MF_DS_APPLIED,
};

#endif
