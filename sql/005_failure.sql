-- ferry manifest, schema version 5: a failure is data.
--
-- A failed file row (state 2) and a directory with an error say, beside
-- the message in error, what failed: fail_side (1 SRC, 2 DST, 3 the
-- manifest), fail_step (the step, enum ferry_step in include/ferry.h:
-- 1 open, 2 opendir, 3 readdir, 4 stat, 5 read, ... 40 and up for
-- refusals such as 41, a name DST cannot hold) and fail_errno (the errno,
-- 0 for a refusal). `ferry status` groups failures by these three.
-- Decisions never read error: it is the message for a human.
--
-- Rows written by an older version keep their message and get NULLs here:
-- their cause is not known. Every write of error writes these too.
ALTER TABLE files ADD COLUMN fail_side INTEGER;
ALTER TABLE files ADD COLUMN fail_step INTEGER;
ALTER TABLE files ADD COLUMN fail_errno INTEGER;
ALTER TABLE dirs ADD COLUMN fail_side INTEGER;
ALTER TABLE dirs ADD COLUMN fail_step INTEGER;
ALTER TABLE dirs ADD COLUMN fail_errno INTEGER;
