-- Version 13. A large file's chunks in a shared job (src/chunks.h, the
-- SQLite manifest's sql/009_chunks.sql): a host that copies a file of 64
-- MiB or more in chunks records each chunk once it is durable in the temp
-- file, so that when the host dies the host that claims the row next takes
-- those chunks from that temp file (into a temp file of its own: a host
-- only cut off may still write a last block into the one it holds) instead
-- of reading them from SRC again.
--
-- partial: the temp file the chunks are in and SRC as they were read from
--   it (size and times: not its device or inode, which may differ between
--   hosts' mounts of one share, and a row may hold another host's; nor
--   the temp's device, for the same reason: the copier checks the temp's
--   inode and size, and reads every chunk of an earlier run back against
--   its hash before it counts it). A record of another temp, source or
--   chunk size replaces the rows of before.
-- chunks: each chunk's XXH3-128. A chunk is recorded only under the claim
--   that holds the row (its token), while the row is pending: a late host
--   records nothing. The rows go with their file row (a done outcome drops
--   them: src/shared/chunks.c; a deletion cascades).
CREATE TABLE partial (
    file         bigint PRIMARY KEY REFERENCES files ON DELETE CASCADE,
    chunk_size   bigint NOT NULL,
    tmp_ino      bigint NOT NULL,
    src_size     bigint NOT NULL,
    src_mtime_ns bigint NOT NULL,
    src_ctime_ns bigint NOT NULL
);
CREATE TABLE chunks (
    file bigint NOT NULL REFERENCES partial ON DELETE CASCADE,
    idx  integer NOT NULL,
    hash bytea NOT NULL,
    PRIMARY KEY (file, idx)
);
