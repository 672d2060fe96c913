#!/bin/bash
# t66-set: `ferry set` changes a running copy (issue 12 item 4): the
# measured rate of a copy through bench/slowfs follows --bwlimit, --pause
# stops it, --resume restarts it, -j shows in status; and bad input.
#
# Proves (the oracle is DST itself: the bytes of every file in it, temps
# included, sampled with find and the shell's clock; bounds are loose, the
# machine is shared):
#  - a run started with -j 1 --bwlimit 4M writes 2..6 MiB/s;
#  - `ferry set --bwlimit 1M` while it runs: within 2 s the rate is
#    0.4..1.6 MiB/s;
#  - `ferry set --pause`: within 2 s DST stops growing (not a byte over
#    1.5 s), and `ferry status` says paused (text, and --json
#    control.paused true);
#  - `ferry set -j 2`: `ferry status --json` has control.jobs 2, the text
#    "jobs: 2", and the run, started with -j 1, ends with -j 2 (its --json
#    jobs_peak 2: raised above its own -j);
#  - `ferry set --resume`: DST grows again;
#  - `ferry set --bwlimit 0`: the rest (tens of MiB) arrives within 15 s,
#    far faster than 1 MiB/s would; the run exits 0, the trees are equal
#    (diff -r / rsync), and the control file is gone;
#  - `ferry set` on a job not running, --bwlimit 12Q, --window 25:00-1,
#    --pause on a run, `ferry set` with nothing to set: exit 1, one clear
#    message each.
# Without FUSE the copy reads the local SRC instead (said as SKIP slowfs).
. "$(dirname "$0")/lib.sh" || exit 1

need_cmd rsync

MIB=1048576
mkdir src
for i in $(seq 1 12); do
	head -c $((4 * MIB)) /dev/urandom >"src/f$i" || die "src/f$i"
done

SLOWFS=${GENTREE:+$(dirname "$GENTREE")/slowfs}
MNT=$T/mnt
umount_mnt() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
	fi
}
trap 'umount_mnt; cleanup' EXIT
SRC=$T/src
mkdir "$MNT"
if [[ -n $SLOWFS && -x $SLOWFS && -c /dev/fuse ]] && command -v fusermount3 >/dev/null &&
	"$SLOWFS" --latency-us 200 "$T/src" "$MNT" 2>"$LOG/slowfs.err"; then
	SRC=$MNT
	say "copying through bench/slowfs --latency-us 200"
else
	say "SKIP slowfs: needs bench/slowfs, /dev/fuse and fusermount3; copying the local SRC"
fi

M=$T/job.db
# dst_bytes: the bytes in DST's files, temps included
dst_bytes() { find dst -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
now_ns() { date +%s%N; }
# rate SECONDS: DST's growth over SECONDS, as KiB/s (in RATE) and bytes (GROWN)
rate() {
	local b0 t0 b1 t1
	b0=$(dst_bytes) t0=$(now_ns)
	sleep "$1"
	b1=$(dst_bytes) t1=$(now_ns)
	GROWN=$((b1 - b0))
	RATE=$((GROWN * 1000000000 / (t1 - t0) / 1024))
	say "over $1 s: $GROWN bytes, $RATE KiB/s"
}
set_ok() {
	expect_code 0 "$FERRY" set --manifest "$M" "$@"
}

bg "$FERRY" --json -j 1 --bwlimit 4M --manifest "$M" "$SRC" dst
wait_until 10 test -e "$M.control" || fail "the run wrote no control file"
sleep 0.5
rate 1.5
# the floors say the limit is not much lower than asked: divided by SLOW,
# as a sanitizer build on a loaded machine may not keep up with it
check "--bwlimit 4M: $((2048 / SLOW)) KiB/s..6 MiB/s (got $RATE KiB/s)" \
	test "$RATE" -ge $((2048 / SLOW)) -a "$RATE" -le 6144

set_ok --bwlimit 1M
check "set --bwlimit 1M says the new limit" grep -q '^bwlimit: 1048576 bytes/s' "$LOG/out"
sleep 1.5
rate 3
check "set --bwlimit 1M: $((400 / SLOW)) KiB/s..1.6 MiB/s within 2 s (got $RATE KiB/s)" \
	test "$RATE" -ge $((400 / SLOW)) -a "$RATE" -le 1640

set_ok --pause
sleep 1.5
rate 1.5
check "set --pause: DST stops growing (grew $GROWN bytes)" test "$GROWN" = 0
expect_code 0 "$FERRY" status --manifest "$M"
check "status says paused" grep -q '^paused: yes (ferry set --pause' "$LOG/out"
check "status shows the limit" grep -q '^bwlimit: 1048576 bytes/s' "$LOG/out"
set_ok -j 2
expect_code 0 "$FERRY" status --json --manifest "$M"
python3 - "$LOG/out" >"$LOG/ctl" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["control"]
print(c["jobs"], c["paused"], c["paused_by"], c["bwlimit"])
PY
check "status --json: control jobs 2, paused by set, bwlimit 1M (got $(cat "$LOG/ctl"))" \
	test "$(cat "$LOG/ctl")" = "2 True set 1048576"
expect_code 0 "$FERRY" status --manifest "$M"
check "status says jobs: 2" grep -q '^jobs: 2$' "$LOG/out"

set_ok --resume
sleep 1
rate 1.5
check "set --resume: DST grows again (grew $GROWN bytes)" test "$GROWN" -gt 0

left=$((48 * MIB - $(dst_bytes)))
set_ok --bwlimit 0
t0=$SECONDS
wait_until 15 test ! -d "/proc/$BG_PID" || fail "the run did not end within $(slow_s 15) s of --bwlimit 0"
bg_wait
say "--bwlimit 0: the last $left bytes in $((SECONDS - t0)) s"
check "the run exits 0 (got $BG_RC)" test "$BG_RC" = 0
expect_json "$LOG/bg.out" jobs_peak 2
check "the rest ($left bytes) came faster than 1 MiB/s would" \
	test $((SECONDS - t0)) -lt $((left / MIB))
show "$LOG/bg.err"
tree_equal src dst
check "the control file is gone after the run" test ! -e "$M.control"

# ---- bad input ------------------------------------------------------------

expect_code 1 "$FERRY" set --bwlimit 1M --manifest "$M"
check "set on a job not running: says so" grep -q 'no run of this job is going on' "$LOG/err"
stderr_is_one_error
expect_code 1 "$FERRY" set --bwlimit 1M src other
check "set on a job that never ran: says so" grep -q 'no run of this job is going on' "$LOG/err"
expect_code 1 "$FERRY" --bwlimit 12Q src bad1
check "--bwlimit 12Q: names the value" grep -q "bwlimit.*not '12Q'" "$LOG/err"
stderr_is_one_error
expect_code 1 "$FERRY" set --bwlimit 12Q --manifest "$M"
check "set --bwlimit 12Q: names the value" grep -q "not '12Q'" "$LOG/err"
expect_code 1 "$FERRY" --window 25:00-1 src bad2
check "--window 25:00-1: names the value" grep -q "window.*not '25:00-1'" "$LOG/err"
stderr_is_one_error
expect_code 1 "$FERRY" --pause src bad3
check "--pause on a run: set only" grep -q 'set' "$LOG/err"
expect_code 1 "$FERRY" set --manifest "$M"
check "set with nothing to set: says what it takes" grep -q 'set needs' "$LOG/err"
expect_code 1 "$FERRY" set --pause --resume --manifest "$M"
check "nothing copied by the bad runs" test ! -e bad1 -a ! -e bad2 -a ! -e bad3
finish
