#!/bin/bash
# t26-two-runs: two ferry processes started on the same job at once: exactly
# one runs, the other exits 4 at once and names the running process.
#
# Odd rounds start a fresh job (no manifest yet, so the two also race to
# create it), even rounds a job left by a run killed with -9 (its pid still
# in the lock file); each launches two runs within a millisecond; some rounds
# spells the job differently in the second run (absolute paths, a symlink to
# SRC, a trailing slash), which must find the same manifest. Proves, each
# round:
#  - one run exits 0 and the other 4 (never 3: a manifest being created is
#    not a corrupt one; never both 0);
#  - the loser says so in one "ferry: " line that contains the winner's pid;
#  - DST == SRC afterwards.
# Then, with a run frozen by SIGSTOP in the middle of a copy: a second run
# exits 4 within 5 s naming it, `ferry status` says "running: yes (pid N)";
# with its lock file made to name no live process, a second run is refused
# saying so (never "process -1") and status says "pid unknown"; and once the first is killed (-9) a new run takes the job over (the lock
# of a killed run is free) and completes.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd

ROUNDS=$(pick 10 6 50)

# This found that the loser could read the lock file before the holder
# wrote its pid and name "process -1" or the pid of the killed run (fixed).
gen_tree src --seed 2626 --files "$(pick 1500 800 3000)" --median 8K --max-size 512K
ln -s src src-link

declare -a PIDS=() RCS=()

# race SECOND-SRC SECOND-DST: start `ferry src dst` and `ferry SECOND...`
# at once; PIDS and RCS hold their pids and exit statuses.
race() {
	"$FERRY" -q src dst >"$LOG/a.out" 2>"$LOG/a.err" &
	PIDS[0]=$!
	"$FERRY" -q "$1" "$2" >"$LOG/b.out" 2>"$LOG/b.err" &
	PIDS[1]=$!
	BG_PIDS+=("${PIDS[@]}")
	wait "${PIDS[0]}"
	RCS[0]=$?
	wait "${PIDS[1]}"
	RCS[1]=$?
}

started=0
for ((r = 1; r <= ROUNDS; r++)); do
	rm -rf dst "$XDG_STATE_HOME/ferry"
	if ((r % 2 == 0)); then
		# a job with a manifest and a lock file left by a killed run
		bg "$FERRY" -q src dst
		wait_until 60 started_copying dst
		kill -KILL "$BG_PID"
		bg_wait
	fi
	case $((r % 4)) in
	1) race src dst ;;
	2) race "$T/src" "$T/dst" ;;
	3) race src-link/ dst/ ;;
	0) race "./src" "$T/./dst" ;;
	esac
	started=$((started + 2))
	label="round $r ($(printf '%q ' "${PIDS[@]}"| sed 's/ $//'))"
	if [[ ${RCS[0]}/${RCS[1]} == 0/4 ]]; then
		win=0 lose=1
	elif [[ ${RCS[0]}/${RCS[1]} == 4/0 ]]; then
		win=1 lose=0
	else
		fail "$label: one run exits 0 and the other 4 (got ${RCS[0]} and ${RCS[1]})"
		show "$LOG/a.err"
		show "$LOG/b.err"
		no_sanitizer_report "$LOG/a.err" "$LOG/b.err"
		continue
	fi
	ok "$label: run $((win + 1)) exits 0, run $((lose + 1)) exits 4"
	loser_err=$LOG/$([[ $lose == 0 ]] && echo a || echo b).err
	if [[ $(wc -l <"$loser_err") == 1 ]] && grep -q '^ferry: ' "$loser_err" &&
		grep -qw -- "${PIDS[win]}" "$loser_err"; then
		ok "$label: the loser names the winner's pid ${PIDS[win]} in one line"
	else
		fail "$label: the loser names the winner's pid ${PIDS[win]} in one line"
		show "$loser_err"
	fi
	no_sanitizer_report "$LOG/a.err" "$LOG/b.err"
	if ((r == 1 || r == ROUNDS)); then
		tree_equal src dst
	else
		check "$label: diff -r src dst" diff -r --no-dereference src dst
	fi
done

# unknown_holder: with the job held by the frozen run, its lock file is
# made to name no live process (999999999 is above any pid_max), then to
# be empty, as a holder in another PID namespace would look: a second run
# is still refused (exit 4) and says the holder cannot be named, never
# "process -1"; status says "running: yes (pid unknown)", -1 in JSON.
no_minus_one() { ! grep -q 'process -1' "$LOG/err"; }
unknown_holder() {
	local lock content
	lock=$(echo "$XDG_STATE_HOME"/ferry/*.db.lock)
	for content in 999999999 ''; do
		echo "$content" >"$lock"
		run "$FERRY" -q src dst
		check "lock naming '$content': a second run exits 4 (got $RC)" test "$RC" = 4
		check "lock naming '$content': ... saying the holder cannot be named" \
			grep -q 'running in a process that cannot be named' "$LOG/err"
		check "lock naming '$content': ... never 'process -1'" no_minus_one
		"$FERRY" status src dst >"$LOG/status" 2>&1
		check "lock naming '$content': status says running: yes (pid unknown)" \
			grep -qx "running: yes (pid unknown)" "$LOG/status"
		"$FERRY" status --json src dst >"$LOG/status" 2>&1
		check "lock naming '$content': status --json says running_pid -1" \
			grep -q '"running_pid": -1,' "$LOG/status"
	done
}

# A run frozen in the middle of a copy holds the job.
rm -rf dst "$XDG_STATE_HOME/ferry"
bg "$FERRY" -q src dst
if wait_until 60 started_copying dst; then
	kill -STOP "$BG_PID"
	first=$BG_PID
	t0=$SECONDS
	run "$FERRY" -q src dst
	check "frozen run: a second run exits 4 (got $RC)" test "$RC" = 4
	check "frozen run: ... within $(slow_s 5) s" test $((SECONDS - t0)) -le "$(slow_s 5)"
	check "frozen run: ... naming pid $first" grep -qw -- "$first" "$LOG/err"
	"$FERRY" status src dst >"$LOG/status" 2>&1
	check "frozen run: status says running: yes (pid $first)" \
		grep -qx "running: yes (pid $first)" "$LOG/status"
	unknown_holder
	kill -KILL "$first"
	bg_wait
	final_state src dst
else
	fail "frozen run: ferry started copying within 60 s"
fi
say "two-run races: $ROUNDS rounds, $started ferry processes started"
finish
