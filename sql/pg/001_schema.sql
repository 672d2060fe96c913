-- ferry's shared manifest (PostgreSQL), schema version 1. Everything lives
-- in the schema "ferry", so the database may hold other things too. The
-- migrations run at connect, in one transaction, under an advisory lock
-- (src/manifest_pg/conn.c); schema_version is made there, not here.
--
-- Several jobs share one database: every row belongs to one job. Names and
-- paths are bytea: a name is bytes, not text. The values of type and state
-- are the SQLite manifest's (src/manifest_types.h): types 1 regular,
-- 2 symlink, 3 special; states 0 pending, 1 done, 2 failed, 3 skipped,
-- 4 vanished, 5 removed.
--
-- Claims (the hand-out to hosts): a row is claimable when it is pending and
-- its lease is none or over. A claim sets claim_token (one value of
-- claim_tokens for the whole batch), lease_until and claimed_by; a renewal
-- moves lease_until; the outcome is written only where claim_token is still
-- the claim's, and the row keeps that token as the record of which claim
-- completed it.

CREATE TABLE jobs (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name    text NOT NULL UNIQUE,
    -- what SRC and DST are, from their manifests (not their paths: the
    -- mount points may differ per host)
    src_fp  text NOT NULL,
    dst_fp  text NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);

-- The hosts that joined a job; last_seen moves with every renewal.
CREATE TABLE hosts (
    job       bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
    host      text NOT NULL,
    joined    timestamptz NOT NULL DEFAULT now(),
    last_seen timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job, host)
);

CREATE SEQUENCE claim_tokens;

-- One row per directory of SRC, path relative to SRC ('' for SRC itself).
-- list_state is the shared scan queue: 0 to list, 1 listed, 2 could not be
-- read (error says why). state is the SQLite dirs.state (0: mode and times
-- still to apply in DST). The metadata is known once the directory is
-- listed (NULL before).
CREATE TABLE dirs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job         bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
    parent      bigint REFERENCES dirs,
    path        bytea NOT NULL,
    list_state  smallint NOT NULL DEFAULT 0,
    state       smallint NOT NULL DEFAULT 0,
    mode        integer,
    uid         bigint,
    gid         bigint,
    mtime_ns    bigint,
    error       text,
    gen         bigint NOT NULL,
    claim_token bigint,
    lease_until timestamptz,
    claimed_by  text,
    UNIQUE (job, path)
);
CREATE INDEX dirs_to_list ON dirs (job, id) WHERE list_state = 0;
-- renewals find a claim's rows by its token
CREATE INDEX dirs_leased ON dirs (claim_token) WHERE list_state = 0;

-- One row per non-directory entry, as the SQLite files table has it for a
-- hand-out and its outcome. dev and ino are the unsigned values stored in
-- bigint (two's complement).
CREATE TABLE files (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job         bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
    dir         bigint NOT NULL REFERENCES dirs,
    name        bytea NOT NULL,
    type        smallint NOT NULL,
    size        bigint NOT NULL,
    mtime_ns    bigint NOT NULL,
    ctime_ns    bigint NOT NULL,
    mode        integer NOT NULL,
    uid         bigint NOT NULL,
    gid         bigint NOT NULL,
    dev         bigint NOT NULL,
    ino         bigint NOT NULL,
    hl          bigint,
    state       smallint NOT NULL DEFAULT 0,
    hash        bytea,
    attempts    integer NOT NULL DEFAULT 0,
    error       text,
    gen         bigint NOT NULL,
    claim_token bigint,
    lease_until timestamptz,
    claimed_by  text,
    UNIQUE (dir, name)
);
-- Small once a job is done: only rows still to copy.
CREATE INDEX files_pending ON files (job, id) WHERE state = 0;
CREATE INDEX files_leased ON files (claim_token) WHERE state = 0;
