#!/bin/bash
# t03-resume-kill9: kill -9 at any moment never costs more than a re-copy.
#
# ferry is killed with SIGKILL at least 10 times: after random delays, in
# the copy before the first commit, and after a commit (see kill_one_run);
# whenever a run gets to finish before its kill, more files are added to
# the source so that there is always work left: a new subtree, and files
# spread over the existing directories, next to files already done.
# Then the same command runs to the end. Proves:
#  - no run after a kill is refused (manifest intact: not 3; lock freed: not 4);
#  - the final tree is identical to the source, no *.ferry-part is left,
#    and `ferry --verify` finds nothing wrong;
#  - at every resume (each run of the loop, killed or not, and the final
#    run), the files the manifest had marked done before it stay as they
#    are: the run's -v list holds none of them, their DST inode and ctime
#    are unchanged (ctime not for hardlinked paths: linking a follower to
#    its first name changes it), and each was in DST to begin with;
#  - no run lists a file as copied twice.
# The random delays come from FERRY_TEST_SEED (printed) for reproduction.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3

KILLS_WANTED=10
seed=${FERRY_TEST_SEED:-$$}
RANDOM=$seed
say "random seed $seed (set FERRY_TEST_SEED to repeat)"

gen_tree src --seed 303 --files 3000 --median 16K --max-size 2M

# snapshot_done: taken before a run: the files the manifest marks done
# ($LOG/done.before), dst_meta ($LOG/dst.before), and the paths hardlinked
# in SRC ($LOG/linked), whose DST ctime changes when a follower is linked.
snapshot_done() {
	done_files src dst | sort >"$LOG/done.before"
	dst_meta dst >"$LOG/dst.before"
	(cd src && find . -type f -links +1 -printf '%P\n') | sort >"$LOG/linked"
}

# complete_lines FILE: FILE without a last line cut short (by a kill).
complete_lines() {
	if [[ -s $1 && $(tail -c1 -- "$1" | od -An -c | tr -d ' ') != '\n' ]]; then
		sed '$d' -- "$1"
	else
		cat -- "$1"
	fi
}

# done_left_alone VERBOSE-OUT: after a run, with snapshot_done taken before
# it, one "KIND: PATH" line per problem; none when the run left every file
# done before it alone and listed no path twice. "copied again" lines first.
done_left_alone() {
	complete_lines "$1" | sort >"$LOG/listed"
	comm -12 "$LOG/done.before" "$LOG/listed" | sed 's/^/copied again: /'
	uniq -d "$LOG/listed" | sed 's/^/listed twice by one run: /'
	dst_meta dst >"$LOG/dst.after"
	awk -F'\t' '
		FILENAME == ARGV[1] { done[$0] = 1; next }
		FILENAME == ARGV[2] { linked[$0] = 1; next }
		FILENAME == ARGV[3] { if ($1 in done) before[$1] = $2; next }
		{ after[$1] = $2 }
		END {
			for (p in done) {
				if (!(p in before)) { print "done but not in DST before the run: " p; continue }
				if (!(p in after)) { print "gone from DST: " p; continue }
				split(before[p], b, " ")
				split(after[p], a, " ")
				if (a[1] != b[1])
					print "new inode in DST: " p
				else if (a[2] != b[2] && !(p in linked))
					print "new ctime in DST: " p
			}
		}' "$LOG/done.before" "$LOG/linked" "$LOG/dst.before" "$LOG/dst.after" | sort
}

# show_problems FILE: the first three lines of each kind, and the counts.
show_problems() {
	awk -F': ' '{ if (++n[$1] <= 3) print }
		END { for (k in n) printf "%d x %s\n", n[k], k }' "$1" | show - 40
}

# recopy_note: what the run just checked copied again: files that were in
# place in DST but not yet marked done (the marks a kill lost).
recopy_note() {
	local in_place again
	in_place=$(cut -f1 "$LOG/dst.before" | comm -23 - "$LOG/done.before" | tee "$LOG/undone" | wc -l)
	again=$(comm -12 "$LOG/undone" "$LOG/listed" | wc -l)
	printf '%s done before, %s in place but not done, %s of them copied again' \
		"$(wc -l <"$LOG/done.before")" "$in_place" "$again"
}

# files_in_place: regular files under their final name in DST.
files_in_place() {
	find dst -type f ! -name '*.ferry-part' 2>/dev/null | wc -l
}

# run_progressed: this run has put a file in place, or has ended.
run_progressed() {
	(($(files_in_place) > IN_PLACE_BEFORE)) || ! kill -0 "$BG_PID" 2>/dev/null
}

# run_committed: this run has listed a copied file, or has ended. -v lines
# are printed as their done marks are recorded, just before the COMMIT,
# which kill_one_run waits out (it takes longer under a sanitizer on a
# loaded machine: once, 10 such kills all came before it). The manifest
# itself is not polled: the kill loop must not depend on concurrent readers.
run_committed() {
	[[ -s $LOG/bg.out ]] || ! kill -0 "$BG_PID" 2>/dev/null
}

# kill_one_run N: start a run and SIGKILL it at a moment that depends on N:
#   N % 3 == 0: after a plain random 20-300 ms (scanning, opening, anything);
#   N % 3 == 1: 0-150 ms after this run put its first file in place
#               (copying, barrier, before the first commit);
#   N % 3 == 2: 20-170 ms (times SLOW) after this run listed its first
#               done files (so that the job progresses however slow the
#               build is).
kill_one_run() {
	local delay
	delay=$(printf '0.%03d' $((RANDOM % 150)))
	snapshot_done
	IN_PLACE_BEFORE=$(files_in_place)
	bg "$FERRY" -v src dst
	case $(($1 % 3)) in
	0) delay=$(printf '0.%03d' $((RANDOM % 280 + 20))) ;;
	1) wait_until 120 run_progressed ;;
	2)
		wait_until 120 run_committed
		delay=$(((RANDOM % 150 + 20) * SLOW))
		delay=$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))
		;;
	esac
	sleep "$delay"
	kill -KILL "$BG_PID" 2>/dev/null
	bg_wait
	KILL_NOTE="after ${delay}s, schedule $(($1 % 3))"
}

# kill_loop: until KILLS_WANTED kills hit a live run. Every run's exit status
# must be 0 (it finished first: more files are added) or 137 (killed), and
# every run must leave alone the files done before it (done_left_alone).
kill_loop() {
	local kills=0 runs=0 extra=0 bad=0 checked=0
	while ((kills < KILLS_WANTED && runs < 60)); do
		runs=$((runs + 1))
		kill_one_run "$runs"
		done_left_alone "$LOG/bg.out" >"$LOG/problems"
		say "run $runs (exit $BG_RC): $(recopy_note)"
		if [[ -s $LOG/problems ]]; then
			bad=$((bad + 1))
			fail "run $runs (exit $BG_RC, killed $KILL_NOTE) left the files done before it alone"
			show_problems "$LOG/problems"
		fi
		[[ -s $LOG/done.before ]] && checked=$((checked + 1))
		case $BG_RC in
		137) kills=$((kills + 1)) ;;
		0)
			extra=$((extra + 1))
			say "run $runs finished before its kill ($KILL_NOTE); adding files"
			gen_tree "src/more-$extra" --seed $((303 + extra)) --files 1000 \
				--median 32K --max-size 2M
			# and some next to files already done, in every directory
			gen_tree src --mutate 0 --add 500 --seed $((303 + extra)) \
				--median 32K --max-size 2M
			;;
		*)
			fail "run $runs (killed $KILL_NOTE) exits 0 or 137, got $BG_RC"
			show "$LOG/bg.err"
			return 1
			;;
		esac
	done
	if ((!bad && checked)); then
		ok "$checked runs that resumed a job copied no file done before them and left those in DST alone (inode, ctime); no run listed a file twice"
	elif ((!bad)); then
		fail "some runs resumed a job with files already done (none did)"
	fi
	if ((kills >= KILLS_WANTED)); then
		ok "$kills runs killed with SIGKILL mid-run ($runs runs)"
	else
		fail "$KILLS_WANTED runs killed with SIGKILL mid-run (only $kills of $runs)"
	fi
	say "$(files_in_place) files in place in DST after the kills"
}

# final_run_copies_only_unfinished: the last run copies nothing that was
# already done, leaves those files alone in DST, and lists no file twice.
final_run_copies_only_unfinished() {
	snapshot_done
	say "$(wc -l <"$LOG/done.before") files were done before the final run"
	check "the manifest marked some files done" test -s "$LOG/done.before"

	expect_code 0 "$FERRY" -v src dst || return
	done_left_alone "$LOG/out" >"$LOG/problems"
	grep '^copied again: ' "$LOG/problems" >"$LOG/recopied"
	if [[ ! -s $LOG/recopied ]]; then
		ok "final run copied none of the files already done ($(wc -l <"$LOG/out") copied)"
	else
		fail "final run copied none of the files already done"
		show_problems "$LOG/recopied"
	fi
	grep -v '^copied again: ' "$LOG/problems" >"$LOG/touched"
	if [[ ! -s $LOG/touched ]]; then
		ok "files done before the final run: in DST, same inode and ctime, none listed twice"
	else
		fail "files done before the final run: in DST, same inode and ctime, none listed twice"
		show_problems "$LOG/touched"
	fi
}

kill_loop
final_run_copies_only_unfinished
tree_equal src dst
no_temp_files dst
expect_code 0 "$FERRY" --verify src dst
check "status: nothing pending" test "$(status_count src dst pending)" = 0
finish
