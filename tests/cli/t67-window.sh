#!/bin/bash
# t67-window: --window HH:MM-HH:MM (robocopy's /RH): outside the window a
# run pauses, inside it copies; `ferry set --window` moves it live.
#
# The clock: a test build reads FERRY_TEST_CLOCK=HH:MM (the minute of the
# day, local time) instead of the real clock (ferry_window_now in
# src/control.c); the runs and the `ferry status` calls below get the
# same fake time, so the test does not depend on when it runs.
#
# Proves (oracle: DST's bytes, find; cmp / diff -r / rsync at the end):
#  - at 12:00 a run with --window 19:00-07:00 (wraps midnight) copies
#    nothing for 3 s (no byte in DST); `ferry status` says "paused: yes,
#    until 19:00 (outside the window 19:00-07:00)", --json paused true,
#    paused_by "window", window "19:00-07:00"; the progress line says
#    "paused until 19:00";
#  - `ferry set --window 11:00-13:00` (now inside) and the run copies
#    everything and exits 0;
#  - --window 19:00-07:00 at 06:59 (inside, past midnight) and 11:00-13:00
#    at 12:00 copy at once; at 07:00 (the end is not inside) it pauses, and
#    SIGINT still stops a paused run at once (exit 20, nothing lost: the
#    same command at 06:00 then copies everything);
#  - --window 25:00-1, 7:0-8:00, 10:00-10:00, 12:00 and none-x exit 1.
. "$(dirname "$0")/lib.sh" || exit 1

need_test_hooks
need_cmd rsync python3

MIB=1048576
mkdir src
for i in 1 2 3; do
	head -c $((2 * MIB)) /dev/urandom >"src/f$i" || die "src/f$i"
done
dst_bytes() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

export FERRY_TEST_CLOCK=12:00
M=$T/job.db
bg "$FERRY" --window 19:00-07:00 --manifest "$M" src dst
wait_until 10 test -e "$M.control" || fail "the run wrote no control file"
sleep 3
check "outside the window: nothing copied in 3 s ($(dst_bytes dst) bytes)" test "$(dst_bytes dst)" = 0
expect_code 0 "$FERRY" status --manifest "$M"
check "status: paused until the window opens" \
	grep -q '^paused: yes, until 19:00 (outside the window 19:00-07:00)' "$LOG/out"
check "status: the window" grep -q '^window: 19:00-07:00$' "$LOG/out"
expect_code 0 "$FERRY" status --json --manifest "$M"
python3 - "$LOG/out" >"$LOG/ctl" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["control"]
print(c["paused"], c["paused_by"], c["window"])
PY
check "status --json: paused by the window (got $(cat "$LOG/ctl"))" \
	test "$(cat "$LOG/ctl")" = "True window 19:00-07:00"
# the progress line, every 10 s when stderr is not a terminal
wait_until 15 grep -q 'paused until 19:00' "$LOG/bg.err"
check "the progress line says paused until 19:00" grep -q 'paused until 19:00' "$LOG/bg.err"
check "still nothing copied" test "$(dst_bytes dst)" = 0

expect_code 0 "$FERRY" set --window 11:00-13:00 --manifest "$M"
wait_until 30 test ! -d "/proc/$BG_PID" || fail "the run did not end after the window opened"
bg_wait
check "inside the window: the run exits 0 (got $BG_RC)" test "$BG_RC" = 0
tree_equal src dst

# ---- inside and outside, by the clock ------------------------------------

for c in "19:00-07:00 06:59" "11:00-13:00 12:00" "23:59-00:01 00:00"; do
	read -r w now <<<"$c"
	FERRY_TEST_CLOCK=$now expect_code 0 timeout 60 "$FERRY" -q --window "$w" src "in.$now"
	check "--window $w at $now: copied" diff -r src "in.$now"
done

export FERRY_TEST_CLOCK=07:00
M2=$T/end.db
bg "$FERRY" --window 19:00-07:00 --manifest "$M2" src out
wait_until 10 test -e "$M2.control" || fail "the run wrote no control file"
sleep 2
check "--window 19:00-07:00 at 07:00: nothing copied" test "$(dst_bytes out)" = 0
expect_code 0 "$FERRY" status --manifest "$M2"
check "at 07:00: status says paused until 19:00" grep -q '^paused: yes, until 19:00' "$LOG/out"
kill -INT "$BG_PID"
t0=$SECONDS
bg_wait
check "SIGINT stops a paused run: exit 20 (got $BG_RC)" test "$BG_RC" = 20
check "... within $(slow_s 5) s" test $((SECONDS - t0)) -le "$(slow_s 5)"
FERRY_TEST_CLOCK=06:00 expect_code 0 "$FERRY" -q --window 19:00-07:00 --manifest "$M2" src out
tree_equal src out

# ---- bad windows --------------------------------------------------------------

for bad in 25:00-1 7:0-8:00 10:00-10:00 12:00 none-x 12:60-13:00; do
	expect_code 1 "$FERRY" --window "$bad" src "bad.$bad"
	check "--window '$bad': names the value" grep -q -- "--window must be HH:MM-HH:MM.*not '$bad'" "$LOG/err"
	check "--window '$bad': nothing copied" test ! -e "bad.$bad"
done
expect_code 1 "$FERRY" set --window 25:00-1 --manifest "$M"
stderr_is_one_error
finish
