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
#    starting and ending all succeed, and so does every status call;
#  - status follows a copy as it goes (3000 files, slowed by strace holding
#    each rename 1 ms, -j 2): polled in a loop, status and status --json
#    always exit 0, the JSON is always valid, done never goes down from one
#    call to the next, and never exceeds the files find sees in place in DST
#    just after the call (done files are durable under their final name);
#    at least 3 polls fall while the run's process is alive and see done
#    grow, and the poll after its end sees every file done.
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

# child_of PID: the first child process of PID (ferry under strace).
child_of() {
	local c
	read -r c _ <"/proc/$1/task/$1/children" 2>/dev/null
	printf '%s' "$c"
}

# alive PID: the process exists and has not exited (a zombie has).
alive() {
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ $st != Z ]]
}

# poll_status I DST: status and status --json of big DST, then the regular
# files find sees in DST under their final names, in $LOG/poll/I.*
poll_status() {
	local p=$LOG/poll/$1
	"$FERRY" status big "$2" >"$p.txt" 2>"$p.err"
	echo $? >"$p.rc"
	"$FERRY" status --json big "$2" >"$p.json" 2>>"$p.err"
	echo $? >>"$p.rc"
	find "$2" -type f ! -name '*.ferry-part' -printf . 2>/dev/null | wc -c >"$p.find"
}

# json_dones N: for each of $LOG/poll/0..N.json, its done count, or x when
# it is not one valid JSON object with a number (or {"files": N}) as done.
json_dones() {
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$LOG/poll" "$1" <<'EOF'
import json, sys
for i in range(int(sys.argv[2]) + 1):
    try:
        s = json.load(open("%s/%d.json" % (sys.argv[1], i)))
        v = s["done"]
        v = v["files"] if isinstance(v, dict) else v
        assert type(v) is int
        print(v)
    except Exception:
        print("x")
EOF
		return
	fi
	local i v
	for ((i = 0; i <= $1; i++)); do
		v=
		json_valid "$LOG/poll/$i.json" && v=$(json_get "$LOG/poll/$i.json" done)
		[[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo x
	done
}

# text_done I: N from the "done: N files" line of poll I's status, or x.
text_done() {
	local t
	t=$(sed -n 's/^done: \([0-9][0-9]*\) files.*/\1/p' "$LOG/poll/$1.txt")
	printf '%s\n' "${t:-x}"
}

check_status_during_copy() {
	if ! have_strace; then
		say "SKIP status during a copy: needs strace, allowed to trace"
		return
	fi
	local dst=dst-polled n_big i=0 pid running=0 t j f start
	local prev=0 first= last= bad_rc=0 bad_json=0 down=0 over=0
	local -a jd
	n_big=$(find big -type f -printf . | wc -c)
	mkdir "$LOG/poll"
	start=$SECONDS
	bg env "$(no_leak_check_env)" strace -f -o /dev/null \
		-e trace='?renameat,?renameat2' \
		-e inject='?renameat,?renameat2:delay_enter=1000' \
		"$FERRY" -q -j 2 big "$dst"
	if ! wait_until 60 started_copying "$dst"; then
		fail "the polled run started copying"
		bg_wait
		return
	fi
	pid=$(child_of "$BG_PID")
	[[ -n $pid ]] || pid=$BG_PID # strace outlives ferry: looser, still sound
	# A poll counts as during the run when the process is alive after it.
	while :; do
		poll_status "$i" "$dst"
		alive "$pid" || break
		running=$((running + 1))
		i=$((i + 1))
		((i < 1000)) || break
		sleep 0.05
	done
	bg_wait
	check "the polled run completes (exit $BG_RC)" test "$BG_RC" = 0
	i=$((i + 1))
	poll_status "$i" "$dst" # surely after the end
	say "$((i + 1)) polls in $((SECONDS - start)) s"
	mapfile -t jd < <(json_dones "$i")
	for ((i = 0; i < ${#jd[@]}; i++)); do
		if grep -qvx 0 "$LOG/poll/$i.rc"; then
			bad_rc=$((bad_rc + 1))
			show "$LOG/poll/$i.err" 2
		fi
		t=$(text_done "$i") j=${jd[i]} f=$(cat "$LOG/poll/$i.find")
		if [[ $j == x ]]; then
			bad_json=$((bad_json + 1))
			show "$LOG/poll/$i.json" 2
			j=$t
		fi
		[[ $t == x ]] && t=$prev # a failed call; counted above
		[[ $j == x ]] && j=$t
		if ((t < prev || j < t)); then
			down=$((down + 1))
			say "poll $i: done $t, then $j, after $prev"
		fi
		if ((t > f || j > f)); then
			over=$((over + 1))
			say "poll $i: done $t, then $j, but find saw $f files in DST"
		fi
		prev=$j
		if ((i < running)); then
			first=${first:-$t} last=$j
		fi
	done
	check "${#jd[@]} polls of status and status --json during and after the run: every call exits 0 ($bad_rc polls had a failure)" \
		test "$bad_rc" = 0
	check "every status --json is valid JSON with a done count ($bad_json was not)" \
		test "$bad_json" = 0
	check "done never goes down from one status call to the next ($down times)" \
		test "$down" = 0
	check "done never exceeds the files find sees in DST just after ($over times)" \
		test "$over" = 0
	check "$running polls while the run is alive (at least 3), done grows from ${first:-?} to ${last:-?}" \
		test "$running" -ge 3 -a "${first:-0}" -lt "${last:-0}"
	check "the poll after the end says all $n_big files done (got $prev)" \
		test "$prev" = "$n_big"
}

check_no_manifest
expect_code 0 "$FERRY" -q src dst
check_idle_status
check_json_status
check_running_status
check_status_during_copy
check_status_polling
finish
