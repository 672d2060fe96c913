#!/bin/bash
# t04-sigint-sigterm: SIGINT, SIGTERM and SIGHUP stop a run cleanly.
#
# For each signal, a copy is started and signalled as soon as its first file
# shows up in DST. Proves:
#  - ferry exits 20 within a few seconds, and says on stderr
#    "resume with the same command";
#  - it leaves no *.ferry-part behind and releases the job ("running: no");
#  - the work it finished is committed: every file present in DST is marked
#    done ("done: N files" equals the files in DST, and the sqlite3 shell
#    finds the done rows to be exactly the files in DST);
#  - running the same command again completes the copy exactly and
#    `ferry --verify` agrees; that run copies exactly the files not done
#    (-v list), and leaves those done alone (DST inode and ctime unchanged).
# Then SIGINT twice, and SIGINT then SIGTERM (ferry(1): "a second such
# signal (any of the three) while it stops ends ferry at once"; main.c's
# handler puts back the default action of all three): while ferry stops,
# waiting for a durability barrier that strace holds for 1.5 s, the second
# signal kills it well before the hold is over, and the next run completes
# the copy (as above, --verify included).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3

gen_tree src --seed 404 --files 3000 --median 32K --max-size 4M --no-links

# resume_leaves_done_alone LABEL DST: runs the same command again (-v);
# it must complete, copy exactly the files the manifest did not mark done
# before it, and leave the DST inode and ctime of those done unchanged.
resume_leaves_done_alone() {
	local label=$1 dst=$2
	done_files src "$dst" | sort >"$LOG/done.before"
	dst_meta "$dst" >"$LOG/dst.before"
	say "$label: $(wc -l <"$LOG/done.before") files done, $(wc -l <"$LOG/dst.before") in DST before the resume"

	expect_code 0 "$FERRY" -v src "$dst" || return
	sort "$LOG/out" >"$LOG/listed"
	(cd src && find . -type f -printf '%P\n') | sort |
		comm -23 - "$LOG/done.before" >"$LOG/not.done"
	same_set "$label: the resume copies exactly the files not done before it" \
		"$LOG/not.done" "$LOG/listed"
	check "$label: the resume lists no file twice" test -z "$(uniq -d "$LOG/listed")"

	dst_meta "$dst" >"$LOG/dst.after"
	join -t$'\t' "$LOG/dst.before" "$LOG/dst.after" |
		awk -F'\t' '$2 != $3 {print $1}' | comm -12 - "$LOG/done.before" >"$LOG/touched"
	cut -f1 "$LOG/dst.after" | comm -13 - "$LOG/done.before" >>"$LOG/touched"
	if [[ ! -s $LOG/touched ]]; then
		ok "$label: files done before the resume keep their DST inode and ctime"
	else
		fail "$label: files done before the resume keep their DST inode and ctime"
		show "$LOG/touched"
	fi
}

interrupt_and_resume() {
	local sig=$1 dst=dst-$1 t0 n_dst n_done
	bg "$FERRY" src "$dst"
	if ! wait_until 60 started_copying "$dst"; then
		fail "SIG$sig: the copy started within 60 s"
		return
	fi
	kill -"$sig" "$BG_PID"
	t0=$SECONDS
	bg_wait
	if [[ $BG_RC == 20 ]]; then
		ok "SIG$sig: exit 20"
	elif [[ $BG_RC == 0 ]]; then
		fail "SIG$sig: exit 20 (the run finished before the signal: make the tree bigger)"
	else
		fail "SIG$sig: exit 20 (got $BG_RC)"
		show "$LOG/bg.err"
	fi
	check "SIG$sig: stopped within $(slow_s 10) s" test $((SECONDS - t0)) -le "$(slow_s 10)"
	if grep -q 'resume with the same command' "$LOG/bg.err"; then
		ok "SIG$sig: stderr says 'resume with the same command'"
	else
		fail "SIG$sig: stderr says 'resume with the same command'"
		show "$LOG/bg.err"
	fi
	no_temp_files "$dst"

	"$FERRY" status src "$dst" >"$LOG/status" 2>&1
	check "SIG$sig: status says running: no" grep -qx 'running: no' "$LOG/status"
	n_dst=$(find "$dst" -type f | wc -l)
	n_done=$(sed -n 's/^done: \([0-9]*\) files.*/\1/p' "$LOG/status")
	if [[ $n_done == "$n_dst" ]]; then
		ok "SIG$sig: finished work committed ($n_done files done, $n_dst in DST)"
	else
		fail "SIG$sig: finished work committed (status done: '$n_done', files in DST: $n_dst)"
		show "$LOG/status"
	fi
	find "$dst" -type f -printf '%P\n' >"$LOG/in.dst"
	done_files src "$dst" >"$LOG/done"
	same_set "SIG$sig: the manifest's done rows are the files in DST" \
		"$LOG/in.dst" "$LOG/done"

	resume_leaves_done_alone "SIG$sig" "$dst"
	tree_equal src "$dst"
	no_temp_files "$dst"
	expect_code 0 "$FERRY" --verify src "$dst"
}

# caught PID SIG: PID is alive and has a handler for SIG (/proc: SigCgt);
# not_caught PID SIG: PID is alive and has none.
sig_caught_bit() {
	local mask
	mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
	[[ -n $mask ]] && echo $(((16#$mask >> ($(kill -l "$2") - 1)) & 1))
}
caught() { [[ $(sig_caught_bit "$1" "$2") == 1 ]]; }
not_caught() { [[ $(sig_caught_bit "$1" "$2") == 0 ]]; }

# HOLD_US: how long strace holds each syncfs (the barrier) of ferry: 1.5 s,
# up to 4 times that in a slow build, for the test's steps to fit in it.
HOLD_US=$((1500000 * (SLOW < 4 ? SLOW : 4)))

# death_gap_ms SIG N: from strace -ttt's log, the milliseconds between the
# Nth delivery of SIG and the first thread of ferry killed by it.
death_gap_ms() {
	awk -v sig="SIG$1" -v nth="$2" '
		$3 == "---" && $4 == sig && ++n == nth { t = $2 }
		t && $3 == "+++" && $4 == "killed" && $6 == sig {
			printf "%d\n", ($2 - t) * 1000; exit
		}' "$LOG/strace"
}

# second_signal_ends_at_once SIG: main.c's handler asks the run to stop and
# puts back the default action of SIG, so that a second SIG "ends ferry at
# once, as SIGKILL would" (ferry(1), Signals). Every syncfs (the barrier
# before done marks are committed) is held by strace for HOLD_US, so after
# a first SIG during the first barrier ferry is still stopping when the
# second SIG comes: that one must kill it (not exit 20), and at once, not
# once the barrier is through. (Under strace the held thread itself, and so
# the process, is reaped only when the hold ends: its end is taken from the
# other threads' deaths in strace's log.)
#
# second_signal_ends_at_once FIRST [SECOND]: SECOND (default FIRST) ends
# it: the first signal puts back the default action of all three.
second_signal_ends_at_once() {
	local first=$1 sig=${2:-$1} dst=dst-twice-$1-${2:-$1} tid pid gap s
	if ! have_strace; then
		say "SKIP the second-signal part: strace missing or not permitted"
		return
	fi
	: >"$LOG/strace"
	bg env "$(no_leak_check_env)" strace -f -ttt -o "$LOG/strace" -e trace=syncfs \
		-e inject=syncfs:delay_enter=$HOLD_US "$FERRY" src "$dst"
	if ! wait_until 60 grep -q ' syncfs(' "$LOG/strace"; then
		fail "SIG$first, SIG$sig: ferry reached its first barrier within 60 s"
		return
	fi
	tid=$(grep -m1 ' syncfs(' "$LOG/strace" | cut -d' ' -f1)
	pid=$(sed -n 's/^Tgid:[[:space:]]*//p' "/proc/$tid/status")
	if [[ -z $pid ]]; then
		fail "SIG$first, SIG$sig: ferry still runs at its first barrier (thread $tid)"
		return
	fi
	check "SIG$first, SIG$sig: ferry has a handler for SIG$sig" caught "$pid" "$sig"
	kill -"$first" "$pid"
	for s in INT TERM HUP; do
		check "SIG$first, SIG$sig: the first signal puts back the default action of SIG$s" \
			wait_until 2 not_caught "$pid" "$s"
	done
	check "SIG$first, SIG$sig: ferry is still stopping (its barrier is held)" \
		kill -0 "$pid"
	kill -"$sig" "$pid"
	bg_wait
	if [[ $BG_RC == $((128 + $(kill -l "$sig"))) ]] &&
		grep -q "^$pid .* +++ killed by SIG$sig" "$LOG/strace"; then
		ok "SIG$first, SIG$sig: the second one kills ferry by SIG$sig"
	else
		fail "SIG$first, SIG$sig: the second one kills ferry by SIG$sig (exit $BG_RC)"
		show "$LOG/bg.err"
		grep -E -- '--- SIG|\+\+\+' "$LOG/strace" | tail -n 5 | show -
	fi
	gap=$(death_gap_ms "$sig" "$([[ $first == "$sig" ]] && echo 2 || echo 1)")
	check "SIG$first, SIG$sig: at once (${gap:-no} ms after it), not after the held barrier" \
		test -n "$gap" -a "${gap:-0}" -lt $((HOLD_US / 2000))

	resume_leaves_done_alone "after SIG$first, SIG$sig" "$dst"
	tree_equal src "$dst"
	no_temp_files "$dst"
	expect_code 0 "$FERRY" --verify src "$dst"
}

interrupt_and_resume INT
interrupt_and_resume TERM
interrupt_and_resume HUP
second_signal_ends_at_once INT
second_signal_ends_at_once INT TERM

# A signal in the first moments of a run, once the handler is in place
# (before the scanner or a worker has started, at times): a stop as asked,
# exit 20, never "cannot start threads" (exit 6, seen under ASan when the
# stop came before the scanner's first thread). Then the copy completes.
# (ferry's own handler: the forked shell before its exec has one too)
ferry_caught() {
	[[ $(readlink "/proc/$1/exe") == "$(readlink -f "$FERRY")" ]] && caught "$1" TERM
}
early_rcs=()
for delay in 0 0 0.005 0.01 0.02 0.05 0.1; do
	rm -rf dst-early
	bg "$FERRY" src dst-early
	wait_until 10 ferry_caught "$BG_PID"
	sleep "$delay"
	kill -TERM "$BG_PID"
	bg_wait
	early_rcs+=("$BG_RC")
	[[ $BG_RC == 20 ]] || show "$LOG/bg.err"
done
check "SIGTERM at start: exit 20 every time (got ${early_rcs[*]})" \
	test "${early_rcs[*]}" = "20 20 20 20 20 20 20"
expect_code 0 "$FERRY" src dst-early
tree_equal src dst-early

# Under nohup (SIGHUP ignored when ferry starts) SIGHUP stays ignored: the
# copy goes on to the end; SIGINT still stops it cleanly.
sig_ignored_bit() {
	local mask
	mask=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
	[[ -n $mask ]] && echo $(((16#$mask >> ($(kill -l "$2") - 1)) & 1))
}
bg bash -c 'trap "" HUP; exec "$0" "$@"' "$FERRY" src dst-nohup
if wait_until 60 started_copying dst-nohup; then
	check "nohup: SIGHUP is still ignored (SigIgn)" test "$(sig_ignored_bit "$BG_PID" HUP)" = 1
	check "nohup: SIGINT is caught" caught "$BG_PID" INT
	kill -HUP "$BG_PID"
	bg_wait
	check "nohup: SIGHUP did not stop the copy (exit 0, got $BG_RC)" test "$BG_RC" = 0
	tree_equal src dst-nohup
else
	fail "nohup: the copy started within 60 s"
fi
finish
