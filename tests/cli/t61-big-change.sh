#!/bin/bash
# t61-big-change: a large file rewritten in SRC while it is copied in
# chunks is never marked done. SRC (a 200 MiB file) is behind bench/slowfs
# (15 ms per operation); once the manifest holds a first chunk of it, bytes
# in its middle are rewritten in SRC (the underlying directory, not through
# the mount: the copy's fstat sees a new mtime and ctime). The run must end
# with that file changed (not done: the manifest's row is not done, DST has
# no file of that name, and no temp is left, its chunks being of the old
# content), the other file copied. A second run with SRC left alone copies
# it right: exit 0, cmp equal, --verify exit 0.
# Needs bench/slowfs (libfuse3, /dev/fuse, fusermount3), sqlite3.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd sqlite3 cmp dd

need_slowfs
MNT=$T/mnt
umount_mnt() { umount_fuse "$MNT"; }
trap 'umount_mnt; cleanup' EXIT

SIZE=$((200 << 20))
mkdir src "$MNT"
head -c "$SIZE" /dev/urandom >src/big || die "cannot write the source"
echo small >src/small
# no attribute cache: the copy's fstat sees the rewrite at once (with
# FUSE's default 1 s, a change in the last second of a copy is not seen:
# that is the share's cache, not ferry's check)
"$SLOWFS" --latency-us 15000 "$T/src" "$MNT" -o attr_timeout=0,entry_timeout=0 2>"$LOG/slowfs.err" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"

bg "$FERRY" --retries 0 "$MNT" dst
db=
first_chunk() {
	[[ -n $db ]] || db=$(manifest_path "$MNT" dst)
	[[ -n $db && -f $db ]] || return 1
	local n
	n=$(sqlite3 -cmd '.timeout 2000' "file:$db?mode=ro" 'SELECT count(*) FROM chunks' 2>/dev/null) || return 1
	((n >= 1))
}
changed_mid=0
if wait_until 120 eval 'first_chunk || ! kill -0 "$BG_PID" 2>/dev/null' &&
	kill -0 "$BG_PID" 2>/dev/null; then
	printf 'rewritten' | dd of=src/big bs=1 seek=$((150 << 20)) conv=notrunc status=none
	changed_mid=1
fi
bg_wait
check "SRC was rewritten while its copy ran" test "$changed_mid" = 1
check "the run did not succeed (exit $BG_RC)" test "$BG_RC" != 0
check "the run says the file changed" grep -q "'big': source changed" "$LOG/bg.err"
show "$LOG/bg.err"
check "dst/big is not there (never marked done)" test ! -e dst/big
state=$(sqlite3 "file:$db?mode=ro" "SELECT state FROM files WHERE CAST(name AS TEXT) = 'big'" 2>/dev/null)
done_state=$(sqlite3 "file:$db?mode=ro" "SELECT state FROM files WHERE CAST(name AS TEXT) = 'small'" 2>/dev/null)
check "the manifest does not call it done (big: ${state:-?}, small: ${done_state:-?})" \
	test -n "$state" -a "$state" != "$done_state"
check "the small file was copied" cmp -s src/small dst/small
no_temp_files dst

expect_code 0 "$FERRY" "$MNT" dst
check "cmp SRC DST after a run with SRC stable" cmp -s src/big dst/big
expect_code 0 "$FERRY" --verify "$MNT" dst
umount_mnt
finish
