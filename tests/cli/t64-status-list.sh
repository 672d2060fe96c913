#!/bin/bash
# t64-status-list: `ferry status` without a job lists every job of the
# state directory; a job's status groups its failures by cause, each
# cause's failures sorted by path.
#
# Setup (as an unprivileged user, as root reads everything): job A is a
# finished copy with failures of two causes: 8 source files of mode 0000
# (open on SRC: EACCES) in u/ and u-x/ (u-x/ sorts before u/ as bytes,
# after it as (directory, name): the order must be the path's), and 2
# source directories of mode 0000 (opendir on SRC: EACCES); job B is a run
# frozen with SIGSTOP mid-copy, holding its lock. The state directory also
# holds a file that is not SQLite and a manifest of a schema from the
# future (user_version 999).
#
# Proves:
#  A. `ferry status` lists the 4, "4 jobs in DIR": A with its source and
#     destination, "running: no", progress "D of T files, DB of TB bytes"
#     (D, DB counted in DST with find; T, TB in SRC: done, pending and
#     failed, the failed directories counted too), "failed: 10 files", "result 23 (some files failed)"; B with
#     "running: yes (pid PID)" of the frozen process; the two unreadable
#     ones with "unreadable: " and a reason, and no crash (exit 0);
#  B. `status --json` is one JSON object (jq): 4 jobs; A readable with
#     find's counts and last_result 23; B running with its pid and this
#     host; the two others readable false with an error;
#  C. A's status: "8 × permission denied opening a file of SRC" then "2 ×
#     permission denied opening a directory of SRC"; under the first the
#     first 5 paths of find's list sorted with LC_ALL=C sort, in that
#     order, then "... and 3 more"; --failures: all 8 in that order, then
#     the 2 directories sorted; --json: the failures in cause-then-path
#     order and the causes with their counts (jq);
#  D. --failures without a job is a usage error (exit 1); once B goes on
#     and ends, the list says it is not running and its result is 0.
. "$(dirname "$0")/lib.sh" || exit 1
need_unprivileged
need_cmd jq sqlite3
need_gentree

W=$T/nobody
S=$W/state/ferry
mkdir -p "$W/a/u/sub" "$W/a/u-x" "$W/a/r" "$W/a/lock1" "$W/a/lock2"
for i in $(seq 1 20); do printf 'readable %s\n' "$i" >"$W/a/r/f$i"; done
bad=(u/zeta u/Alpha u/f10 u/f9 u/f1 u-x/q u-x/Q u/sub/deep)
for f in "${bad[@]}"; do printf 'secret %s\n' "$f" >"$W/a/$f"; done
"$GENTREE" --seed 640 --files 3000 --median 32K --no-links "$W/b" >/dev/null ||
	die "gentree failed"
chown -R "$NOBODY_UID:$NOBODY_GID" "$W"
for f in "${bad[@]}"; do chmod 0000 "$W/a/$f"; done
chmod 0000 "$W/a/lock1" "$W/a/lock2"

# the oracles, with find and sort as root (who reads the 0000 entries)
find "$W/a" -type f -perm 0000 -printf '%P\n' | LC_ALL=C sort >"$LOG/want.open"
find "$W/a" -mindepth 1 -type d -perm 0000 -printf '%P\n' | LC_ALL=C sort >"$LOG/want.dirs"
total_files=$(find "$W/a" -type f | wc -l)
# what status counts to copy: the files and the directories that failed
total=$((total_files + $(wc -l <"$LOG/want.dirs")))
total_bytes=$(find "$W/a" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
check "oracle: 8 unreadable files, 2 directories, 28 files" \
	test "$(wc -l <"$LOG/want.open"):$(wc -l <"$LOG/want.dirs"):$total_files" = 8:2:28

expect_code 23 as_nobody "$FERRY" -q "$W/a" "$W/a-dst"
done_files=$(find "$W/a-dst" -type f | wc -l)
done_bytes=$(find "$W/a-dst" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
check "oracle: DST holds the 20 readable files" test "$done_files" = 20

# job B: frozen mid-copy, holding its lock. bg runs as_nobody in a
# subshell: ferry is its child (env and setpriv exec it). --bwlimit keeps
# it going about 3 s (182 MB): unslowed, an idle machine copied it all
# before the freeze twice ("not the child", its pid gone)
bg as_nobody "$FERRY" -q --bwlimit 64M "$W/b" "$W/b-dst"
if ! wait_until 60 started_copying "$W/b-dst"; then
	fail "job B started copying"
	finish
fi
B_PID=$(ps -o pid= --ppid "$BG_PID" | tr -d ' ')
[[ $(readlink "/proc/$B_PID/exe" 2>/dev/null) == "$(readlink -f "$FERRY")" ]] ||
	die "job B's ferry is not the child of $BG_PID ($B_PID)"
BG_PIDS+=("$B_PID") # the trap goes on with it and kills it too
kill -STOP "$B_PID"
wait_until 5 is_stopped "$B_PID" || fail "job B was still going when frozen"

# two manifests that cannot be read
printf 'this is not a manifest\n' >"$S/0000000000000bad.db"
sqlite3 "$S/00000000000f00ee.db" 'PRAGMA user_version = 999; CREATE TABLE x (y);'
chown "$NOBODY_UID:$NOBODY_GID" "$S"/0*.db

# block DIR MANIFEST-SUFFIX: the lines of the job whose manifest ends so
block() { awk -v m="$2" '/^job: / { on = ($2 ~ m "$") } on' "$1"; }
a_db=$(as_nobody "$FERRY" status --json "$W/a" "$W/a-dst" | jq -r .manifest)
b_db=$(as_nobody "$FERRY" status --json "$W/b" "$W/b-dst" | jq -r .manifest)

# ---- A: the list -------------------------------------------------------------
expect_code 0 as_nobody "$FERRY" status
cp "$LOG/out" "$LOG/list"
check "A: the list counts 4 jobs in the state directory" \
	grep -qxF "4 jobs in $S" "$LOG/list"
check "A: one 'job:' line per manifest" test "$(grep -c '^job: ' "$LOG/list")" = 4
block "$LOG/list" "$(basename "$a_db")" >"$LOG/list.a"
block "$LOG/list" "$(basename "$b_db")" >"$LOG/list.b"
show "$LOG/list.a"
check "A: job A's source" grep -qxF "  source: $(realpath "$W/a")" "$LOG/list.a"
check "A: job A's destination" grep -qxF "  destination: $(realpath "$W/a-dst")" "$LOG/list.a"
check "A: job A is not running" grep -qxF "  running: no" "$LOG/list.a"
check "A: job A's progress is find's ($done_files of $total files, $done_bytes of $total_bytes bytes)" \
	grep -q "^  progress: $done_files of $total files, $done_bytes of $total_bytes bytes" "$LOG/list.a"
check "A: job A failed 10 (8 files, 2 directories)" grep -q "^  failed: 10 files" "$LOG/list.a"
check "A: job A's last run ended with 23, said in words" \
	grep -q "^  last run: .*, finished .*, result 23 (some files failed)$" "$LOG/list.a"
show "$LOG/list.b"
check "A: job B is running in the frozen process" \
	grep -qxF "  running: yes (pid $B_PID)" "$LOG/list.b"
check "A: job B's destination" grep -qxF "  destination: $(realpath "$W/b-dst")" "$LOG/list.b"
check "A: the file that is not SQLite is listed unreadable, with why" \
	bash -c 'block() { awk -v m="$2" "/^job: / { on = (\$2 ~ m \"\$\") } on" "$1"; }
		block "$1" 0000000000000bad.db | grep -q "^  unreadable: ..*"' _ "$LOG/list"
check "A: the manifest of a future schema is listed unreadable, with why" \
	bash -c 'block() { awk -v m="$2" "/^job: / { on = (\$2 ~ m \"\$\") } on" "$1"; }
		block "$1" 00000000000f00ee.db | grep -q "^  unreadable: ..*"' _ "$LOG/list"

# ---- B: --json -------------------------------------------------------------
expect_code 0 as_nobody "$FERRY" status --json
cp "$LOG/out" "$LOG/list.json"
check "B: one JSON object of 4 jobs" test "$(jq '.jobs | length' "$LOG/list.json")" = 4
check "B: its state_dir" test "$(jq -r .state_dir "$LOG/list.json")" = "$S"
jq -c --arg m "$a_db" '.jobs[] | select(.manifest == $m)
	| [.readable, .running, .done, .total, .done_bytes, .total_bytes, .failed, .last_result]' \
	"$LOG/list.json" >"$LOG/a.json"
check "B: job A as find counts it ($(cat "$LOG/a.json"))" \
	test "$(cat "$LOG/a.json")" = "[true,false,$done_files,$total,$done_bytes,$total_bytes,10,23]"
jq -c --arg m "$b_db" '.jobs[] | select(.manifest == $m) | [.running, .running_pid, .running_host]' \
	"$LOG/list.json" >"$LOG/b.json"
check "B: job B runs in pid $B_PID on $(hostname) ($(cat "$LOG/b.json"))" \
	test "$(cat "$LOG/b.json")" = "[true,$B_PID,\"$(hostname)\"]"
check "B: the two unreadable ones say why" \
	test "$(jq '[.jobs[] | select(.readable == false and (.error | length) > 0)] | length' "$LOG/list.json")" = 2

# ---- C: A's failures, grouped, sorted by path ------------------------------------
expect_code 0 as_nobody "$FERRY" status "$W/a" "$W/a-dst"
cp "$LOG/out" "$LOG/status"
grep ' × ' "$LOG/status" >"$LOG/causes"
printf '%s\n' "8 × permission denied opening a file of SRC" \
	"2 × permission denied opening a directory of SRC" >"$LOG/want.causes"
check "C: the two causes with find's counts, most frequent first" \
	diff "$LOG/want.causes" "$LOG/causes"
sed -n "s/^failed: '\(.*\)': open source: Permission denied\$/\1/p" "$LOG/status" >"$LOG/shown"
head -n 5 "$LOG/want.open" >"$LOG/want.shown"
check "C: the first 5 of the cause by path, in path order" diff "$LOG/want.shown" "$LOG/shown"
check "C: then how many more" \
	grep -qxF '... and 3 more of this cause (`ferry status --failures` lists them all)' "$LOG/status"

expect_code 0 as_nobody "$FERRY" status --failures "$W/a" "$W/a-dst"
sed -n "s/^failed: '\(.*\)': \(open source\|cannot read directory\): Permission denied\$/\1/p" \
	"$LOG/out" >"$LOG/all"
cat "$LOG/want.open" "$LOG/want.dirs" >"$LOG/want.all"
check "C: --failures: all 10, by cause then path" diff "$LOG/want.all" "$LOG/all"

expect_code 0 as_nobody "$FERRY" status --json "$W/a" "$W/a-dst"
jq -r '.failures[].path' "$LOG/out" >"$LOG/json.all"
check "C: --json: the failures by cause then path" diff "$LOG/want.all" "$LOG/json.all"
check "C: --json: the causes and their counts" \
	test "$(jq -c '[.causes[] | [.key, .count]]' "$LOG/out")" = '[["src:open:13",8],["src:opendir:13",2]]'

# ---- D -----------------------------------------------------------------------
expect_code 1 as_nobody "$FERRY" status --failures
check "D: ... saying a job is needed" grep -q 'failures needs a job' "$LOG/err"
kill -CONT "$B_PID"
bg_wait
BG_PIDS=() # B's ferry ended with its parent: its pid may be another's now
check "D: job B completes (exit $BG_RC)" test "$BG_RC" = 0
expect_code 0 as_nobody "$FERRY" status
block "$LOG/out" "$(basename "$b_db")" >"$LOG/list.b"
check "D: job B is not running any more" grep -qxF "  running: no" "$LOG/list.b"
check "D: ... and its last run ended with 0" grep -q "result 0 (success)$" "$LOG/list.b"
finish
