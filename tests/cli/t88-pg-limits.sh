#!/bin/bash
# t88-pg-limits: --bwlimit and --window in a shared job (issue 14), each
# a host's own (per host, its local clock), and `ferry set --bwlimit /
# --window` for every host of the job at once; against a throw-away
# cluster on a Unix socket. The clock: a test build reads
# FERRY_TEST_CLOCK=HH:MM instead of the real one (t67). Oracles: elapsed
# time as a lower bound only (a loaded machine is slower, never faster),
# DST's bytes (find), cmp and diff -r, psql for the rows. Proves:
#  - a host with --bwlimit 1M copies 6 MiB in no less than 4 s, and the
#    copy is SRC's (cmp);
#  - at 12:00 a host with --window 19:00-07:00 claims nothing for 3 s (no
#    byte in DST, no row done), saying so; `ferry set --window
#    11:00-13:00` (now inside) makes it copy and finish (exit 0), and set
#    prints the job's window;
#  - `ferry set --bwlimit 512K` holds a host run without --bwlimit to it
#    (2 MiB more in no less than 3 s); --bwlimit 0 and --window none are
#    printed as none.
# Skips, saying why, without root, PostgreSQL, or a test build.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
need_test_hooks
pg_need
pg_init
pg_start
URL=$PG_SOCK_URL
MIB=1048576
# JOB: the job's name, and its DST in $T/JOB
JOB=lim
fy() { "$FERRY" --manifest "$URL" --job-name $JOB -j 4 "$@" "$T/src" "$T/$JOB"; }
set_job() { "$FERRY" set --manifest "$URL" --job-name $JOB "$@"; }
jid() { sql "SELECT id FROM ferry.jobs WHERE name = '$JOB'"; }
dst_bytes() { find "$JOB" -type f ! -name .ferry-job -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
now() { date +%s.%N; }
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

mkdir src
for i in 1 2 3; do
	head -c $((2 * MIB)) /dev/urandom >"src/f$i" || die "src/f$i"
done

# ---- a host's own --bwlimit ------------------------------------------------
t0=$(now)
run fy --bwlimit 1M
t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
check "--bwlimit 1M, 6 MiB: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... no less than 4 s (took $t s)" at_least "$t" 4
check "... the copy is SRC's (diff -r)" diff -r -x .ferry-job src "$JOB"

# ---- a host's own --window, then the job's -------------------------------
JOB=win
export FERRY_TEST_CLOCK=12:00
spawn "$T/w.out" timeout 60 "$FERRY" --manifest "$URL" --job-name $JOB -j 4 --window 19:00-07:00 "$T/src" "$T/$JOB"
W=$SPAWNED
sleep 3
check "at 12:00, --window 19:00-07:00: nothing copied in 3 s ($(dst_bytes) bytes)" test "$(dst_bytes)" = 0
check "... psql: no row done" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 1")" = 0
check "... the host says it waits for its window" \
	grep -q "outside the window 19:00-07:00: nothing new is claimed until 19:00" "$T/w.out.err" ||
	show "$T/w.out.err"
check "... and is still running" kill -0 "$W"
run set_job --window 11:00-13:00
check "ferry set --window 11:00-13:00: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... prints the job's window" grep -q "^window: 11:00-13:00 (each host's local time)$" "$LOG/out" ||
	show "$LOG/out"
reap "$W"
check "... the host then copies the job and ends: exit 0 (got $RC)" test "$RC" = 0 || show "$T/w.out.err"
check "... saying it claims again" grep -q "inside the window 11:00-13:00: claiming again" "$T/w.out.err" ||
	show "$T/w.out.err"
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src "$JOB"
unset FERRY_TEST_CLOCK

# ---- the job's --bwlimit for every host ------------------------------------
JOB=lim
run set_job --bwlimit 512K --window none
check "ferry set --bwlimit 512K --window none: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... prints the limit per host" grep -q "^bwlimit per host: 524288 bytes/s (512.0 KiB/s)$" "$LOG/out" ||
	show "$LOG/out"
check "... and no window" grep -q "^window: none$" "$LOG/out" || show "$LOG/out"
head -c $((2 * MIB)) /dev/urandom >src/f4
sleep 1.1
t0=$(now)
run fy
t=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
check "a host without --bwlimit, the job's 512K: exit 0 (got $RC)" test "$RC" = 0 || show "$LOG/err"
check "... 2 MiB more in no less than 3 s (took $t s)" at_least "$t" 3
check "... DST is SRC (diff -r)" diff -r -x .ferry-job src "$JOB"
run set_job --bwlimit 0
check "ferry set --bwlimit 0: printed as none" grep -q "^bwlimit per host: none$" "$LOG/out" ||
	show "$LOG/out"
finish
