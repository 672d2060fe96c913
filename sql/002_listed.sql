-- ferry manifest, schema version 2: a re-run writes only what changed.
--
-- Version 1 rewrote the gen of every file row on every scan, so a no-op
-- re-run wrote the whole files table to the WAL. Now a directory records
-- the scan that saw all of its files:
--
-- dirs.listed: the generation of the last scan that read this directory
-- completely and saw every one of its file rows that is not removed; -1
-- while a scan marks its rows one by one (a new or changed directory).
-- A file row is part of scan G when files.gen = G (it was written by that
-- scan) or when its directory's listed = G, and its state is not 5.
--
-- File state 5 (removed): the entry is no longer in SRC. Set for the rows a
-- marking scan did not see, for the rows of directories the scan no longer
-- found, and for the files below a directory that became a file.
-- Existing directories start at -1: the first scan by this version marks.
ALTER TABLE dirs ADD COLUMN listed INTEGER NOT NULL DEFAULT -1;

-- --delete and the temp file clean-up look for removed and vanished rows.
CREATE INDEX files_removed ON files (state) WHERE state IN (4, 5);
