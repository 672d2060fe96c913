-- ferry manifest, schema version 1.
-- Names and paths are BLOBs: a name is bytes, not text.
-- File states: 0 pending, 1 done, 2 failed, 3 skipped (special file),
-- 4 vanished (gone between scan and copy). Types: 1 regular, 2 symlink,
-- 3 special (fifo, device, socket).

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value ANY
) WITHOUT ROWID;

-- One row per directory of SRC. path is relative to SRC ('' for SRC itself);
-- state 0 means its mode and times still have to be applied in DST; error
-- says why the last run could not read it or set its metadata.
CREATE TABLE dirs (
    id       INTEGER PRIMARY KEY,
    parent   INTEGER,
    path     BLOB NOT NULL UNIQUE,
    mode     INTEGER NOT NULL,
    uid      INTEGER NOT NULL,
    gid      INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    state    INTEGER NOT NULL DEFAULT 0,
    error    TEXT,
    gen      INTEGER NOT NULL
);

-- One row per non-directory entry. hl: NULL (not hardlinked), -1 (first
-- name of a hardlinked inode: copied with data), or the id of that first
-- name (linked to it in DST). hash: XXH3-128, canonical (big-endian) bytes.
CREATE TABLE files (
    id       INTEGER PRIMARY KEY,
    dir      INTEGER NOT NULL,
    name     BLOB NOT NULL,
    type     INTEGER NOT NULL,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    mode     INTEGER NOT NULL,
    uid      INTEGER NOT NULL,
    gid      INTEGER NOT NULL,
    dev      INTEGER NOT NULL,
    ino      INTEGER NOT NULL,
    hl       INTEGER,
    state    INTEGER NOT NULL DEFAULT 0,
    hash     BLOB,
    attempts INTEGER NOT NULL DEFAULT 0,
    error    TEXT,
    gen      INTEGER NOT NULL
);

CREATE UNIQUE INDEX files_by_name ON files (dir, name);
-- Small once a job is done: only rows still to copy.
CREATE INDEX files_pending ON files (state) WHERE state = 0;
CREATE INDEX files_by_inode ON files (ino, dev) WHERE hl IS NOT NULL;

CREATE TABLE runs (
    id       INTEGER PRIMARY KEY,
    started  INTEGER NOT NULL,
    finished INTEGER,
    result   INTEGER,
    pid      INTEGER NOT NULL,
    command  TEXT NOT NULL
);
