#!/bin/bash
# t79-pg-set: live control of a shared job, `ferry set --manifest
# postgresql://... --job-name NAME` (issue 14 item 5), against a
# throw-away cluster on a Unix socket; psql is the oracle of what hosts
# hold and mark. Proves:
#  - set of an unknown job exits 2 (--bwlimit and --window: t88);
#  - --pause: a running host (SRC behind bench/slowfs, 5 ms an operation)
#    finishes what it has in flight and then marks nothing and holds no
#    claim while paused, and goes on running; status says paused;
#  - a host that joins while the job is paused claims nothing either;
#  - -j 1 then --resume: the hosts go on with at most 2 claims of 48
#    files each in flight, and finish the job: DST equals SRC (diff -r),
#    both exit 0.
# Skips, saying why, without root, PostgreSQL or bench/slowfs.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_slowfs_start python3
set_job() { "$FERRY" set --manifest "$URL" --job-name j "$@"; }
js() { python3 -c "import json,sys; j = json.load(open('$LOG/out')); print($1)"; }

mkdir -p src
for d in $(seq 1 25); do
	mkdir "src/d$d"
	for f in $(seq 1 60); do echo "file $d $f" >"src/d$d/f$f"; done
done

expect_code 2 set_job --pause
check "set of an unknown job: named in the error" grep -q "no job 'j'" "$LOG/err"

mkdir -p "$MNT"
"$SLOWFS" --latency-us 5000 "$T/src" "$MNT" 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
spawn "$LOG/a" "$FERRY" --manifest "$URL" --job-name j -j 4 "$MNT" "$T/dst"
A=$SPAWNED
jid() { sql "SELECT id FROM ferry.jobs WHERE name = 'j'"; }
done_rows() { sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 1"; }
held() { sql "SELECT count(*) FROM ferry.files WHERE job = $(jid) AND state = 0
	AND lease_until IS NOT NULL"; }
going() { [[ -n $(jid) ]] && (($(done_rows) >= 40)); }
wait_until 60 going || die "job j did not get going"

# ---- paused ----------------------------------------------------------------
expect_code 0 set_job --pause
check "set --pause: says the job is paused" grep -q "^paused: yes" "$LOG/out"
drained() { [[ $(held) == 0 ]]; }
wait_until 20 drained
check "paused: the host finished what it had in flight and holds no claim" \
	test "$(held)" = 0
d1=$(done_rows)
spawn "$LOG/b" "$FERRY" --manifest "$URL" --job-name j -j 4 "$MNT" "$T/dst"
B=$SPAWNED
sleep 3
check "paused: nothing more marked in 3 s, by either host ($d1 done)" \
	test "$(done_rows)" = "$d1"
check "... no claim held, the host that joined paused included" test "$(held)" = 0
check "... and both hosts still run" kill -0 "$A" "$B"
expect_code 0 "$FERRY" status --manifest "$URL" --job-name j --json
check "status: paused, two hosts running" \
	test "$(js 'j["paused"], j["state"].split()[0], j["hosts_running"]')" = "True paused 2"

# ---- -j 1, resumed -----------------------------------------------------------
expect_code 0 set_job -j 1
check "set -j 1: says the jobs per host" grep -q "^jobs per host: 1$" "$LOG/out"
expect_code 0 set_job --resume
check "set --resume: not paused" grep -q "^paused: no$" "$LOG/out"
most=0
while kill -0 "$A" 2>/dev/null || kill -0 "$B" 2>/dev/null; do
	h=$(held)
	((h > most)) && most=$h
	sleep 0.2
done
# (-j 4 would be 8 claims per host: up to 768 of the job's 1,500 rows)
check "after -j 1: at most 2 claims of 48 files per host in flight ($most held at most)" \
	test "$most" -le 192
check "... and the job went on: more done than when it paused" test "$(done_rows)" -gt "$d1"
reap "$A"
check "host A exits 0 (got $RC)" test "$RC" = 0 || show "$LOG/a.err"
reap "$B"
check "host B exits 0 (got $RC)" test "$RC" = 0 || show "$LOG/b.err"
check "host A said when the job was paused and resumed" \
	eval 'grep -q "paused (ferry set --pause)" "$LOG/a.err" && grep -q "resumed" "$LOG/a.err"'
if diff -r -x .ferry-job src dst >"$LOG/diff" 2>&1; then
	ok "diff -r: DST holds SRC"
else
	fail "diff -r: DST holds SRC"
	show "$LOG/diff"
fi
wrong=$(pg_counts_wrong)
check "every job's counts are psql's counts of its rows" test -z "$wrong"
[[ -z $wrong ]] || printf '%s\n' "$wrong" | show -
finish
