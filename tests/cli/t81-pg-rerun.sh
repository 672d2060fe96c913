#!/bin/bash
# t81-pg-rerun: a shared job run again (issue 14; DESIGN.md "Incremental
# re-run") against a throw-away cluster on a Unix socket: the same
# command on a job that is over scans SRC again and copies only what
# changed. SRC is behind bench/slowfs (2 ms an operation), so that two
# hosts started together both join the second scan. Proves:
#  - after SRC changes below its top level (a new file and directory, a
#    file rewritten with its size kept, one grown, one whose mode changed,
#    a file and a directory removed) and a DST file a user rewrote whose
#    SRC file
#    changed too, two hosts run the job again: DST is SRC plus what SRC
#    lost (no --delete) plus the user's file, which is left alone
#    (rule 9: "was changed since ferry copied it", exit 23); every file
#    that did not change keeps its DST inode (not copied again), every
#    changed one has a new one;
#  - psql: the job moved one scan generation (2), not one per host; the
#    removed file and directory's rows are removed (5), the user's file
#    failed; every job's counts are psql's counts of its rows;
#  - once the user removes their file, the same command copies it: exit
#    0, rsync -anci finds nothing to do (times and modes of directories
#    too: a directory whose mode changed, or that got a file or a new
#    directory, has its metadata applied again); a run with nothing
#    changed copies nothing (no DST inode changes, its host's files_done
#    0) and applies no directory's metadata again but the root's
#    (DST's ctimes);
#  - a directory that cannot be listed in a run again keeps the rows
#    below it: nothing is marked removed (its files stay done); once it
#    is gone from SRC, the next run lists it as empty and removes its
#    rows (exit 0, not 23 at every run);
#  - SRC changed at its top level (the job's fingerprint of SRC): a job
#    that is over takes it when most of its top-level names are still
#    there (one new, one gone of 5: exit 0, the new one copied, the gone
#    one's rows removed); another tree is refused (exit 2, saying how
#    many names it kept) and nothing changes;
#  - a host whose scan generation is over (psql moves the job on while
#    it runs) claims nothing more: exit 0, saying so, nothing removed;
#  - a directory of this generation gone when its turn to be listed came
#    (psql plays its parent's listing): exit 24, as a file gone before its
#    copy, none made in DST; the next run does not see it: exit 0.
# Skips, saying why, without root, PostgreSQL, rsync or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start rsync
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'r'"; }
row() { # row DIR NAME: the file row's state
	sql "SELECT f.state FROM ferry.files f JOIN ferry.dirs d ON d.id = f.dir
	     WHERE f.job = $(jid) AND d.path = convert_to('$1', 'UTF8')
	     AND f.name = convert_to('$2', 'UTF8')"
}
# inodes: "inode path" of every file in DST, by path
inodes() { (cd dst && find . -type f -printf '%i %P\n' | sort -k2); }
counts_ok() {
	local wrong
	wrong=$(pg_counts_wrong)
	check "$1" test -z "$wrong"
	[[ -z $wrong ]] || printf '%s\n' "$wrong" | show -
}

mkdir -p src
for d in 1 2 3 4 5; do
	mkdir "src/d$d"
	for f in 1 2 3 4 5 6 7 8; do echo "file $d $f" >"src/d$d/f$f"; done
done
mkdir src/d4/s && for f in 1 2 3; do echo "s $f" >"src/d4/s/f$f"; done
mkdir src/d2/quiet
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
TWO_HOSTS_JOB=r
fy() { "$FERRY" --manifest "$URL" --job-name r -j 4 "$@" "$MNT" "$T/dst"; }

# ---- the first run -------------------------------------------------------
run fy
check "first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src dst
inodes >"$T/ino.1"

# ---- SRC and DST change --------------------------------------------------
echo "file 2 X" >src/d2/f1 # the same size, a new mtime
touch -d '2001-02-03 04:05:06' src/d2/f1
echo "more" >>src/d2/f2
chmod 600 src/d5/f1
chmod 750 src/d4 # a directory's own metadata
# a new directory in d2/quiet, whose own time stays: made in DST, the
# directory made changes quiet's time there, which is applied again
t=$(stat -c %y src/d2/quiet)
mkdir src/d2/quiet/new
touch -d "$t" src/d2/quiet
echo "new" >src/d1/new
mkdir src/d1/d6 && echo "six" >src/d1/d6/g
rm src/d3/f1
rm -r src/d4/s
echo "a user's own words" >dst/d1/f2 # DST, changed since ferry copied it
echo "file 1 2, changed" >src/d1/f2  # and SRC's too
sleep 1.2 # the user's change is older than the next run's start (its second)

# ---- run again by two hosts at once --------------------------------------
two_hosts
check "two hosts run the job again: both exit 23, the user's file refused (got $R1 $R2)" \
	test "$R1 $R2" = "23 23" || show "$T/h1.out.err"
check "... psql: the refusal says why" \
	eval '[[ $(sql "SELECT f.error FROM ferry.files f JOIN ferry.dirs d ON d.id = f.dir
		WHERE f.job = $(jid) AND d.path = convert_to('"'d1'"', '"'UTF8'"')
		AND f.name = convert_to('"'f2'"', '"'UTF8'"')") == *"was changed since ferry copied it"* ]]'
rm -rf exp && cp -a src exp
cp -a dst/d3/f1 exp/d3/f1 && cp -a dst/d4/s exp/d4/s && cp -a dst/d1/f2 exp/d1/f2
check "... DST is SRC, plus what SRC lost, plus the user's file (diff -r)" \
	diff -r -x .ferry-job exp dst
check "... the user's words are still there" grep -qx "a user's own words" dst/d1/f2
inodes >"$T/ino.2"
changed="d1/f2 d2/f1 d2/f2 d5/f1"
same=$(join -1 2 -2 2 "$T/ino.1" "$T/ino.2" | awk '$2 == $3 {print $1}' | sort | tr '\n' ' ')
want=$(awk '{print $2}' "$T/ino.1" | grep -vxE 'd2/f1|d2/f2|d5/f1' | sort | tr '\n' ' ')
check "... every file that did not change kept its DST inode (not copied again)" \
	test "$same" = "$want"
for f in d2/f1 d2/f2 d5/f1; do
	check "... $f changed: a new copy (inode)" \
		test "$(grep " $f\$" "$T/ino.1" | cut -d' ' -f1)" != "$(grep " $f\$" "$T/ino.2" | cut -d' ' -f1)"
done
check "... d5/f1's new mode is in DST" test "$(stat -c %a dst/d5/f1)" = 600
check "... d2/f1's time is SRC's" test "$(stat -c %Y dst/d2/f1)" = "$(stat -c %Y src/d2/f1)"
check "... d4's new mode is in DST" test "$(stat -c %a dst/d4)" = 750
check "psql: the job moved one generation (2), not one per host" \
	test "$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")" = 2
check "... the removed file's row and the removed directory's are removed (5)" \
	test "$(row d3 f1) $(sql "SELECT string_agg(f.state::text, ',') FROM ferry.files f
		JOIN ferry.dirs d ON d.id = f.dir WHERE f.job = $(jid)
		AND d.path = convert_to('d4/s', 'UTF8')")" = "5 5,5,5"
check "... the user's file failed (2), the new ones done (1)" \
	test "$(row d1 f2) $(row d1 new) $(row d1/d6 g)" = "2 1 1"
counts_ok "... every job's counts are psql's counts of its rows"

# ---- the user gives the name back; then a run with nothing to do ---------
rm dst/d1/f2
sleep 1.2
run fy
check "the user's file removed, the same command: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
rsync -anci --exclude .ferry-job src/ dst/ >"$LOG/rsync" 2>&1
check "... rsync -anci: nothing left to do" test ! -s "$LOG/rsync" || show "$LOG/rsync"
inodes >"$T/ino.3"
# DST's directories but its root (whose metadata a run again applies)
dirtimes() { (cd dst && find . -mindepth 1 -type d -printf '%C@ %P\n' | sort -k2); }
dirtimes >"$T/ctimes.3"
sleep 1.1 # a change of a directory's ctime would show
run fy
check "nothing changed, the same command: exit 0 (got $RC)" test "$RC" = 0
dirtimes >"$T/ctimes.4"
check "... no directory's metadata applied again, but the root's (DST's ctimes)" \
	diff "$T/ctimes.3" "$T/ctimes.4"
nsrc=$(find src -type f | wc -l)
check "... its summary: 0 files copied, all $nsrc unchanged" \
	grep -q "0 files copied (0 B), $nsrc unchanged" "$LOG/err" || show "$LOG/err"
inodes >"$T/ino.4"
check "... no DST file copied again (inodes)" diff "$T/ino.3" "$T/ino.4"
check "... its host's files_done: 0" \
	test "$(sql "SELECT files_done FROM ferry.hosts WHERE job = $(jid)
		ORDER BY joined DESC LIMIT 1")" = 0
check "... the job is at its fourth generation" \
	test "$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")" = 4

# ---- a directory that cannot be listed in a run again, then gone ----------
# slowfs (mounted by root: allow_other, default_permissions) checks modes
# as SRC's kernel would: d2/locked at mode 0 cannot be read by an
# unprivileged ferry; the rest of SRC and DST are made its to read and
# write
mkdir src/d2/locked && for f in 1 2; do echo "locked $f" >"src/d2/locked/f$f"; done
sleep 1.2
run fy
check "d2/locked new: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
chmod -R a+rX src && chmod 0 src/d2/locked
chown -R nobody dst
sleep 1.2 # slowfs's attributes, cached for a second, are read again
setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
	"$FERRY" --manifest "$URL" --job-name r -j 4 "$MNT" "$T/dst" >"$LOG/out" 2>"$LOG/err"
RC=$?
check "d2/locked unreadable, run again: exit 23 (got $RC)" test "$RC" = 23 || show "$LOG/err"
locked() { # the states of d2/locked's listing and of its files
	sql "SELECT d.list_state || ' ' || string_agg(DISTINCT f.state::text, ',')
	     FROM ferry.dirs d JOIN ferry.files f ON f.dir = d.id WHERE d.job = $(jid)
	     AND d.path = convert_to('d2/locked', 'UTF8') GROUP BY d.list_state"
}
check "... psql: its listing failed (2), its files not marked removed (still done)" \
	test "$(locked)" = "2 1"
check "... DST's d2/locked untouched" diff -r src/d2/locked dst/d2/locked
counts_ok "... every job's counts are psql's counts of its rows (after the failed listing)"
# gone from SRC: listed as empty, not a failure at every run from now on
rm -rf src/d2/locked
sleep 1.2
run fy
check "d2/locked gone from SRC, the same command: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... psql: listed (1), its files removed (5)" test "$(locked)" = "1 5"
check "... its DST copy stays (no --delete)" test -f dst/d2/locked/f1
run fy
check "... and the next run: exit 0 (got $RC)" test "$RC" = 0

# ---- SRC changed at its top level ------------------------------------------
# the fingerprint of SRC is its top level: a job that is over takes a SRC
# that kept most of the job's names there (a new entry, one gone), and
# refuses one that did not (another tree)
echo top >src/new-at-top
rm -r src/d3
sleep 1.2
two_hosts
check "SRC's top level changed (one new, one gone of 5), two hosts at once: both exit 0 (got $R1 $R2)" \
	test "$R1 $R2" = "0 0" || show "$T/h1.out.err"
check "... the new entry copied, d3 left in DST" \
	eval 'cmp src/new-at-top dst/new-at-top && test -d dst/d3'
check "... d3's rows removed" \
	test "$(sql "SELECT string_agg(DISTINCT f.state::text, ',') FROM ferry.files f
		JOIN ferry.dirs d ON d.id = f.dir WHERE f.job = $(jid)
		AND d.path = convert_to('d3', 'UTF8')")" = 5
removed=$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")
mkdir other && for i in 1 2 3; do echo "other $i" >"other/o$i"; done
gen=$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")
inodes >"$T/ino.5"
run "$FERRY" --manifest "$URL" --job-name r -j 4 "$T/other" "$T/dst"
check "another SRC (none of the job's names): exit 2 (got $RC)" test "$RC" = 2
check "... saying SRC's top level differs, and how much" \
	eval 'grep -q "top level" "$LOG/err" && grep -q "only 0 of the 5 names" "$LOG/err"' ||
	show "$LOG/err"
check "... nothing changed: the job's generation, DST" \
	eval 'test "$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")" = "$gen" &&
	      inodes | diff -q "$T/ino.5" - >/dev/null && test ! -e dst/o1'

# ---- a host whose generation is over ---------------------------------------
# another host moved the job on while this one ran (a host that joined
# just before the job ended, another that ran it again): psql moves it by
# hand, mid-scan; the host claims nothing of the next generation, says
# so, and ends with exit 0, having marked nothing removed
# (paused first, so that the move comes before its first claim)
echo more >src/d1/more
sleep 1.2
gen=$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")
expect_code 0 "$FERRY" set --manifest "$URL" --job-name r --pause
bg "$FERRY" --manifest "$URL" --job-name r -j 4 "$MNT" "$T/dst"
moved() { [[ $(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)") -gt $gen ]]; }
wait_until 30 moved || die "the host did not start the job's next scan"
sql "UPDATE ferry.jobs SET gen = gen + 1 WHERE id = $(jid)" >/dev/null
expect_code 0 "$FERRY" set --manifest "$URL" --job-name r --resume
bg_wait
check "the job moved on under a running host: exit 0 (got $BG_RC)" test "$BG_RC" = 0 ||
	show "$LOG/bg.err"
check "... saying this host's part is over" grep -q "this host's part is over" "$LOG/bg.err"
check "... it claimed nothing of the next generation (d1/more not copied)" test ! -e dst/d1/more
check "... nothing marked removed by it" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")" = "$removed"
sql "UPDATE ferry.jobs SET gen = gen - 1 WHERE id = $(jid)" >/dev/null
run fy
check "... the job finished by the same command: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... d1/more copied" cmp src/d1/more dst/d1/more

# ---- a directory gone between its parent's listing and its own -------------
# psql plays the parent's listing of this generation: a row for d1/gone,
# a directory that is not in SRC, put on the job's scan queue
sql "INSERT INTO ferry.dirs (job, parent, path, gen)
	SELECT j.id, d.id, convert_to('d1/gone', 'UTF8'), j.gen FROM ferry.jobs j
	JOIN ferry.dirs d ON d.job = j.id AND d.path = convert_to('d1', 'UTF8')
	WHERE j.id = $(jid)" >/dev/null
run fy
check "a directory gone when its turn to be listed came: exit 24, as a vanished file's (got $RC)" \
	test "$RC" = 24 || show "$LOG/err"
check "... no directory made for it in DST" test ! -e dst/d1/gone
run fy
check "... the next run does not see it: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
counts_ok "... every job's counts are psql's counts of its rows (at the end)"
finish
