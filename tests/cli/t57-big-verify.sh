#!/bin/bash
# t57-big-verify: --verify of a file copied in chunks names the byte ranges
# that differ, and the next run rewrites only those chunks, in place.
#
# SRC holds a 100 MiB file of random bytes (7 chunks of 16 MiB: 0-16777215,
# 16777216-33554431, 33554432-50331647, ..., 83886080-100663295 and a short
# last one to 104857599) and a small one. After the copy, one byte of DST's big file
# at offset 40000000 is changed with dd conv=notrunc (and its mtime put
# back: a bit flip on disk leaves the times alone). Proves:
#  - ferry --verify exits 5 and lists "mismatch: big: ... bytes
#    33554432-50331647 differ": exactly the third chunk's range;
#  - the repair run writes about one chunk to DST's file (strace -y sums of
#    pwrite64/write on it: > 0 and <= 16 MiB + 1 MiB) and nothing to a temp
#    file, keeps DST's inode (rewritten in place, no rename), and leaves
#    cmp SRC DST equal, xxh128sum equal, a second --verify exit 0;
#  - two bytes in the first and the last chunk: both ranges named, the
#    last one ending at the file's end; repaired the same way;
#  - three adjacent chunks corrupted are named as one range;
#  - a chunk corrupted after the verify (so the in-place repair's read-back
#    still differs): the run falls back to a whole copy into a temp and a
#    rename, which its own in-place writes must not block (rule 9 compares
#    DST with the recorded mtime: the repair puts it back), exit 0, cmp
#    equal, no temp file left, --verify clean.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd xxh128sum cmp dd
need_strace

MIB=$((1 << 20))
SIZE=$((100 * MIB))
mkdir src
head -c "$SIZE" /dev/urandom >src/big || die "cannot write the source"
echo small >src/small
expect_code 0 "$FERRY" -q src dst
check "the copy is identical" cmp -s src/big dst/big

# corrupt OFFSET...: one byte changed in dst/big at each offset, its mtime
# kept (a bit rot leaves the times as they were)
corrupt() {
	local off b
	for off in "$@"; do
		b=$(dd if=dst/big bs=1 skip="$off" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
		printf "\\$(printf '%03o' $(((b + 1) % 256)))" |
			dd of=dst/big bs=1 seek="$off" conv=notrunc 2>/dev/null
	done
	touch -r src/big dst/big
}

# verify_names RANGES: --verify exits 5 and its mismatch line names exactly
# RANGES ("bytes A-B, C-D differ")
verify_names() {
	expect_code 5 "$FERRY" --verify src dst
	show "$LOG/out"
	check "--verify lists big, naming $1" \
		grep -qx "mismatch: big: .*: $1" "$LOG/out"
	check "--verify lists nothing else" \
		test "$(grep -c '^mismatch: ' "$LOG/out")" = 1
}

# repair MAX_BYTES: the next run rewrites at most MAX_BYTES of dst/big, in
# place (same inode, no temp file written), and leaves it identical
repair() {
	local ino written temp
	ino=$(stat -c %i dst/big)
	expect_code 0 env "$(no_leak_check_env)" strace -f -y -qq \
		-e trace=pwrite64,write -o "$T/trace" "$FERRY" -q src dst
	written=$(awk '/^[0-9]+ +(pwrite64|write)\(/ && /\/dst\/big>/ { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T/trace")
	temp=$(awk '/^[0-9]+ +(pwrite64|write)\(/ && /\.ferry-part>/ { n = $NF; if (n ~ /^[0-9]+$/) s += n } END { print s + 0 }' "$T/trace")
	say "repair: $written bytes written to dst/big, $temp to temp files"
	check "the repair wrote to dst/big ($written bytes)" test "$written" -gt 0
	check "the repair wrote at most $1 bytes to dst/big ($written)" \
		test "$written" -le "$1"
	check "the repair wrote no temp file ($temp bytes)" test "$temp" = 0
	check "dst/big was rewritten in place (same inode)" \
		test "$(stat -c %i dst/big)" = "$ino"
	check "cmp SRC DST: identical after the repair" cmp -s src/big dst/big
	check "xxh128sum equal after the repair" \
		test "$(xxh128sum <src/big | cut -d' ' -f1)" = "$(xxh128sum <dst/big | cut -d' ' -f1)"
	check "the mtime is SRC's again" \
		test "$(stat -c %Y.%y src/big)" = "$(stat -c %Y.%y dst/big)"
	expect_code 0 "$FERRY" --verify src dst
}

# --- one byte in the third chunk
corrupt 40000000
check "the corruption took (cmp differs)" eval '! cmp -s src/big dst/big'
verify_names "bytes 33554432-50331647 differ"
repair $((17 * MIB))

# --- the first and the last (short) chunk
corrupt 17 $((SIZE - 1))
verify_names "bytes 0-16777215, 100663296-104857599 differ"
repair $((16 * MIB + 4 * MIB + MIB))

# --- three adjacent chunks (the last two and the short last one): one range
corrupt $((65 * MIB)) $((81 * MIB)) $((97 * MIB))
verify_names "bytes 67108864-104857599 differ"
repair $((36 * MIB + MIB))

# --- chunk 0 named by verify, then chunk 2 corrupted too: the fall-back
corrupt 100
verify_names "bytes 0-16777215 differ"
corrupt $((64 * MIB + 5))
expect_code 0 "$FERRY" -q src dst
check "cmp SRC DST: identical after the fall-back copy" cmp -s src/big dst/big
check "the mtime is SRC's after the fall-back" \
	test "$(stat -c %Y.%y src/big)" = "$(stat -c %Y.%y dst/big)"
no_temp_files dst
expect_code 0 "$FERRY" --verify src dst

no_temp_files dst
finish
