-- Version 9. Selection options in a shared job (--include, --exclude,
-- --min-size, --max-size; src/shared/select.c).
--
-- jobs.selection: the selection of scan generation selection_gen, as its
--   first host gave it (a canonical text of the rules in order and the
--   sizes; '' for none). Every host of one gen scans with one selection:
--   the first to get there records its own, a host with another is
--   refused until the gen is over; the next gen may take another.
-- A row of an older gen that a finished scan did not see, which the
--   selection leaves out, is not gone from SRC: it takes the gen (so it is
--   not marked removed) and keeps its state, and a removed row that the
--   selection leaves out is not deleted by --delete (as on a single host:
--   a path left out is never a source deletion).
ALTER TABLE jobs ADD COLUMN selection text;
ALTER TABLE jobs ADD COLUMN selection_gen bigint;
