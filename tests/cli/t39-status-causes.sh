#!/bin/bash
# t39-status-causes: `ferry status` groups failures by cause (side, step,
# errno), most frequent first, and tells SRC's failures from DST's by what
# was recorded, not by the words of a message.
#
# The tree (run as an unprivileged user, as root reads and writes all):
# 1,003 source files of mode 0000 spread over three directories (open on
# SRC: EACCES), two source directories of mode 0000 (the scan cannot open
# them: EACCES), and a directory ro/ that already exists in DST owned by
# root (7 files cannot be created there: EACCES on DST; its mode cannot be
# set: EPERM on DST, as for DST itself, also root's: a metadata shortfall,
# the directories are there). The oracle counts each group with find in
# SRC, not with ferry.
#
# Proves:
#  A. the causes come as "N × WORDS" lines, most frequent first, with the
#     counts find gives: "1,003 × permission denied opening a file of SRC",
#     "7 × permission denied creating a file in DST", "2 × permission denied
#     opening a directory of SRC"; under each, its own failures only (the
#     SRC open cause lists files of mode 0000, the DST create cause files of
#     ro/), at most 5, then "... and 998 more of this cause" for the big
#     one; apart from them, under "metadata not applied", "2 × operation
#     not permitted setting a mode in DST" (DST and ro/: there, their mode
#     refused);
#  B. --failures lists every failure under its cause: the paths of the SRC
#     open cause are exactly the files find gives, those of the DST create
#     cause exactly ro/'s files, the SRC directories exactly the 0000 ones;
#     DST's own shortfall names "the destination directory", never the
#     source one, though its path is "." like SRC's;
#  C. --json gives every failure with cause, key, side, step and errno, and
#     a causes array whose counts are find's, sorted most frequent first,
#     adding up to the failed count; the two directories' modes apart in
#     metadata_causes and metadata_failures;
#  D. the end of a run lists its first 100 failures and says how many more;
#     once the 1,003 files are readable a re-run copies them and lists
#     what still fails, DST itself (a shortfall) as "the destination
#     directory".
. "$(dirname "$0")/lib.sh" || exit 1
need_unprivileged
need_cmd python3

W=$T/nobody
mkdir -p "$W/src/ro" "$W/src/lock1" "$W/src/lock2"
for d in a b c; do
	mkdir -p "$W/src/$d"
	for i in $(seq 1 340); do printf '%s %s\n' "$d" "$i" >"$W/src/$d/f$i"; done
done
for i in 1 2 3 4 5 6 7; do printf 'ro %s\n' "$i" >"$W/src/ro/r$i"; done
printf 'x\n' >"$W/src/lock1/x"
printf 'y\n' >"$W/src/lock2/y"
chown -R "$NOBODY_UID:$NOBODY_GID" "$W/src"
# 1,003 unreadable files: f1..f334 of a and b, f1..f335 of c
for d in a b; do for i in $(seq 1 334); do chmod 0000 "$W/src/$d/f$i"; done; done
for i in $(seq 1 335); do chmod 0000 "$W/src/c/f$i"; done
chmod 0000 "$W/src/lock1" "$W/src/lock2"
# DST and DST/ro exist and are root's: nobody may write DST, not ro/
mkdir -m 0777 "$W/dst"
mkdir -m 0755 "$W/dst/ro"

# the oracle, from SRC with find (as root, who sees into lock1 and lock2)
find "$W/src" -type f -perm 0000 -printf '%P\n' | sort >"$LOG/want.src_open"
find "$W/src" -mindepth 1 -type d -perm 0000 -printf '%P\n' | sort >"$LOG/want.src_dir"
find "$W/src/ro" -type f -printf 'ro/%P\n' | sort >"$LOG/want.dst_create"
n_src_open=$(wc -l <"$LOG/want.src_open")
n_src_dir=$(wc -l <"$LOG/want.src_dir")
n_dst_create=$(wc -l <"$LOG/want.dst_create")
check "oracle: 1003 files, 2 directories, 7 files in ro" \
	test "$n_src_open:$n_src_dir:$n_dst_create" = 1003:2:7

expect_code 23 as_nobody "$FERRY" "$W/src" "$W/dst"
cp "$LOG/err" "$LOG/run.err"

# ---- A: the grouped text -------------------------------------------------
expect_code 0 as_nobody "$FERRY" status "$W/src" "$W/dst"
cp "$LOG/out" "$LOG/status"
# the failures' causes come first, then the metadata shortfalls' heading
sed '/^metadata not applied, by cause/q' "$LOG/status" | grep ' × ' >"$LOG/causes"
sed -n '/^metadata not applied, by cause/,$p' "$LOG/status" | grep ' × ' >"$LOG/meta.causes"
printf '%s\n' "1,003 × permission denied opening a file of SRC" \
	"7 × permission denied creating a file in DST" \
	"2 × permission denied opening a directory of SRC" >"$LOG/want.causes"
check "A: the causes with find's counts" diff "$LOG/want.causes" "$LOG/causes"
check "A: most frequent first" \
	test "$(sed -n 's/ ×.*//p' "$LOG/causes" | tr -d , | tr '\n' ' ')" = "1003 7 2 "
check "A: the directories' refused modes are metadata shortfalls, apart" \
	test "$(cat "$LOG/meta.causes")" = "2 × operation not permitted setting a mode in DST"

# cause_lines FILE WORDS: the "failed:" and "metadata:" lines under the
# heading that ends in WORDS, up to the next heading
cause_lines() {
	awk -v want="$2" '
		/ × / { on = (substr($0, index($0, " × ") + length(" × ")) == want); next }
		/^\.\.\. and / { next }
		on && /^(failed|metadata): / { print }
	' "$1"
}
cause_lines "$LOG/status" "permission denied opening a file of SRC" |
	sed -n "s/^failed: '\(.*\)': open source: Permission denied\$/\1/p" |
	sort >"$LOG/a.src_open"
check "A: the 5 failures shown of the big cause are files of mode 0000" \
	bash -c 'test "$(wc -l <"$1")" = 5 && ! comm -23 "$1" "$2" | grep -q .' _ \
	"$LOG/a.src_open" "$LOG/want.src_open"
check "A: it says how many are not shown, and how to see them" \
	grep -qxF '... and 998 more of this cause (`ferry status --failures` lists them all)' "$LOG/status"
cause_lines "$LOG/status" "permission denied creating a file in DST" |
	sed -n "s/^failed: '\(.*\)': create destination: Permission denied\$/\1/p" |
	sort >"$LOG/a.dst_create"
check "A: the 5 DST failures shown are files of ro/" \
	bash -c 'test "$(wc -l <"$1")" = 5 && ! comm -23 "$1" "$2" | grep -q .' _ \
	"$LOG/a.dst_create" "$LOG/want.dst_create"

# ---- B: --failures lists all, each under its cause ------------------------
expect_code 0 as_nobody "$FERRY" status --failures "$W/src" "$W/dst"
cp "$LOG/out" "$LOG/all"
check "B: no line says more are not shown" bash -c '! grep -q "^\.\.\. and " "$1"' _ "$LOG/all"
cause_lines "$LOG/all" "permission denied opening a file of SRC" |
	sed -n "s/^failed: '\(.*\)': open source: Permission denied\$/\1/p" | sort >"$LOG/b.src_open"
check "B: the SRC open cause lists exactly the files of mode 0000" \
	diff "$LOG/want.src_open" "$LOG/b.src_open"
cause_lines "$LOG/all" "permission denied creating a file in DST" |
	sed -n "s/^failed: '\(.*\)': create destination: Permission denied\$/\1/p" | sort >"$LOG/b.dst_create"
check "B: the DST create cause lists exactly ro/'s files" \
	diff "$LOG/want.dst_create" "$LOG/b.dst_create"
cause_lines "$LOG/all" "permission denied opening a directory of SRC" |
	sed -n "s/^failed: '\(.*\)': cannot read directory: Permission denied\$/\1/p" | sort >"$LOG/b.src_dir"
check "B: the SRC directory cause lists exactly the directories of mode 0000" \
	diff "$LOG/want.src_dir" "$LOG/b.src_dir"
cause_lines "$LOG/all" "operation not permitted setting a mode in DST" >"$LOG/b.dst_mode"
check "B: DST's own shortfall names the destination directory" \
	grep -qxF "metadata: the destination directory '$(realpath "$W/dst")': set directory mode: Operation not permitted" "$LOG/b.dst_mode"
check "B: ... and ro/'s mode is the other one" \
	grep -qxF "metadata: 'ro': set directory mode: Operation not permitted" "$LOG/b.dst_mode"
check "B: nothing is blamed on the source directory itself" \
	bash -c '! grep -q "the source directory" "$1"' _ "$LOG/all"
check "B: every failed file has its line" \
	test "$(grep -c -e "^failed: '" -e '^failed: the ' "$LOG/all")" = \
	"$(sed -n 's/^failed: \([0-9]*\) files$/\1/p' "$LOG/all")"

# ---- C: --json -------------------------------------------------------------
expect_code 0 as_nobody "$FERRY" status --json "$W/src" "$W/dst"
cp "$LOG/out" "$LOG/json"
check "C: the JSON has the causes with find's counts, most frequent first" \
	python3 - "$LOG/json" "$n_src_open" "$n_dst_create" "$n_src_dir" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
n_open, n_create, n_dir = map(int, sys.argv[2:5])
want = {("SRC", "open", 13): n_open, ("DST", "create", 13): n_create,
        ("SRC", "opendir", 13): n_dir}
got = {(c["side"], c["step"], c["errno"]): c["count"] for c in s["causes"]}
assert got == want, got
counts = [c["count"] for c in s["causes"]]
assert counts == sorted(counts, reverse=True), counts
assert sum(counts) == s["failed"] == len(s["failures"]), (sum(counts), s["failed"])
per = {}
for f in s["failures"]:
    k = (f["side"], f["step"], f["errno"])
    per[k] = per.get(k, 0) + 1
    assert f["key"] == "%s:%s:%d" % (f["side"].lower(), f["step"], f["errno"]), f
    assert f["cause"] in {c["cause"] for c in s["causes"]}, f
assert per == want, per
assert not [f for f in s["failures"] if f["path"] == "."], "DST's root failed"
m = s["metadata_failures"]
assert sorted(f["path"] for f in m) == [".", "ro"], m
assert all((f["side"], f["step"], f["errno"]) == ("DST", "chmod", 1) for f in m), m
assert [(c["key"], c["count"]) for c in s["metadata_causes"]] == [("dst:chmod:1", 2)], s
assert s["meta_failed"] == 2, s["meta_failed"]
EOF

# ---- D: the end of the run -------------------------------------------------
# its first 100 failures are of the big cause; once those files are
# readable, the next run retries them and lists what still fails
check "D: the run's list stops at 100 and says how many more" \
	grep -qx "ferry: \.\.\. and 912 more; \`ferry status\` lists them all" "$LOG/run.err"
for d in a b c; do chmod 0644 "$W/src/$d"/f*; done
expect_code 23 as_nobody "$FERRY" "$W/src" "$W/dst"
cp "$LOG/err" "$LOG/run.err"
check "D: the re-run copied the files made readable" diff -r "$W/src/a" "$W/dst/a"
check "D: the run names the DST top directory's shortfall as the destination's" \
	grep -qxF "ferry: metadata: the destination directory '$W/dst': set directory mode: Operation not permitted" "$LOG/run.err"
check "D: the run lists a SRC directory the scan could not read" \
	grep -qxF "ferry: failed: 'lock1': cannot read directory: Permission denied" "$LOG/run.err"
check "D: ... and its scan warning" \
	grep -qxF "ferry: warning: 'lock1': cannot read directory: Permission denied" "$LOG/run.err"
finish
