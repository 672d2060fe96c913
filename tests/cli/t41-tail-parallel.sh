#!/bin/bash
# t41-tail-parallel: the end-of-run tree work (directory metadata, --delete's
# deletions) runs on the worker pool, and still every directory gets its
# metadata after everything below it was made, deleted and given its own,
# and a directory is removed after what was in it.
#
# The trees have many directories, most of them empty (an empty directory
# is made by the tree work itself, so making it changes its parent's mtime:
# a parent given its times before a child was made ends up with the wrong
# mtime), at depths 1 to 4, each with its own nanosecond mtime. Proves,
# with -j 16, each DST compared with its SRC by find's listing of every
# directory's ns mtime and mode and by tree_equal (diff -r, rsync -nc with
# directory times, find):
#  - a first copy: every directory's mtime and mode as in SRC;
#  - --delete after nested subtrees (files and directories at depths 2 to
#    4) left SRC and their parents were touched: exactly those entries are
#    gone (find before/after, and -v lists each once), no warning (stderr
#    holds the summary only), exit 0,
#    every directory that stays has SRC's mtime;
#  - the same again with --durability=file (each directory fsynced by the
#    tree work instead of a syncfs).
# On a fast DST the tree work runs on the main thread; FERRY_TREE_POOL=1
# (test builds) gives it to the workers from the first job, as a DST with
# latency does after a few.
. "$(dirname "$0")/lib.sh" || exit 1

export FERRY_TREE_POOL=1

need_cmd rsync python3

# mk_tree DIR: 40 top directories, each with 3 files and 6 subdirectories
# of 4 empty ones each (1 in 3 with 2 files), every directory's mtime set
# deepest first so that none changes after.
# (One mkdir and one python3 for the times: a fork per entry took 1-2
# minutes of the test on a loaded machine.)
mk_tree() {
	local d=$1 i j k dirs=()
	for ((i = 0; i < 40; i++)); do
		for ((j = 0; j < 6; j++)); do
			for ((k = 0; k < 4; k++)); do
				dirs+=("$d/t$i/s$j/e$k")
			done
		done
	done
	mkdir -p "${dirs[@]}" "$d/t0/s0/e0/deep/er" || die "mkdir $d"
	for ((i = 0; i < 40; i++)); do
		for ((j = 0; j < 6; j++)); do
			for ((k = 0; k < 4; k += 3)); do
				echo "$i $j $k" >"$d/t$i/s$j/e$k/f1"
				echo "$k" >"$d/t$i/s$j/e$k/f2"
			done
		done
		for ((j = 0; j < 3; j++)); do echo "$i.$j" >"$d/t$i/g$j"; done
	done
	# mtimes, children before parents, each distinct (ns)
	python3 - "$d" <<'PY' || die "setting the times of $d"
import os, sys
n = 0
for top, dirs, files in os.walk(sys.argv[1], topdown=False):
    for name in files + dirs:
        n += 1
        t = (1500000000 + n * 7) * 10**9 + n * 7919 % 10**9
        os.utime(os.path.join(top, name), ns=(t, t), follow_symlinks=False)
PY
	chmod 0750 "$d/t1/s1" "$d/t2"
}

# dir_times DIR: every directory's path, ns mtime and mode (an oracle
# with no ferry code in it).
dir_times() { (cd "$1" && find . -type d -printf '%P|%T@|%m\n' | sort); }

listing() { (cd "$1" && find . -mindepth 1 -printf '%P|%y\n' | sort); }

# same_dir_times A B WHAT
same_dir_times() {
	dir_times "$1" >"$LOG/dt.a"
	dir_times "$2" >"$LOG/dt.b"
	if cmp -s "$LOG/dt.a" "$LOG/dt.b"; then
		ok "$3: every directory's ns mtime and mode as in SRC ($(wc -l <"$LOG/dt.a") dirs)"
	else
		fail "$3: every directory's ns mtime and mode as in SRC"
		diff "$LOG/dt.a" "$LOG/dt.b" | head -n 10 | show -
	fi
}

# remove_nested SRC: takes subtrees at depths 2 to 4 out of SRC (and so
# touches their parents), then gives those parents new distinct mtimes.
remove_nested() {
	local s=$1 i
	for ((i = 3; i < 40; i += 3)); do
		rm -rf "$s/t$i/s2" "$s/t$i/s4/e3" "$s/t$i/g1"
		touch -d "@1700000000.$((100000000 + i))" "$s/t$i/s4" "$s/t$i"
	done
	rm -rf "$s/t0/s0/e0/deep"
	touch -d @1700000001.5 "$s/t0/s0/e0"
}

# one_case NAME FERRY-OPTIONS...
one_case() {
	local c=$1
	shift
	mk_tree "$c/src"
	expect_code 0 "$FERRY" -q -j 16 "$@" "$c/src" "$c/dst"
	same_dir_times "$c/src" "$c/dst" "$c first copy"
	tree_equal "$c/src" "$c/dst"

	listing "$c/dst" >"$LOG/before"
	remove_nested "$c/src"
	listing "$c/src" >"$LOG/after"
	comm -23 "$LOG/before" "$LOG/after" | cut -d'|' -f1 | sort >"$LOG/gone"
	expect_code 0 "$FERRY" -v -j 16 --delete "$@" "$c/src" "$c/dst"
	if ! grep -qv '^ferry: [0-9]* files copied' "$LOG/err"; then
		ok "$c --delete: no warning"
	else
		fail "$c --delete: no warning"
		show "$LOG/err"
	fi
	verbose_deleted "$LOG/out" | sort >"$LOG/deleted"
	if cmp -s "$LOG/gone" "$LOG/deleted"; then
		ok "$c --delete: -v lists each of the $(wc -l <"$LOG/gone") entries gone once"
	else
		fail "$c --delete: -v lists each of the entries gone once"
		diff "$LOG/gone" "$LOG/deleted" | head -n 10 | show -
	fi
	same_dir_times "$c/src" "$c/dst" "$c after --delete"
	tree_equal "$c/src" "$c/dst"
}

one_case a
one_case b --durability=file

finish
