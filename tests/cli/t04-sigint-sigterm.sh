#!/bin/bash
# t04-sigint-sigterm: SIGINT and SIGTERM stop a run cleanly.
#
# For each signal, a copy is started and signalled as soon as its first file
# shows up in DST. Proves:
#  - ferry exits 20 within a few seconds, and says on stderr
#    "resume with the same command";
#  - it leaves no *.ferry-part behind and releases the job ("running: no");
#  - the work it finished is committed: every file present in DST is marked
#    done ("done: N files" equals the files in DST);
#  - running the same command again completes the copy exactly.
. "$(dirname "$0")/lib.sh" || exit 1

gen_tree src --seed 404 --files 3000 --median 32K --max-size 4M --no-links

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
	check "SIG$sig: stopped within 10 s" test $((SECONDS - t0)) -le 10
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

	expect_code 0 "$FERRY" -q src "$dst"
	tree_equal src "$dst"
	no_temp_files "$dst"
}

interrupt_and_resume INT
interrupt_and_resume TERM
finish
