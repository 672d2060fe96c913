#!/bin/bash
# t82-pg-delete: --delete in a shared job (issue 14: end-of-run work done
# once, by whichever hosts get there; DESIGN.md rule 9) against a
# throw-away cluster on a Unix socket. SRC is behind bench/slowfs (2 ms an
# operation), so that two hosts started together both join a run. Proves:
#  - a run again without --delete leaves DST's copies of what SRC lost
#    (rows removed, 5); the next run with --delete, by two hosts at once,
#    deletes them: both exit 0, their summaries' deletions add up to the
#    files and directories ferry wrote that SRC lost (nothing deleted
#    twice), DST is SRC plus what ferry must keep (rsync -anci: nothing
#    to do, directory times too; diff -r against the expected tree):
#    a DST file a user rewrote is not deleted ("was changed since ferry
#    copied it"), nor a removed directory holding a user's file ("not
#    empty"); psql: no removed file row left, only that directory's row,
#    every job's counts are psql's counts of its rows; --verify exit 0;
#  - a deletion in a directory whose metadata another host's claim holds
#    (psql plays it) takes the directory from that claim and applies it
#    again (that host may have applied its times before the entry left);
#  - a removed file's copy already gone from DST (a host killed after its
#    unlink, before its outcome): forgotten, its directory's times applied
#    again (rsync -anci);
#  - SRC looks emptied below its top level (300 of its 340 files gone):
#    --delete deletes nothing and exits 25, saying --delete-anyway; the
#    same command with --delete-anyway deletes them (exit 0, rsync -anci);
#  - a directory SRC cannot list: --delete deletes nothing (a file removed
#    elsewhere stays in DST), exit 23, saying why; readable again, the
#    next --delete run (--durability=file) deletes it.
# --max-delete: t87-pg-max-delete.
# Skips, saying why, without root, PostgreSQL, rsync or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start rsync
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'del'"; }
counts_ok() {
	local wrong
	wrong=$(pg_counts_wrong)
	check "$1" test -z "$wrong"
	[[ -z $wrong ]] || printf '%s\n' "$wrong" | show -
}
# deleted FILE...: the sum of the summaries' "N deleted"
deleted() {
	sed -n 's/.* \([0-9][0-9]*\) deleted,.*/\1/p' "$@" | awk '{n += $1} END {print n + 0}'
}
# same: rsync finds nothing to do from SRC to DST (times of directories
# too), the job's mark aside
same() {
	rsync -anci --exclude .ferry-job src/ dst/ >"$LOG/rsync" 2>&1 && test ! -s "$LOG/rsync"
}

mkdir -p src
for d in 1 2 3 4; do
	mkdir "src/d$d"
	for f in 1 2 3 4 5 6 7 8; do echo "file $d $f" >"src/d$d/f$f"; done
done
mkdir -p src/d4/s/deep src/d2/u src/d5/many
for f in 1 2 3; do echo "s $f" >"src/d4/s/f$f"; done
echo deep >src/d4/s/deep/x
for f in 1 2; do echo "u $f" >"src/d2/u/f$f"; done
echo top >src/top1
echo top >src/top2
for i in $(seq 1 300); do echo "many $i" >"src/d5/many/m$i"; done
mkdir -p "$MNT"
"$SLOWFS" --latency-us 2000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
TWO_HOSTS_JOB=del
fy() { "$FERRY" --manifest "$URL" --job-name del -j 4 "$@" "$MNT" "$T/dst"; }

# ---- the first run -----------------------------------------------------------
run fy
check "first run: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src dst

# ---- SRC loses some; a run without --delete keeps their copies -----------
rm src/d3/f1 src/top1
rm -r src/d4/s
echo "a user's own words" >dst/d1/f8 # DST, changed since ferry copied it
rm src/d1/f8                         # and gone from SRC
echo "mine" >dst/d2/u/mine           # a user's file in a directory SRC loses
rm -r src/d2/u
sleep 1.2
run fy
check "SRC lost files, a run without --delete: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... DST keeps every copy (0 deleted)" eval 'test -f dst/d3/f1 && test -f dst/top1 &&
	test -f dst/d4/s/deep/x && test -f dst/d2/u/f1' && grep -q " 0 deleted," "$LOG/err"
removed=$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")
check "... psql: their 9 rows are removed (5) (got $removed)" test "$removed" = 9

# ---- two hosts run it with --delete --------------------------------------
rm -rf exp && cp -a src exp
mkdir -p exp/d2/u && cp -a dst/d2/u/mine exp/d2/u/ && cp -a dst/d1/f8 exp/d1/f8
sleep 1.2
two_hosts --delete
check "two hosts with --delete at once: both exit 0 (got $R1 $R2)" \
	test "$R1 $R2" = "0 0" || show "$T/h1.out.err"
# d3/f1 top1 d4/s/{f1,f2,f3,deep/x} d2/u/{f1,f2} and d4/s/deep d4/s
n=$(deleted "$T/h1.out.err" "$T/h2.out.err")
check "... their deletions add up to the 10 entries ferry wrote that SRC lost (got $n)" \
	test "$n" = 10 || show "$T/h2.out.err"
check "... both joined the run (one generation, 3)" \
	test "$(sql "SELECT gen FROM ferry.jobs WHERE id = $(jid)")" = 3
check "... DST is SRC, the user's rewritten file and the directory with the user's file (diff -r)" \
	diff -r -x .ferry-job exp dst
check "... rsync -anci src/ dst/: nothing to do (directories' times too)" same ||
	show "$LOG/rsync"
check "... the rewritten file: not deleted, and said so" \
	grep -q "d1/f8': not deleted: it was changed since ferry copied it" "$T/h1.out.err" "$T/h2.out.err"
check "... the directory with the user's file: not deleted, and said so" \
	grep -q "d2/u': directory not deleted: Directory not empty" "$T/h1.out.err" "$T/h2.out.err"
check "... psql: no removed file row left" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")" = 0
check "... psql: of the removed directories only d2/u's row stays" \
	test "$(sql "SELECT string_agg(convert_from(path, 'UTF8'), ',') FROM ferry.dirs d
		WHERE job = $(jid) AND gen < (SELECT gen FROM ferry.jobs WHERE id = $(jid))")" = d2/u
counts_ok "... every job's counts are psql's counts of its rows"
run "$FERRY" --verify --manifest "$URL" --job-name del "$MNT" "$T/dst"
check "... --verify: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
run fy --delete
check "... the same command again: exit 0, nothing deleted (got $RC)" \
	eval 'test "$RC" = 0 && grep -q " 0 deleted," "$LOG/err"' || show "$LOG/err"

# ---- a deletion in a directory another host's metadata claim holds --------
# that host may have applied the directory's times before the entry left:
# the deletion takes the directory from its claim (a late outcome of that
# claim is refused) and it is applied again. psql plays the other host: a
# claim of d3's metadata, leased for an hour, taken after a run without
# --delete marked d3/f3 removed
rm src/d3/f3
sleep 1.2
run fy
check "d3/f3 gone, a run without --delete: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
d3="job = $(jid) AND path = convert_to('d3', 'UTF8')"
sql "UPDATE ferry.dirs SET state = 0, claim_token = 999999, claimed_by = 'ghost',
	lease_until = now() + interval '1 hour' WHERE $d3" >/dev/null
run timeout 30 "$FERRY" --manifest "$URL" --job-name del -j 4 --delete "$MNT" "$T/dst"
check "... another host's claim holds d3's metadata, --delete: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... d3/f3 deleted" test ! -e dst/d3/f3
check "... psql: d3 taken from that claim, and applied (1)" \
	test "$(sql "SELECT coalesce(claim_token, 0) <> 999999, state FROM ferry.dirs WHERE $d3")" = "t|1"
check "... rsync -anci src/ dst/: nothing to do" same || show "$LOG/rsync"
# (had it stayed, every later run would wait an hour for that claim)
sql "UPDATE ferry.dirs SET lease_until = NULL WHERE claim_token = 999999" >/dev/null

# ---- a copy already gone from DST when its deletion comes ------------------
# as a host killed after its unlink and before its outcome leaves it: the
# row is forgotten, and the directory, whose times the unlink changed, is
# applied again
rm src/d4/f8
sleep 1.2
run fy
check "d4/f8 gone, a run without --delete: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
rm dst/d4/f8
sleep 1.1 # d4's time in DST is the unlink's, not SRC's
run fy --delete
check "... its copy gone from DST before --delete: exit 0, nothing deleted (got $RC)" \
	eval 'test "$RC" = 0 && grep -q " 0 deleted," "$LOG/err"' || show "$LOG/err"
check "... rsync -anci src/ dst/: nothing to do (d4's times applied again)" same ||
	show "$LOG/rsync"
check "... psql: no removed file row left" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 5")" = 0

# ---- SRC looks emptied below its top level ---------------------------------
rm -f src/d5/many/*
sleep 1.2
run fy --delete
check "300 of 340 files gone at once, --delete: exit 25 (got $RC)" test "$RC" = 25 ||
	show "$LOG/err"
check "... saying why and how to insist" \
	eval 'grep -q "delete refused: 300 of the" "$LOG/err" && grep -q -- "--delete-anyway" "$LOG/err"' ||
	show "$LOG/err"
check "... nothing deleted: DST's d5/many keeps its 300 files" \
	test "$(find dst/d5/many -type f | wc -l)" = 300
run fy --delete --delete-anyway
check "--delete --delete-anyway: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... 300 deleted" grep -q " 300 deleted," "$LOG/err" || show "$LOG/err"
check "... rsync -anci src/ dst/: nothing to do" same || show "$LOG/rsync"

# ---- a directory that cannot be listed ---------------------------------------
# slowfs (mounted by root: allow_other, default_permissions) checks modes as
# SRC's kernel would: d2 at mode 0 cannot be read by an unprivileged ferry
rm src/d3/f2
chmod -R a+rX src && chmod 0 src/d2
chown -R nobody dst
sleep 1.2 # slowfs's attributes, cached for a second, are read again
setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
	"$FERRY" --manifest "$URL" --job-name del -j 4 --delete "$MNT" "$T/dst" >"$LOG/out" 2>"$LOG/err"
RC=$?
check "d2 unreadable, a file gone elsewhere, --delete: exit 23 (got $RC)" test "$RC" = 23 ||
	show "$LOG/err"
check "... nothing deleted (d3/f2 stays in DST), saying why" \
	eval 'test -f dst/d3/f2 && grep -q "the scan had errors: nothing deleted" "$LOG/err"' ||
	show "$LOG/err"
chmod 755 src/d2
chown -R root:root dst # SRC's owner (rsync -a compares owners)
sleep 1.2
run fy --delete --durability=file # each deletion's directory fsynced
check "d2 readable again, --delete --durability=file: exit 0 (got $RC)" test "$RC" = 0 ||
	show "$LOG/err"
check "... d3/f2 deleted now" test ! -e dst/d3/f2
check "... rsync -anci src/ dst/: nothing to do" same || show "$LOG/rsync"
counts_ok "... every job's counts are psql's counts of its rows (at the end)"
finish
