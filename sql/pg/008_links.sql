-- Version 8. Hard links in a shared job (src/shared/scan.c, claims.c):
-- the names of one SRC inode are one file in DST, as on a single host.
--
-- files.nlink: the link count the listing saw (NULL: a row of an older
--   version).
-- files.lgroup: the inode number, as the listing host's mount numbers it,
--   of a file or special file (as cp -a and rsync -H link them) with more
--   than one name on SRC's own file system
--   (a mount below SRC keeps its names apart); NULL for every other row
--   and with --no-hard-links. A link group of gen g is the rows of g with
--   one lgroup, size and mtime_ns. Once the scan of g is over (no
--   directory left to list), a group with a row done in g hands out its
--   other rows as links to the lowest such row's copy; a group with none
--   hands out its lowest pending row for its data, and the others wait
--   until it is done (or failed: then each is copied on its own). A host
--   links a name only when SRC's name of the row it links to is the same
--   inode on its own mount (copy_link.c), so another host's numbering
--   never decides it alone.
-- A row listed again whose ctime moved while its link count moved too
--   and its inode number stayed (a name added or removed: cp -al, rm) is
--   not changed by that alone, as on a single host: a snapshot farm's next
--   snapshot adds links, not copies. A row of no known link count (NULL)
--   is changed by its ctime alone.
-- Before a name is linked, the host checks SRC's name of the row it links
--   to: the same inode as the name's, with the ctime that row recorded;
--   and DST's entry of it: still what ferry put there (rule 9). Else the
--   name's data is copied.
ALTER TABLE files ADD COLUMN nlink bigint;
ALTER TABLE files ADD COLUMN lgroup bigint;

-- A group's rows: its lowest done row and whether a lower row is pending.
CREATE INDEX files_lgroup ON files (job, lgroup, size, mtime_ns, id)
    WHERE lgroup IS NOT NULL;
