#!/bin/bash
# t06-verify: --verify finds damage that metadata cannot show.
#
# Proves:
#  - on a good copy, --verify exits 0 and changes nothing in DST, and its
#    --json summary says it verified as many files as find sees in SRC;
#  - a DST file altered in place with its size and mtime kept, and a deleted
#    DST file, make --verify exit 5 and print "mismatch: PATH" and
#    "missing: PATH" on stdout (nothing else is named), and --json says
#    mismatched 2 of all the files verified;
#  - the next plain run repairs exactly those two, after which --verify
#    exits 0 again;
#  - --verify=source re-reads SRC and finds a source file changed behind an
#    unchanged size and mtime; --verify=both is clean after the repair.
. "$(dirname "$0")/lib.sh" || exit 1

gen_tree src --seed 606 --files 400 --no-links
mkdir -p src/named
head -c 50000 /dev/urandom >src/named/damaged.bin
head -c 60000 /dev/urandom >src/named/deleted.bin
head -c 70000 /dev/urandom >src/named/source-changed.bin

# alter_in_place FILE: overwrite the middle byte, restore the mtime.
alter_in_place() {
	local b off
	off=$(($(stat -c %s -- "$1") / 2))
	touch -r "$1" "$LOG/ref"
	b=$(dd if="$1" bs=1 skip="$off" count=1 status=none | od -An -tu1 | tr -d ' ')
	printf "\\x$(printf %02x $(((b + 1) % 256)))" |
		dd of="$1" bs=1 seek="$off" conv=notrunc status=none
	touch -r "$LOG/ref" "$1"
}

ctimes() { find dst -printf '%P %i %C@ %T@\n' | sort; }

# copied_files: how many files find sees in SRC (regular files and symlinks,
# which a copy records and --verify checks; this tree has no symlinks).
copied_files() { find src \( -type f -o -type l \) -printf . | wc -c; }

# verify_lines: the "mismatch:"/"missing:" lines of the last run, sorted.
verify_lines() { grep -E '^(mismatch|missing): ' "$LOG/out" | sort; }

check_clean_verify() {
	ctimes >"$LOG/ctimes.before"
	expect_code 0 "$FERRY" --verify src dst
	check "clean verify names no file" test -z "$(verify_lines)"
	ctimes >"$LOG/ctimes.after"
	check "verify changes nothing in DST" cmp -s "$LOG/ctimes.before" "$LOG/ctimes.after"
	expect_code 0 "$FERRY" --verify --json src dst
	check "verify --json is one JSON object" json_valid "$LOG/out"
	expect_json "$LOG/out" verified "$(copied_files)"
	expect_json "$LOG/out" mismatched 0
	expect_json "$LOG/out" exit_code 0
}

check_damaged_dest() {
	alter_in_place dst/named/damaged.bin
	rm dst/named/deleted.bin
	check "the damage keeps size and mtime" test \
		"$(stat -c '%s %Y' src/named/damaged.bin)" = "$(stat -c '%s %Y' dst/named/damaged.bin)"
	expect_code 5 "$FERRY" --verify --json src dst
	printf '%s\n' 'mismatch: named/damaged.bin' 'missing: named/deleted.bin' >"$LOG/want"
	verify_lines >"$LOG/got"
	same_set "--verify names exactly the damaged and the missing file" \
		"$LOG/want" "$LOG/got"
	# the summary is the last line, after the named files
	tail -n1 "$LOG/out" >"$LOG/summary"
	expect_json "$LOG/summary" verified "$(copied_files)"
	expect_json "$LOG/summary" mismatched 2
	expect_json "$LOG/summary" exit_code 5

	expect_code 0 "$FERRY" -v src dst
	printf '%s\n' named/damaged.bin named/deleted.bin >"$LOG/want"
	verbose_copied "$LOG/out" >"$LOG/got"
	same_set "the next run repairs exactly those two" "$LOG/want" "$LOG/got"
	check "damaged file repaired" cmp -s src/named/damaged.bin dst/named/damaged.bin
	check "missing file restored" cmp -s src/named/deleted.bin dst/named/deleted.bin
	expect_code 0 "$FERRY" --verify src dst
}

check_source_verify() {
	alter_in_place src/named/source-changed.bin
	expect_code 0 "$FERRY" --verify=dest src dst
	expect_code 5 "$FERRY" --verify=source src dst
	printf '%s\n' 'mismatch: named/source-changed.bin' >"$LOG/want"
	verify_lines >"$LOG/got"
	same_set "--verify=source names the file changed behind its mtime" \
		"$LOG/want" "$LOG/got"
	expect_code 0 "$FERRY" -q src dst
	check "changed source file copied again" \
		cmp -s src/named/source-changed.bin dst/named/source-changed.bin
	expect_code 0 "$FERRY" --verify=both src dst
}

# a file --verify marks after a no-change re-run (its directory's rows keep
# an older generation) still counts as not copied yet for the next verify
check_verify_after_noop_run() {
	expect_code 0 "$FERRY" -q src dst
	alter_in_place dst/named/damaged.bin
	expect_code 5 "$FERRY" --verify src dst
	expect_code 5 "$FERRY" --verify src dst
	check "a second verify says files are not copied yet" \
		grep -q 'not copied yet' "$LOG/err"
	expect_code 0 "$FERRY" -q src dst
	expect_code 0 "$FERRY" --verify src dst
}

expect_code 0 "$FERRY" -q src dst
check_clean_verify
check_damaged_dest
check_source_verify
check_verify_after_noop_run
tree_equal src dst
finish
