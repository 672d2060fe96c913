#!/bin/bash
# t97-give-back: a worker whose batch has run too long (the source got
# slower since the batch was sized) starts none of the items left and
# gives them back; the coordinator hands those rows out again. Giving
# back must neither lose a file nor copy one twice.
#
# FERRY_GIVE_BACK_NS=1 (test builds) makes every batch of the first pass
# give back all but its first item, so every row but one in each batch
# goes back and out again, many of them several times. Proves, on a
# gentree tree (files, empty files, symlinks, hardlinks in nested
# directories), with -j 1, -j 8 and -j auto:
#  - the copy equals SRC (tree_equal: diff -r, rsync -nc with times and
#    modes, find) and keeps the same hardlink groups;
#  - -v lists each file copied exactly once, and --json's files_copied is
#    SRC's number of regular files and symlinks that are not a second name
#    of a hardlink group (files_linked are those);
#  - a re-run copies nothing;
#  - SIGINT while batches give back, then the same command: the copy is
#    whole and equal, nothing listed twice over both runs.
. "$(dirname "$0")/lib.sh" || exit 1

need_test_hooks
need_cmd rsync
export FERRY_GIVE_BACK_NS=1

gen_tree "$T/src" --seed 97 --files 600
want_files=$(find "$T/src" \( -type f -o -type l \) | wc -l)
want_links=$(find "$T/src" -type f -links +1 -printf '%i\n' | sort | uniq -c |
	awk '{n += $1 - 1} END {print n + 0}')

# copied_once OUT WHAT: every path -v printed, printed once
copied_once() {
	verbose_copied "$1" | sort | uniq -d >"$LOG/twice"
	if [[ ! -s $LOG/twice ]]; then
		ok "$2: -v lists no file twice"
	else
		fail "$2: -v lists no file twice"
		show "$LOG/twice"
	fi
}

for j in 1 8 auto; do
	d=$T/dst-$j
	expect_code 0 "$FERRY" -v --json -j "$j" --manifest "$T/m-$j.db" \
		"$T/src" "$d"
	copied_once "$LOG/out" "-j $j"
	# the summary is the last line of stdout
	tail -n 1 "$LOG/out" >"$LOG/json"
	copied=$(json_get "$LOG/json" files_copied)
	linked=$(json_get "$LOG/json" files_linked)
	check "-j $j: files_copied $copied + files_linked $linked = $want_files, linked $want_links" \
		test "$((copied + linked))" = "$want_files" -a "$linked" = "$want_links"
	tree_equal "$T/src" "$d"
	hardlinks_equal "$T/src" "$d"
	expect_code 0 "$FERRY" --json -j "$j" --manifest "$T/m-$j.db" \
		"$T/src" "$d"
	check "-j $j: a re-run copies nothing" \
		test "$(json_get "$LOG/out" files_copied)" = 0
done

# SIGINT mid-run, then the same command
slow=$T/dst-int
bg "$FERRY" -v -j 8 --bwlimit 200K --manifest "$T/m-int.db" "$T/src" "$slow"
wait_until 20 started_copying "$slow" ||
	fail "SIGINT case: ferry started copying"
kill -INT "$BG_PID"
bg_wait
check "SIGINT: exit 20 (interrupted)" test "$BG_RC" = 20
cp "$LOG/bg.out" "$LOG/first"
expect_code 0 "$FERRY" -v -j 8 --manifest "$T/m-int.db" "$T/src" "$slow"
cat "$LOG/first" "$LOG/out" >"$LOG/both"
copied_once "$LOG/both" "interrupted and resumed"
tree_equal "$T/src" "$slow"
hardlinks_equal "$T/src" "$slow"

finish
