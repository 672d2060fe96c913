/*
 * mvfs.h - the manifest's fault injection VFS (test builds only).
 *
 *   sqlite3_open_v2(path, &db, flags, ferry_mvfs_name());
 *
 * ferry_mvfs_name returns the name of an SQLite VFS whose writes and syncs
 * fail as FERRY_FAULT's "mwrite" and "msync" ops say, or NULL (SQLite's
 * default VFS) when no such fault is asked for or in a build without
 * FERRY_TESTING.
 */
#ifndef FERRY_MVFS_H
#define FERRY_MVFS_H

const char *ferry_mvfs_name(void);

#endif
