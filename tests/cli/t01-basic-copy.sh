#!/bin/bash
# t01-basic-copy: a first copy is identical to its source.
#
# The source is the hostile tree (odd names, 255-byte names, a path deeper
# than PATH_MAX, symlinks incl. dangling ones, hardlinks, sparse files, odd
# modes, owners) next to a few thousand generated files. Proves:
#  - every oracle (diff -r, rsync -c, find metadata, deep hashes) finds the
#    trees equal: content, names, modes and ns mtimes of files and dirs, owners;
#  - sparse files stay sparse, hardlinks stay hardlinks, symlinks are copied
#    as symlinks and never followed;
#  - no temporary file is left, and the manifest lives in $XDG_STATE_HOME;
#  - -q prints nothing at all on success, neither on stdout nor on stderr;
#  - --no-hard-links makes independent copies with the same content, and its
#    --json summary counts what find sees in SRC: every non-directory entry
#    seen and copied (symlinks too), and bytes_copied the sum of the sizes
#    stat gives each regular file's name;
#  - a fifo is copied as a fifo next to the rest (t42 tests specials);
#    --no-specials reports it and skips it.
. "$(dirname "$0")/lib.sh" || exit 1

build_source() {
	gen_tree src/generated --seed 101 --files 3000 --sparse --max-size 4M
	make_hostile_tree src/hostile
	touch -d @1234567890.123456789 src
}

check_symlinks_not_followed() {
	local d=$1/hostile
	check "link-to-dir is still a symlink to a/b" \
		test -L "$d/link-to-dir" -a "$(readlink "$d/link-to-dir")" = a/b
	check "dangling symlink copied as is" \
		test -L "$d/link-dangling" -a "$(readlink "$d/link-dangling")" = does/not/exist
	check "absolute symlink target kept verbatim" \
		test "$(readlink "$d/link-absolute")" = /etc/hostname
	check "symlink loop copied as a symlink" test -L "$d/link-loop"
}

check_sparse_files() {
	local f
	sparse_kept src dst hostile/sparse.img
	sparse_kept src dst hostile/a/sparse-small.img
	# gentree --sparse makes one file of --max-size with 64 KiB per MiB
	while IFS= read -r -d '' f; do
		sparse_kept src dst "generated/$f"
	done < <(cd src/generated && find . -maxdepth 1 -type f -size +1M -printf '%P\0')
}

check_manifest_location() {
	local m
	m=$(manifest_path src dst)
	case $m in
	"$XDG_STATE_HOME"/ferry/*.db) ok "manifest is under \$XDG_STATE_HOME/ferry" ;;
	*) fail "manifest is under \$XDG_STATE_HOME/ferry (status says '$m')" ;;
	esac
	check "manifest file exists" test -f "$m"
}

# count FIND-ARGS...: how many entries find prints (names may hold newlines).
count() { find "$@" -printf . | wc -c; }

check_no_hard_links() {
	local entries copyable bytes
	entries=$(count src ! -type d)
	copyable=$(count src \( -type f -o -type l \))
	bytes=$(find src -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	expect_code 0 "$FERRY" --json --no-hard-links src dst-nolinks
	expect_json "$LOG/out" files_seen "$entries"
	expect_json "$LOG/out" files_copied "$copyable"
	expect_json "$LOG/out" bytes_copied "$bytes"
	link_groups dst-nolinks >"$LOG/nolinks"
	if [[ ! -s $LOG/nolinks ]]; then
		ok "--no-hard-links: no file in the copy has a second name"
	else
		fail "--no-hard-links: no file in the copy has a second name"
		show "$LOG/nolinks"
	fi
	if diff -r --no-dereference -x "$LONG_DIR" src dst-nolinks >"$LOG/diff" 2>&1; then
		ok "--no-hard-links: same content"
	else
		fail "--no-hard-links: same content"
		show "$LOG/diff"
	fi
	check "--no-hard-links: former links differ in inode" test \
		"$(stat -c %i dst-nolinks/hostile/tri1)" != "$(stat -c %i dst-nolinks/hostile/a/b/tri2)"
}

# a fifo is copied as a fifo; --no-specials: a warning names it, the run
# still succeeds.
check_special_files() {
	mkdir special
	printf 'data\n' >special/regular
	mkfifo special/a-fifo
	expect_code 0 "$FERRY" special dst-special
	check "the fifo is a fifo in DST" test -p dst-special/a-fifo
	check "regular file next to the fifo copied" cmp -s special/regular dst-special/regular
	expect_code 0 "$FERRY" --no-specials special dst-nospecial
	check "--no-specials: a warning names the fifo" grep -q a-fifo "$LOG/err"
	check "--no-specials: regular file next to the fifo copied" cmp -s special/regular dst-nospecial/regular
	check "--no-specials: fifo not created in DST" test ! -e dst-nospecial/a-fifo
}

build_source
expect_code 0 "$FERRY" -q src dst
check "nothing on stdout with -q" test ! -s "$LOG/out"
check "nothing on stderr with -q" test ! -s "$LOG/err"
show "$LOG/err"
tree_equal src dst
hardlinks_equal src dst
check_sparse_files
check_symlinks_not_followed dst
no_temp_files dst
check_manifest_location
check_no_hard_links
check_special_files
finish
