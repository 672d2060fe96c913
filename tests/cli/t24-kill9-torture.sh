#!/bin/bash
# t24-kill9-torture: many kill -9 at random moments lose nothing.
#
# The long mode (FERRY_TORTURE=long) copies a tree of 20,000 files and kills
# ferry with SIGKILL at least 50 times; the short CI mode 3,000 files and
# 15 kills (fewer under a sanitizer). A kill lands after a random delay,
# shortly after the run put its first file in place, or shortly after its
# first commit; when a run finishes before its kill, more files are added
# to the source so that there is always work left. Proves:
#  - every run exits 0 or is killed (137): no run after a kill is refused
#    (manifest intact: not 3; lock freed: not 4);
#  - after every kill, the manifest invariant: each done row is in DST with
#    its recorded size and hash;
#  - kills during --verify leave the job intact as well;
#  - at the end the plain command completes, DST == SRC by the oracles, no
#    temp file is left, --verify exits 0 and nothing is pending.
# The random moments come from FERRY_TEST_SEED (printed) for reproduction.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd

FILES=$(pick 2000 1500 20000)
KILLS_WANTED=$(pick 10 8 60)
VERIFY_KILLS=$(pick 3 2 10)
seed=${FERRY_TEST_SEED:-$$}
RANDOM=$seed
say "random seed $seed (set FERRY_TEST_SEED to repeat)"


gen_tree src --seed 2424 --files "$FILES" --median 8K --max-size 1M --sparse
say "source: $(du -sh --apparent-size src | cut -f1) in $(find src -type f | wc -l) files"

files_in_place() {
	find dst -type f ! -name '*.ferry-part' 2>/dev/null | wc -l
}
run_progressed() {
	(($(files_in_place) > IN_PLACE_BEFORE)) || ! kill -0 "$BG_PID" 2>/dev/null
}
run_committed() {
	[[ -s $LOG/bg.out ]] || ! kill -0 "$BG_PID" 2>/dev/null
}

# kill_one_run N [OPTIONS...]: start a run, SIGKILL it at a moment that
# depends on N (see the top).
kill_one_run() {
	local n=$1 delay
	shift
	IN_PLACE_BEFORE=$(files_in_place)
	bg "$FERRY" -v "$@" src dst
	case $((n % 3)) in
	0) delay=$(printf '0.%03d' $((RANDOM % 200 + 5))) ;;
	1)
		wait_until 120 run_progressed
		delay=$(printf '0.%03d' $((RANDOM % 80)))
		;;
	2)
		wait_until 120 run_committed
		delay=$(printf '0.%03d' $((RANDOM % 100)))
		;;
	esac
	sleep "$delay"
	kill -KILL "$BG_PID" 2>/dev/null
	bg_wait
	KILL_NOTE="after ${delay}s, schedule $((n % 3))"
}

kills=0
runs=0
extra=0
while ((kills < KILLS_WANTED && runs < KILLS_WANTED * 4)); do
	runs=$((runs + 1))
	kill_one_run "$runs"
	case $BG_RC in
	137)
		kills=$((kills + 1))
		manifest_invariant "$(manifest_path src dst)" dst "kill $kills ($KILL_NOTE)"
		;;
	0)
		extra=$((extra + 1))
		say "run $runs finished before its kill ($KILL_NOTE); adding files"
		gen_tree "src/more-$extra" --seed $((2424 + extra)) --files $((FILES / 3)) \
			--median 16K --max-size 1M
		;;
	*)
		fail "run $runs (killed $KILL_NOTE) exits 0 or 137, got $BG_RC"
		show "$LOG/bg.err"
		no_sanitizer_report "$LOG/bg.err"
		break
		;;
	esac
done
if ((kills >= KILLS_WANTED)); then
	ok "$kills runs killed with SIGKILL mid-run ($runs runs)"
else
	fail "$KILLS_WANTED runs killed with SIGKILL mid-run (only $kills of $runs)"
fi

expect_code 0 "$FERRY" -q src dst
# kills during --verify
vkills=0
for ((v = 1; v <= VERIFY_KILLS; v++)); do
	bg "$FERRY" -q --verify src dst
	sleep "$(printf '0.%03d' $((RANDOM % 200 + 10)))"
	kill -KILL "$BG_PID" 2>/dev/null
	bg_wait
	case $BG_RC in
	137) vkills=$((vkills + 1)) ;;
	0) ;;
	*)
		fail "verify run $v exits 0 or 137 (got $BG_RC)"
		show "$LOG/bg.err"
		;;
	esac
done
say "$vkills --verify runs killed"
manifest_invariant "$(manifest_path src dst)" dst "after the killed verify runs"

final_state src dst
check "status: nothing pending" test "$(status_count src dst pending)" = 0
say "kills: $kills copy runs + $vkills verify runs killed with SIGKILL, $runs copy runs, $(find src -type f | wc -l) files"
finish
