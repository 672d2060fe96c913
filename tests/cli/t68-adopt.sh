#!/bin/bash
# t68-adopt: `ferry --adopt SRC DST` takes over a copy that cp -a or rsync
# made: what DST holds equal to SRC is hashed on both sides and recorded
# done without a byte of data written; the rest follows the normal rules.
#
# The tree: 40 small files in two directories, a 3 MiB file, an empty file,
# a symlink, a hard-linked pair, a file of mode 0640. Oracles: strace (the
# bytes written by write/pwrite64 into files under DST, summed from their
# return values), find (inode numbers and ns mtimes of DST's files), the
# manifest read with sqlite3, rsync -anciHAX, diff -r, xxh128sum -c over
# `ferry export`.
#
# Proves:
#  A. over a cp -a'd DST: exit 0, no data written into DST (strace), its
#     files' inodes and mtimes unchanged, every file and the symlink
#     adopted ("N adopted", -v lines, --json files_adopted, the log file's
#     "adopted" events), every row done in the manifest, a second plain
#     run copies nothing, --verify exit 0, xxh128sum -c of ferry export
#     passes, rsync -anciHAX finds nothing;
#  B. over a cp -a'd DST that was changed: a file with SRC's size and
#     mtime but another content is copied again (a warning names it), a
#     file of another size is left alone and fails with rule 9's reason
#     (exit 23, its bytes intact), a file whose mode differs is adopted and
#     its mode fixed in place (same inode), a file with a second name in
#     DST that SRC lacks is copied (a new inode: metadata applied in place
#     would change that other name too), the others adopted; --verify
#     finds every done file as recorded;
#  C. over an rsync -aH'd DST: adopted, no data written, hard links as in
#     SRC (rsync -anciH finds nothing); over an rsync -a'd DST (no -H: the
#     pair is two files) the second name becomes a link again;
#  D. --adopt with --verify, status or export is a usage error (exit 1);
#  E. --adopt --dry-run over a cp -a'd DST lists each file and symlink
#     it would adopt ("adopt: PATH", 44 of them, the symlink among them),
#     and the second name of the hard-linked pair as a copy (the run links
#     it): compared with find -type f -o -type l on SRC and the link
#     groups by inode (find -inum); writes nothing, makes no manifest.
#  F. over a DST made with cp -al (every DST file is SRC's own inode): no
#     file adopted, each copied to a new inode (find -printf %i on both
#     sides share none), and a second run copies and adopts nothing
#     (--json) and leaves SRC's ctimes (find -printf %C@) alone;
#  G. progress (on a terminal, made by script(1)) counts adopted bytes as
#     done: the last progress line of a run over a cp -a'd DST shows the
#     bytes done equal to the total.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd rsync sqlite3 xxh128sum
need_strace

mkdir -p src/a/b src/c
for i in $(seq 1 20); do printf 'file a %s\n' "$i" >"src/a/f$i"; done
for i in $(seq 1 20); do head -c $((i * 700)) /dev/urandom >"src/c/g$i"; done
head -c $((3 << 20)) /dev/urandom >src/big
: >src/empty
echo deep >src/a/b/deep
ln -s ../big src/a/sym
ln src/c/g1 src/a/g1-link
chmod 0640 src/c/g2
set_times src

# files under DIR written by a traced run: the sum of what write and
# pwrite64 returned on descriptors strace -y names under DIR
dst_written() {
	awk -v d="$2/" '/^(write|pwrite64)\(/ {
		if (index($0, "<" d) == 0) next
		n = $NF; if (n ~ /^[0-9]+$/) s += n
	} END { print s + 0 }' "$1".*
}
mtimes() { (cd "$1" && find . -type f -printf '%i %T@ %P\n' | sort -k3); }
rows() { sqlite3 -readonly "$1" "SELECT count(*) FROM files WHERE $2"; }

# ---- A: a cp -a'd DST ------------------------------------------------
cp -a src dst
mtimes dst >"$LOG/before"
expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq -e trace=write,pwrite64 \
	-o "$T/trA" "$FERRY" --adopt -v --log-file "$T/a.log" src dst
cp "$LOG/out" "$LOG/A.out"
cp "$LOG/err" "$LOG/A.err"
w=$(dst_written "$T/trA" "$T/dst")
check "A: no data written into DST (got $w bytes)" test "$w" = 0
mtimes dst >"$LOG/after"
check "A: DST's files keep their inodes and mtimes" cmp -s "$LOG/before" "$LOG/after"
# 20 + 20 + big + empty + deep + sym; the second name of g1 is its link
check "A: 44 adopted in the summary" grep -q '^ferry: 44 adopted' "$LOG/A.err"
check "A: -v lists 44 'adopted:' lines" test "$(grep -c '^adopted: ' "$LOG/A.out")" = 44
check "A: -v lists the symlink as adopted" grep -qx 'adopted: a/sym' "$LOG/A.out"
check "A: the log file has 44 adopted events" \
	test "$(grep -c '"event": *"adopted"' "$T/a.log")" = 44
M=$(manifest_path src dst)
check "A: the manifest exists" test -f "$M"
check "A: every row is done ($(rows "$M" 1) rows)" test "$(rows "$M" 'state != 1')" = 0
check "A: the files' rows have a hash" test "$(rows "$M" 'type = 1 AND hash IS NULL')" = 0
expect_code 0 "$FERRY" --json src dst
check "A: a plain re-run copies nothing" test "$(json_get "$LOG/out" files_copied)" = 0
check "A: and adopts nothing" test "$(json_get "$LOG/out" files_adopted)" = 0
expect_code 0 "$FERRY" --verify src dst
expect_code 0 "$FERRY" export src dst
cp "$LOG/out" "$T/sums"
check "A: xxh128sum -c of ferry export passes in DST" \
	bash -c 'cd dst && xxh128sum -c --quiet "$1"' _ "$T/sums"
rsync -anciHAX src/ dst/ >"$LOG/rsync" 2>&1
check "A: rsync -anciHAX finds nothing to do" test ! -s "$LOG/rsync"
tree_equal src dst

# ---- B: a changed cp -a'd DST --------------------------------------------
cp -a src dst2
head -c 2100 /dev/urandom >dst2/c/g3 # g3's size, another content
touch -r src/c/g3 dst2/c/g3
printf 'edited by the user\n' >dst2/c/g4 # another size
chmod 0604 dst2/c/g5
ino5=$(stat -c %i dst2/c/g5)
chmod 0600 dst2/c/g6
ln dst2/c/g6 dst2/extra-name # a name SRC does not have
expect_code 23 "$FERRY" --adopt --json src dst2
check "B: the summary counts 41 adopted" test "$(json_get "$LOG/out" files_adopted)" = 41
check "B: two files copied (g3, g6)" test "$(json_get "$LOG/out" files_copied)" = 2
check "B: a warning names c/g3" grep -q "'c/g3': --adopt: .*another content: copied again" "$LOG/err"
check "B: c/g3 now is SRC's" cmp -s src/c/g3 dst2/c/g3
check "B: c/g4 fails with rule 9's reason" \
	grep -q "'c/g4': not replaced: the destination has a file here that ferry did not write" "$LOG/err"
check "B: c/g4 keeps the user's bytes" grep -qx 'edited by the user' dst2/c/g4
check "B: c/g5's mode is SRC's again" test "$(stat -c %a dst2/c/g5)" = "$(stat -c %a src/c/g5)"
check "B: c/g5 is the same inode (fixed in place)" test "$(stat -c %i dst2/c/g5)" = "$ino5"
check "B: c/g6 (two names in DST, one in SRC) was copied, not changed in place" \
	test "$(stat -c %i dst2/c/g6)" != "$(stat -c %i dst2/extra-name)"
check "B: c/g6 has SRC's mode" test "$(stat -c %a dst2/c/g6)" = "$(stat -c %a src/c/g6)"
check "B: the name SRC does not have keeps its mode" test "$(stat -c %a dst2/extra-name)" = 600
# the row of c/g4 is not done: verify says so (exit 5), nothing differs
expect_code 5 "$FERRY" --verify src dst2
check "B: --verify: every done file is as recorded" grep -q ' 0 differ or are missing' "$LOG/err"

# ---- C: rsync -aH'd and rsync -a'd DSTs ----------------------------------
rsync -aH src/ dst3/
mtimes dst3 >"$LOG/before3"
expect_code 0 env "$(no_leak_check_env)" strace -ff -y -qq -e trace=write,pwrite64 \
	-o "$T/trC" "$FERRY" --adopt src dst3
w=$(dst_written "$T/trC" "$T/dst3")
check "C: rsync -aH: no data written into DST (got $w bytes)" test "$w" = 0
mtimes dst3 >"$LOG/after3"
check "C: rsync -aH: inodes and mtimes unchanged" cmp -s "$LOG/before3" "$LOG/after3"
rsync -anciH src/ dst3/ >"$LOG/rsync3" 2>&1
check "C: rsync -aH: rsync -anciH finds nothing" test ! -s "$LOG/rsync3"
hardlinks_equal src dst3
rsync -a src/ dst4/
check "C: rsync -a made the pair two files" test "$(stat -c %h dst4/c/g1)" = 1
expect_code 0 "$FERRY" --adopt src dst4
rsync -anciH src/ dst4/ >"$LOG/rsync4" 2>&1
check "C: rsync -a: rsync -anciH finds nothing after the adopt" test ! -s "$LOG/rsync4"
hardlinks_equal src dst4
expect_code 0 "$FERRY" --verify src dst4

# ---- D: --adopt goes with a copy only ------------------------------------
expect_code 1 "$FERRY" --adopt --verify src dst
expect_code 1 "$FERRY" status --adopt src dst
expect_code 1 "$FERRY" export --adopt src dst

# ---- E: --adopt --dry-run ------------------------------------------------
cp -a src dst5
mtimes dst5 >"$LOG/before5"
expect_code 0 "$FERRY" --adopt --dry-run src dst5
# the oracle: every file and symlink of SRC (find), less one name of each
# hard-link group (stat -c %i), which the run links; those are listed as
# copies (ferry picks the group's first name: either name may be it)
grep '^adopt: ' "$LOG/out" | sed 's/^adopt: //' | sort >"$LOG/adopt5"
grep -v '^adopt: ' "$LOG/out" | sort >"$LOG/copy5"
(cd src && find . \( -type f -o -type l \) -printf '%P\n' | sort) >"$LOG/all5"
sort -m "$LOG/adopt5" "$LOG/copy5" | sort >"$LOG/listed5"
check "E: the dry run lists every file and symlink once" cmp -s "$LOG/all5" "$LOG/listed5"
check "E: the symlink is listed to adopt" grep -qx 'a/sym' "$LOG/adopt5"
check "E: 44 'adopt:' lines" test "$(wc -l <"$LOG/adopt5")" = 44
check "E: one name listed to copy (to link)" test "$(wc -l <"$LOG/copy5")" = 1
c5=$(cat "$LOG/copy5")
check "E: it is a second name of a hard-link group ($c5)" \
	test "$(stat -c %h "src/$c5")" -gt 1 -a "$(cd src && find . -inum "$(stat -c %i "$c5")" -printf '%P\n' | grep -vxF "$c5" | grep -cxFf - "$LOG/adopt5")" = 1
check "E: the summary counts 44 to adopt" grep -q '^ferry: dry run: 44 to adopt' "$LOG/err"
mtimes dst5 >"$LOG/after5"
check "E: DST unchanged" cmp -s "$LOG/before5" "$LOG/after5"
check "E: no manifest made" test ! -e "$(manifest_path src dst5)"

# ---- F: a cp -al'd DST: SRC's own inodes are not adopted --------------------
cp -al src dst6
ctimes() { (cd "$1" && find . -type f -printf '%C@ %P\n' | sort -k2); }
expect_code 0 "$FERRY" --adopt --json src dst6
check "F: nothing adopted" test "$(json_get "$LOG/out" files_adopted)" = 0
shared=$(comm -12 <(find src -type f -printf '%i\n' | sort -u) \
	<(find dst6 -type f -printf '%i\n' | sort -u) | wc -l)
check "F: DST shares no inode with SRC (shared: $shared)" test "$shared" = 0
tree_equal src dst6
# (the first run's renames dropped a link of each SRC inode: its ctime
# moved once; from now on nothing touches SRC)
ctimes src >"$LOG/ctime-before"
expect_code 0 "$FERRY" --adopt --json src dst6
check "F: a second run copies nothing" test "$(json_get "$LOG/out" files_copied)" = 0
check "F: and adopts nothing" test "$(json_get "$LOG/out" files_adopted)" = 0
ctimes src >"$LOG/ctime-after"
check "F: the second run left SRC's ctimes alone" cmp -s "$LOG/ctime-before" "$LOG/ctime-after"

# ---- G: adopted bytes are done for the progress --------------------------
if command -v script >/dev/null 2>&1; then
	cp -a src dst7
	script -qec "$(printf '%q ' "$FERRY" --adopt src dst7)" /dev/null >"$LOG/tty" 2>&1
	last=$(tr '\r' '\n' <"$LOG/tty" | grep -a 'files, .* errors' | tail -n1)
	done_total=$(printf '%s\n' "$last" | sed -n 's/^.*files, \([^,]*\)\/\([^,]*\), .*$/\1|\2/p')
	check "G: the last progress line shows all bytes done ($last)" \
		test -n "$done_total" -a "${done_total%|*}" = "${done_total#*|}"
else
	printf "# skip G: no script(1) to run ferry on a terminal\n"
fi
finish
