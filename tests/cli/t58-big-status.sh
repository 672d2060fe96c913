#!/bin/bash
# t58-big-status: the bytes of a large file count as they are written, not
# when the file is done: in `ferry status` (another process, reading the
# manifest) and on the progress line.
#
# SRC is one 100 MiB file of random bytes behind bench/slowfs (10 ms per
# request, one request at a time; one stream per file: FERRY_CHUNK_STREAMS,
# a test build's knob), so that its copy takes seconds; the first run is
# stopped (SIGSTOP) once a chunk is committed, its status read, then it is
# killed. Proves:
#  - while the first run copies it, once a chunk is committed, `ferry
#    status --json` reports partial 1 and partial_bytes > 0 (a multiple of
#    the 16 MiB chunk), done_bytes counts them while "done" is still 0
#    files, and the text status says "in progress: 1 files, N bytes
#    copied"; DST has no big yet, only its temp file (find: the oracle);
#  - after kill -9 the status still shows those bytes (the temp file is
#    kept for a resume, its size the file's);
#  - the resumed run on a terminal (script) draws progress lines that read
#    0/1 files with bytes done above 0 B, never going down, the first
#    already counting the chunks of the first run, and an ETA
#    (from the bytes: no file is done yet); the copy ends
#    identical (cmp), and the status then shows partial 0, done 1 file of
#    100 MiB.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd cmp script
need_test_hooks

need_slowfs
MNT=$T/mnt
umount_mnt() { umount_fuse "$MNT"; }
trap 'umount_mnt; cleanup' EXIT

MIB=$((1 << 20))
SIZE=$((100 * MIB))
CHUNK=$((16 * MIB))
mkdir src "$MNT"
head -c "$SIZE" /dev/urandom >src/big || die "cannot write the source"
# one request at a time (no readahead in parallel): a steady pace
"$SLOWFS" --latency-us 10000 --threads 1 --max-background 1 "$T/src" "$MNT" \
	2>"$LOG/slowfs.err" &&
	mountpoint -q "$MNT" ||
	skip_all "slowfs does not mount here: $(head -c 200 "$LOG/slowfs.err")"
export FERRY_CHUNK_STREAMS=1

# status_json: `ferry status --json` into $T/st.json
status_json() { "$FERRY" status --json "$MNT" dst >"$T/st.json" 2>/dev/null; }
partial_bytes() { status_json && json_get "$T/st.json" partial_bytes; }
some_chunk() {
	local n
	n=$(partial_bytes) && [[ $n =~ ^[0-9]+$ ]] && ((n > 0))
}

bg "$FERRY" -q "$MNT" dst
wait_until 60 eval 'some_chunk || ! kill -0 "$BG_PID" 2>/dev/null'
# held still while its status is read (a loaded machine may not leave
# the seconds the rest of the copy takes otherwise)
kill -STOP "$BG_PID" 2>/dev/null
check "the first run is still copying" kill -0 "$BG_PID"
status_json
show "$T/st.json" 3
pb=$(json_get "$T/st.json" partial_bytes)
check "status --json: partial 1" test "$(json_get "$T/st.json" partial)" = 1
check "status --json: partial_bytes > 0, whole chunks ($pb)" \
	eval '((pb > 0 && pb % CHUNK == 0 && pb < SIZE))'
check "status --json: done_bytes counts them ($(json_get "$T/st.json" done_bytes))" \
	test "$(json_get "$T/st.json" done_bytes)" -ge "$pb"
check "status --json: no file done yet" test "$(json_get "$T/st.json" done)" = 0
check "status --json: pending_bytes is what is left" \
	test "$(json_get "$T/st.json" pending_bytes)" -le $((SIZE - pb))
"$FERRY" status "$MNT" dst >"$T/st.txt" 2>&1
check "status: 'in progress: 1 files, N bytes copied'" \
	grep -Eq '^in progress: 1 files, [1-9][0-9]* bytes copied$' "$T/st.txt"
check "DST has no big yet" test ! -e dst/big
check "DST has its temp file" test -n "$(find dst -name '.big.*.ferry-part' -print -quit)"

kill -KILL "$BG_PID"
kill -CONT "$BG_PID" 2>/dev/null
bg_wait
check "the first run was killed (exit $BG_RC)" test "$BG_RC" = 137
status_json
after=$(json_get "$T/st.json" partial_bytes)
say "partial bytes: $pb while copying, $after after the kill"
check "after kill -9 the status still counts them ($after >= $pb)" \
	test "$after" -ge "$pb"
tmp=$(find dst -name '.big.*.ferry-part' -print -quit)
check "the temp file is kept for a resume" test -n "$tmp"
check "the temp file is at least as big as its chunks" \
	test "$(stat -c %s "$tmp" 2>/dev/null || echo 0)" -ge "$after"

# --- the resume, on a terminal: the progress line counts bytes in the file
printf 'FERRY_CHUNK_STREAMS=1 %q %q %q\n' "$FERRY" "$MNT" dst >tty.sh
script -qfec "bash tty.sh" "$T/tty.raw" >/dev/null 2>&1
tr '\r' '\n' <"$T/tty.raw" | sed 's/\x1b\[K//g' |
	grep -a '^ferry: [0-9]*/[0-9]*+\? files, ' >"$T/tty.lines"
show "$T/tty.lines" 8
check "the resumed copy is identical" cmp -s src/big dst/big
check "a progress line reads 0/1 files with bytes done above 0 B" \
	grep -Eq '^ferry: 0/1 files, [0-9.]*[1-9][0-9.]* [KMG]iB/' "$T/tty.lines"
# bytes done of each line, in bytes (human units back to numbers)
sed -E 's|^ferry: [0-9]+/[0-9]+\+? files, ([0-9.]+) ([KMGT]?i?B)/.*|\1 \2|' \
	"$T/tty.lines" | awk '{ m = 1; if ($2 == "KiB") m = 1024; if ($2 == "MiB") m = 1048576; if ($2 == "GiB") m = 1073741824; printf "%.0f\n", $1 * m }' >"$T/done.col"
check "the bytes done never go down" sort -n -c "$T/done.col"
check "the first line counts the chunks of the first run ($after bytes) done" \
	test "$(head -n 1 "$T/done.col")" -ge "$after"
check "a line before the file is done gives an ETA from its bytes" \
	grep -Eq '^ferry: 0/1 files, .*, ETA [0-9]+:[0-9][0-9]:[0-9][0-9], ' "$T/tty.lines"
status_json
check "status after the resume: partial 0" test "$(json_get "$T/st.json" partial)" = 0
check "status after the resume: done 1 file of $SIZE bytes" \
	test "$(json_get "$T/st.json" done):$(json_get "$T/st.json" done_bytes)" = "1:$SIZE"
no_temp_files dst
finish
