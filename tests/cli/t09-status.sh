#!/bin/bash
# t09-status: `ferry status` reports a job's state, idle or running.
#
# Proves:
#  - without a manifest, status exits 3 with one error line;
#  - after a copy it prints the documented lines with the right numbers
#    (done = regular files and their bytes, nothing pending, failed...), for
#    SRC DST (also named through a symlink, absolute, with a trailing slash)
#    and for --manifest FILE alike, and does not modify the manifest;
#  - --json prints one valid JSON object with the documented keys;
#  - during a run (frozen with SIGSTOP, so the moment is certain) it says
#    "running: yes (pid N)" and --json running_pid is N;
#  - status can be called at any moment: while a loop polls it, 30 runs
#    starting and ending all succeed, and so does every status call.
. "$(dirname "$0")/lib.sh" || exit 1

gen_tree src --seed 909 --files 600 --no-links
n_files=$(find src -type f | wc -l)
n_bytes=$(find src -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')

check_no_manifest() {
	expect_code 3 "$FERRY" status src dst && stderr_is_one_error
}

# has_line REGEX: a check that the last stdout has a line matching REGEX.
has_line() {
	if grep -qE -- "^$1\$" "$LOG/out"; then ok "status line: $1"; else
		fail "status line: $1"
		show "$LOG/out"
	fi
}

check_idle_status() {
	local m
	expect_code 0 "$FERRY" status src dst || return
	m=$(sed -n 's/^manifest: //p' "$LOG/out")
	check "status: manifest file exists" test -f "$m"
	has_line "source: $(readlink -f src)"
	has_line "destination: $(readlink -f dst)"
	has_line "running: no"
	has_line "last run: .*, .*, result 0 .*"
	has_line "done: $n_files files, $n_bytes bytes"
	has_line "pending: 0 files, 0 bytes"
	has_line "failed: 0 files"
	has_line "skipped: 0 files"
	has_line "vanished: 0 files"
	has_line "not in source: 0 files"
	cp "$LOG/out" "$LOG/status.pair"

	ln -s src src-link
	expect_code 0 "$FERRY" status "$T/src-link" "$T/dst/"
	check "status through other names of the pair prints the same" \
		cmp -s "$LOG/status.pair" "$LOG/out"

	sha1sum "$m" >"$LOG/manifest.sum"
	expect_code 0 "$FERRY" status --manifest "$m"
	check "status --manifest prints the same" cmp -s "$LOG/status.pair" "$LOG/out"
	check "status leaves the manifest unchanged" sha1sum -c --quiet "$LOG/manifest.sum"
}

check_json_status() {
	expect_code 0 "$FERRY" status --json src dst || return
	check "status --json is one JSON object" json_valid "$LOG/out"
	local key
	for key in manifest source destination running_pid done pending failed \
		skipped vanished not_in_source failures; do
		check "status --json has key $key" json_has "$LOG/out" "$key"
	done
	if command -v python3 >/dev/null 2>&1; then
		check "status --json: done counts $n_files files, failures empty" \
			python3 - "$LOG/out" "$n_files" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
done = s["done"]
files = done["files"] if isinstance(done, dict) else done
assert files == int(sys.argv[2]), files
assert s["failures"] == [], s["failures"]
assert s["running_pid"] in (0, None), s["running_pid"]
EOF
	fi
}

check_running_status() {
	gen_tree big --seed 910 --files 3000 --median 32K --no-links
	bg "$FERRY" -q big dst-big
	if ! wait_until 60 started_copying dst-big; then
		fail "the run started copying"
		return
	fi
	kill -STOP "$BG_PID"
	if ! wait_until 5 is_stopped "$BG_PID"; then
		fail "the run was still going when frozen (finished too soon?)"
		kill -CONT "$BG_PID"
		return
	fi
	expect_code 0 "$FERRY" status big dst-big
	has_line "running: yes \\(pid $BG_PID\\)"
	expect_code 0 "$FERRY" status --json big dst-big
	expect_json "$LOG/out" running_pid "$BG_PID"
	kill -CONT "$BG_PID"
	bg_wait
	check "the observed run completes (exit $BG_RC)" test "$BG_RC" = 0
	expect_code 0 "$FERRY" status big dst-big
	has_line "running: no"
}

# check_status_polling: a monitoring loop never disturbs a run, and a run
# never makes status fail.
check_status_polling() {
	local i run_fail=0 polls=0 poll_fail=0 poller
	(
		n=0 f=0
		while [[ ! -e $LOG/stop-polling ]]; do
			n=$((n + 1))
			"$FERRY" status src dst >/dev/null 2>>"$LOG/poll.err" || f=$((f + 1))
		done
		echo "$n $f" >"$LOG/poll.count"
	) &
	poller=$!
	BG_PIDS+=("$poller")
	for ((i = 0; i < 30; i++)); do
		"$FERRY" -q src dst 2>>"$LOG/runs.err" || run_fail=$((run_fail + 1))
	done
	touch "$LOG/stop-polling"
	wait "$poller"
	read -r polls poll_fail <"$LOG/poll.count"
	check "30 runs while status is polled all exit 0 ($run_fail failed)" \
		test "$run_fail" = 0
	show "$LOG/runs.err" 3
	check "$polls status calls during those runs all exit 0 ($poll_fail failed)" \
		test "$poll_fail" = 0
	show "$LOG/poll.err" 3
}

check_no_manifest
expect_code 0 "$FERRY" -q src dst
check_idle_status
check_json_status
check_running_status
check_status_polling
finish
