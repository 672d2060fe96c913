-- ferry manifest, schema version 9: large files in chunks (src/chunks.h).
--
--   partial   one row per file row whose temp file in DST holds chunks
--             of an unfinished copy: the temp file's identity, and SRC
--             as the chunks were read from it. A resumed run keeps them
--             only when both are still so; the row goes when the file is
--             done, changed, or started again.
--   chunks    the XXH3-128 of each chunk of a file copied in chunks
--             (idx from 0, chunk_size bytes each but the last), for an
--             unfinished copy (its partial row says where) and for a done
--             file (--verify names the chunks that differ: bad = 1, and
--             the next run rewrites only those).
-- Both go with their file row (the code deletes them: ferry enables no
-- foreign keys).
CREATE TABLE partial (
        file_id INTEGER PRIMARY KEY,
        chunk_size INTEGER NOT NULL,
        tmp_dev INTEGER NOT NULL,
        tmp_ino INTEGER NOT NULL,
        src_size INTEGER NOT NULL,
        src_mtime_ns INTEGER NOT NULL,
        src_ctime_ns INTEGER NOT NULL,
        src_dev INTEGER NOT NULL,
        src_ino INTEGER NOT NULL
);
CREATE TABLE chunks (
        file_id INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        chunk_size INTEGER NOT NULL,
        hash BLOB NOT NULL,
        bad INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (file_id, idx)
) WITHOUT ROWID;
