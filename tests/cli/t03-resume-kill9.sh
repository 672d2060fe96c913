#!/bin/bash
# t03-resume-kill9: kill -9 at any moment never costs more than a re-copy.
#
# ferry is killed with SIGKILL at least 10 times: after random delays, in
# the copy before the first commit, and after a commit (see kill_one_run);
# whenever a run gets to finish before its kill, more files are added to
# the source so that there is always work left.
# Then the same command runs to the end. Proves:
#  - no run after a kill is refused (manifest intact: not 3; lock freed: not 4);
#  - the final tree is identical to the source, no *.ferry-part is left,
#    and `ferry --verify` finds nothing wrong;
#  - files the manifest had marked done before the final run are not copied
#    again: the final run's -v list holds none of them and their DST inodes
#    are unchanged.
# The random delays come from FERRY_TEST_SEED (printed) for reproduction.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3

KILLS_WANTED=10
seed=${FERRY_TEST_SEED:-$$}
RANDOM=$seed
say "random seed $seed (set FERRY_TEST_SEED to repeat)"

gen_tree src --seed 303 --files 3000 --median 16K --max-size 2M

# done_files: relative paths of the regular files the manifest says are
# done, read with the sqlite3 shell in read-only mode (no run is active).
done_files() {
	local m
	m=$(manifest_path src dst)
	[[ -f $m ]] || return 0
	sqlite3 -readonly "$m" "
		SELECT CASE WHEN d.path = X'' THEN CAST(f.name AS TEXT)
		       ELSE CAST(d.path AS TEXT) || '/' || CAST(f.name AS TEXT) END
		FROM files f JOIN dirs d ON d.id = f.dir
		WHERE f.state = 1 AND f.type = 1;"
}

# files_in_place: regular files under their final name in DST.
files_in_place() {
	find dst -type f ! -name '*.ferry-part' 2>/dev/null | wc -l
}

# run_progressed: this run has put a file in place, or has ended.
run_progressed() {
	(($(files_in_place) > IN_PLACE_BEFORE)) || ! kill -0 "$BG_PID" 2>/dev/null
}

# run_committed: this run has listed a copied file (-v lines are printed
# as their done marks are committed), or has ended. The manifest itself is
# not polled: the kill loop must not depend on concurrent readers.
run_committed() {
	[[ -s $LOG/bg.out ]] || ! kill -0 "$BG_PID" 2>/dev/null
}

# kill_one_run N: start a run and SIGKILL it at a moment that depends on N:
#   N % 3 == 0: after a plain random 20-300 ms (scanning, opening, anything);
#   N % 3 == 1: 0-150 ms after this run put its first file in place
#               (copying, barrier, before the first commit);
#   N % 3 == 2: 20-170 ms after this run committed its first done marks
#               (so that the job progresses however slow the build is).
kill_one_run() {
	local delay
	delay=$(printf '0.%03d' $((RANDOM % 150)))
	IN_PLACE_BEFORE=$(files_in_place)
	bg "$FERRY" -v src dst
	case $(($1 % 3)) in
	0) delay=$(printf '0.%03d' $((RANDOM % 280 + 20))) ;;
	1) wait_until 120 run_progressed ;;
	2)
		wait_until 120 run_committed
		delay=$(printf '0.%03d' $((RANDOM % 150 + 20)))
		;;
	esac
	sleep "$delay"
	kill -KILL "$BG_PID" 2>/dev/null
	bg_wait
	KILL_NOTE="after ${delay}s, schedule $(($1 % 3))"
}

# kill_loop: until KILLS_WANTED kills hit a live run. Every run's exit status
# must be 0 (it finished first: more files are added) or 137 (killed).
kill_loop() {
	local kills=0 runs=0 extra=0
	while ((kills < KILLS_WANTED && runs < 60)); do
		runs=$((runs + 1))
		kill_one_run "$runs"
		case $BG_RC in
		137) kills=$((kills + 1)) ;;
		0)
			extra=$((extra + 1))
			say "run $runs finished before its kill ($KILL_NOTE); adding files"
			gen_tree "src/more-$extra" --seed $((303 + extra)) --files 1500 \
				--median 32K --max-size 2M
			;;
		*)
			fail "run $runs (killed $KILL_NOTE) exits 0 or 137, got $BG_RC"
			show "$LOG/bg.err"
			return 1
			;;
		esac
	done
	if ((kills >= KILLS_WANTED)); then
		ok "$kills runs killed with SIGKILL mid-run ($runs runs)"
	else
		fail "$KILLS_WANTED runs killed with SIGKILL mid-run (only $kills of $runs)"
	fi
	say "$(files_in_place) files in place in DST after the kills"
}

# final_run_copies_only_unfinished: the last run copies nothing that was
# already done, and leaves those files' DST inodes alone.
final_run_copies_only_unfinished() {
	done_files | sort >"$LOG/done.before"
	inode_map dst >"$LOG/inodes.before"
	say "$(wc -l <"$LOG/done.before") files were done before the final run"
	check "the manifest marked some files done" test -s "$LOG/done.before"

	expect_code 0 "$FERRY" -v src dst || return
	sort "$LOG/out" >"$LOG/copied.final"
	comm -12 "$LOG/done.before" "$LOG/copied.final" >"$LOG/recopied"
	if [[ ! -s $LOG/recopied ]]; then
		ok "final run copied none of the files already done ($(wc -l <"$LOG/copied.final") copied)"
	else
		fail "final run copied none of the files already done"
		show "$LOG/recopied"
	fi

	inode_map dst >"$LOG/inodes.after"
	join -t$'\t' -1 2 -2 2 <(sort -t$'\t' -k2 "$LOG/inodes.before") \
		<(sort -t$'\t' -k2 "$LOG/inodes.after") |
		awk -F'\t' '$2 != $3 {print $1}' | sort >"$LOG/inode.changed"
	comm -12 "$LOG/done.before" "$LOG/inode.changed" >"$LOG/touched"
	if [[ ! -s $LOG/touched ]]; then
		ok "DST inodes of files done before the final run are unchanged"
	else
		fail "DST inodes of files done before the final run are unchanged"
		show "$LOG/touched"
	fi
}

kill_loop
final_run_copies_only_unfinished
tree_equal src dst
no_temp_files dst
expect_code 0 "$FERRY" --verify src dst
check "status: nothing pending" test "$(status_count src dst pending)" = 0
finish
