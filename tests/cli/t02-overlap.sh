#!/bin/bash
# t02-overlap: copying starts while the scan is still running.
#
# How this is observed without depending on the machine's speed: ferry runs
# under strace, which delays every getdents64 (the system call behind
# readdir) by 20 ms. Listing the ~300 directories of the tree then takes
# seconds, while copying is not slowed at all. strace writes its log in the
# order the calls happen, so it is enough to compare two positions in it:
#   - the first call that creates a file in DST (a *.ferry-part temp file, or
#     a rename into place), i.e. the first copy, and
#   - the last getdents64 on a directory of SRC, i.e. the end of the scan.
# If ferry waited for the scan to finish, the first would come after the
# second. The test requires it to come before.
. "$(dirname "$0")/lib.sh" || exit 1
need_strace

gen_tree src --seed 202 --files 4000 --dirs-fanout 10-16 --depth 4 --no-links
srcabs=$(readlink -f src)
dstabs=$T/dst

run_traced() {
	env "$(no_leak_check_env)" strace -f -y -o "$LOG/strace" \
		-e trace=getdents64,openat,openat2,rename,renameat,renameat2 \
		-e inject=getdents64:delay_enter=20000 \
		"$FERRY" -q src dst >"$LOG/out" 2>"$LOG/err"
	RC=$?
}

# line_of WHICH REGEX: line number of the first or last match in the log.
line_of() {
	grep -n -E -- "$2" "$LOG/strace" | sed -n "$1{s/:.*//;p}"
}

run_traced
if [[ $RC == 0 ]]; then ok "traced run exits 0"; else
	fail "traced run exits 0 (got $RC)"
	show "$LOG/err"
fi

first_copy=$(line_of 1 "(openat2?|rename[a-z0-9]*)\(.*<$dstabs(/[^>]*)?>, \"[^\"]*\.ferry-part\"")
last_scan=$(line_of '$' "getdents64\([0-9]+<$srcabs(/[^>]*)?>")
say "first copy at log line ${first_copy:-none}, last source listing at ${last_scan:-none}"
if [[ -z $first_copy || -z $last_scan ]]; then
	fail "strace log shows both the scan and the copy"
	show "$LOG/strace" 10
elif ((first_copy < last_scan)); then
	ok "the first file was copied before the scan listed its last directory"
else
	fail "the first file was copied before the scan listed its last directory"
fi

tree_equal src dst
no_temp_files dst
finish
