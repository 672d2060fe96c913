#!/bin/bash
# t20-crash-points: a crash at any named point never leaves a false done mark.
#
# ferry's test build _exit(86)s the nth time it passes a crash point
# (FERRY_CRASH=point:nth, include/ferry/fsio.h). For every crash point and
# several nth, on a fresh job over a generated tree (hardlinks, symlinks, a
# sparse file) plus lib.sh's hostile tree (odd names, a path deeper than
# PATH_MAX, modes, owners):
#  1. the crashing run exits 86 (or 0 when it finished before the nth pass,
#     counted as "not reached"; nth=1 must always be reached);
#  2. before anything else, the invariant: every row the manifest calls done
#     exists in DST with the recorded size and hash (xxhsum -H2, or the hash
#     of the link target) and hardlinks are one inode;
#  3. a resumed run that crashes at the first pass of the same point, and the
#     invariant again (leftover temp files of two crashes);
#  4. the plain command completes (exit 0), DST equals SRC by the oracles, no
#     *.ferry-part is left, and ferry --verify exits 0.
# Then the same for incremental runs with --delete: the source is mutated
# (changed, added, deleted files) before each crash. (This found that a
# changed file could be renamed over its old copy before its row's pending
# state was committed, leaving a stale done row; fixed by "Hand out no row
# while scan results are uncommitted".)
# Prints the number of crash points x iterations run.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd
need_test_hooks

POINTS=(after_write after_rename before_barrier after_barrier before_commit after_commit)
# nth values: per-file points are passed once per file, batch points once
# per batch (a few per run on this tree).
read -r -a NTH_FILE <<<"$(pick '1 7 100' '1 7 120' '1 2 3 5 7 11 20 40 60 100 150 250 320')"
read -r -a NTH_BATCH <<<"$(pick '1 2' '1 2' '1 2 3 4 5 6')"
MUTATIONS=$(pick 1 1 4) # incremental rounds per crash point

work_in_tmpfs 1g
gen_tree src/gen --seed 2020 --files "$(pick 300 200 600)" --sparse --max-size 2M
make_hostile_tree src/hostile
mkdir -p src/empty-dir-at-top

iterations=0
not_reached=0

# crash_once LABEL POINT NTH OPTIONS...: steps 1-4 above on the current job.
crash_once() {
	local label=$1 point=$2 nth=$3
	shift 3
	run env "$(crash_env)" FERRY_CRASH="$point:$nth" "$FERRY" -q "$@" src dst
	case $RC in
	86) ok "$label: run crashed (exit 86)" ;;
	0)
		if ((nth == 1)); then
			fail "$label: crash point $point is reached (run exited 0)"
		else
			not_reached=$((not_reached + 1))
			say "$label: finished before pass $nth of $point"
		fi
		;;
	*)
		fail "$label: crashing run exits 86 (got $RC)"
		show "$LOG/err"
		;;
	esac
	iterations=$((iterations + 1))
	no_sanitizer_report "$LOG/err"
	local m
	m=$(manifest_path src dst)
	[[ -n $m ]] || m=none
	manifest_invariant "$m" dst "$label: after the crash"

	run env "$(crash_env)" FERRY_CRASH="$point:1" "$FERRY" -q "$@" src dst
	if [[ $RC == 86 || $RC == 0 ]]; then
		ok "$label: resumed run crashed again at $point:1 or finished ($RC)"
	else
		fail "$label: resumed run crashed again at $point:1 or finished (got $RC)"
		show "$LOG/err"
	fi
	m=$(manifest_path src dst)
	manifest_invariant "${m:-none}" dst "$label: after the second crash"

	final_state src dst "$@"
}

fresh_job() {
	chmod -R u+rwX dst 2>/dev/null
	rm -rf dst "$XDG_STATE_HOME/ferry"
}

for point in "${POINTS[@]}"; do
	if [[ $point == after_write || $point == after_rename ]]; then
		nths=("${NTH_FILE[@]}")
	else
		nths=("${NTH_BATCH[@]}")
	fi
	for nth in "${nths[@]}"; do
		say "--- fresh copy, crash at $point:$nth"
		fresh_job
		crash_once "$point:$nth" "$point" "$nth"
	done
done

# incremental runs: a complete job, a mutated source, a crash, a resume.
# (This found that deleting the first name of a hardlink group split the
# other names into separate files; fixed, see t25.)
fresh_job
expect_code 0 "$FERRY" -q src dst
round=0
for point in "${POINTS[@]}"; do
	for ((r = 1; r <= MUTATIONS; r++)); do
		round=$((round + 1))
		"$GENTREE" --mutate 10 --add 20 --delete-pct 3 --seed $((2100 + round)) \
			src/gen >"$LOG/mutate.out" 2>&1 || die "gentree --mutate failed"
		say "--- incremental --delete run $round, crash at $point:1"
		crash_once "incremental $round $point:1" "$point" 1 --delete
	done
done

say "crash points x iterations: ${#POINTS[@]} points, $iterations crashing runs" \
	"($not_reached finished before their nth pass), each resumed with a second crash"
finish
