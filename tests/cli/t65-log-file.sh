#!/bin/bash
# t65-log-file: `--log-file FILE` appends one JSON line per event and one
# at each run's start and end, a week of runs auditable with jq and grep.
#
# The tree (copied as an unprivileged user, as root reads everything): 30
# files in r/, a second name of r/f1 (a hard link), a symlink, a name that
# is not UTF-8 and holds a newline, a file of mode 0000 (open on SRC:
# EACCES) and a FIFO left out with --no-specials. The oracle is find (with
# -print0, names as bytes) and python3 reading the log as bytes.
#
# Proves:
#  A. run 1: every line is JSON (jq); the first is "start" (command copy,
#     src, dst, options, argv), the last "end" (result 23, its words, the
#     counters: files_copied = the "copied" lines); one "copied" or
#     "linked" line per entry find lists that could be read (exactly those
#     paths, as bytes: the non-UTF-8 name through its path_hex, its \u
#     escapes and newline too), one "linked" line whose path is a second
#     name of a copied inode, one "failed" for the 0000 file with its cause
#     (key src:open:13, errno 13), one "skipped" for the FIFO: as many
#     event lines as find's entries;
#  B. run 2 (r/f30 removed from SRC, r/f2's mode changed, --delete): the
#     log is appended (run 1's bytes unchanged ahead), with "deleted
#     r/f30", "metadata_applied r/f2", the failure again and a second
#     start/end pair;
#  C. --verify after r/f3 was altered (same size and mtime) and r/f4
#     removed in DST: "mismatch r/f3", "missing r/f4", "verified" for every
#     other file and symlink DST holds, "end" with result 5;
#  D. a log file that cannot be opened (no such directory, a directory)
#     exits 1 with one error line and copies nothing (DST not made);
#  E. (strace) a file that vanishes while its open is held up 3 s has its
#     "vanished" line; meanwhile, with the run still going, the lines of
#     the run so far are already in the file (written within a second).
. "$(dirname "$0")/lib.sh" || exit 1
need_unprivileged
need_cmd jq python3

W=$T/nobody
L=$W/audit.jsonl
mkdir -p "$W/src/r" "$W/src/u"
for i in $(seq 1 30); do printf 'file %s\n' "$i" >"$W/src/r/f$i"; done
ln "$W/src/r/f1" "$W/src/r/link1"
ln -s r/f5 "$W/src/sym"
BAD=$'bad\xff\nname \xc3\xa9'
printf 'bytes\n' >"$W/src/$BAD"
printf 'secret\n' >"$W/src/u/secret"
mkfifo "$W/src/fifo"
chown -R "$NOBODY_UID:$NOBODY_GID" "$W"
chmod 0000 "$W/src/u/secret"

# the log's lines of events, as "EVENT<NUL>PATH-BYTES<NUL>", from python3
cat >"$T/events.py" <<'EOF'
import json, sys
for raw in open(sys.argv[1], 'rb'):
    d = json.loads(raw)
    if d['event'] in ('start', 'end'):
        continue
    p = bytes.fromhex(d['path_hex']) if 'path_hex' in d else d['path'].encode('utf-8')
    sys.stdout.buffer.write(d['event'].encode() + b'\0' + p + b'\0')
EOF
# paths EVENT: the paths of that event's lines, one per line (a newline in
# a name as \n: both sides the same)
paths() {
	python3 "$T/events.py" "$L" | python3 -c '
import sys
want = sys.argv[1].encode()
f = sys.stdin.buffer.read().split(b"\0")
for ev, p in zip(f[0::2], f[1::2]):
    if ev == want:
        sys.stdout.buffer.write(p.replace(b"\\", b"\\\\").replace(b"\n", b"\\n") + b"\n")
' "$1" | LC_ALL=C sort
}
# find_paths DIR FIND-ARGS...: the same form for find's entries
find_paths() {
	local d=$1
	shift
	(cd "$d" && find . -mindepth 1 "$@" -printf '%P\0') | python3 -c '
import sys
for p in sys.stdin.buffer.read().split(b"\0")[:-1]:
    sys.stdout.buffer.write(p.replace(b"\\", b"\\\\").replace(b"\n", b"\\n") + b"\n")
' | LC_ALL=C sort
}
count() { grep -c "\"event\": \"$1\"" "$L"; }

# ---- A -----------------------------------------------------------------------
expect_code 23 as_nobody "$FERRY" -q --no-specials --log-file "$L" "$W/src" "$W/dst"
cp "$L" "$LOG/run1.jsonl"
check "A: every line is JSON" jq -e . "$L" >/dev/null
check "A: the first line is the start of a copy" \
	test "$(head -n1 "$L" | jq -r '[.event, .command, .src, .dst, .options.jobs, .argv[-1]] | join(" ")')" \
	= "start copy $W/src $W/dst auto $W/dst"
check "A: the start says --no-specials" test "$(head -n1 "$L" | jq .options.specials)" = false
check "A: the last line is the end, result 23 in words" \
	test "$(tail -n1 "$L" | jq -r '[.event, .result, .result_text] | join(" ")')" = "end 23 some files failed"
check "A: the end's files_copied is the copied lines" \
	test "$(tail -n1 "$L" | jq .counters.files_copied)" = "$(count copied)"
find_paths "$W/src" \( -type f -o -type l \) ! -path ./u/secret >"$LOG/want.copied"
{ paths copied; paths linked; } | LC_ALL=C sort >"$LOG/got.copied"
check "A: one copied or linked line per readable file and symlink, by path" \
	diff "$LOG/want.copied" "$LOG/got.copied"
check "A: ... the name that is not UTF-8 among them, as its bytes" \
	grep -qxF 'bad'$'\xff''\nname '$'\xc3\xa9' "$LOG/got.copied"
check "A: ... written with \\u escapes and path_hex" \
	grep -qF '"path": "bad\u00ff\u000aname '$'\xc3\xa9''", "path_hex": "626164ff0a6e616d6520c3a9"' "$L"
linked=$(paths linked)
check "A: one linked line, a second name of r/f1's inode ($linked)" \
	test "$(stat -c %i "$W/src/$linked")" = "$(stat -c %i "$W/src/r/f1")" -a "$(count linked)" = 1
check "A: the 0000 file failed, with its cause" \
	test "$(jq -r 'select(.event == "failed") | [.path, .key, .side, .step, .errno] | join(" ")' "$L")" \
	= "u/secret src:open:13 SRC open 13"
check "A: the FIFO was skipped" test "$(paths skipped)" = fifo
n_entries=$(find "$W/src" -mindepth 1 ! -type d -printf . | wc -c)
n_events=$(grep -vc -e '"event": "start"' -e '"event": "end"' "$L")
check "A: as many event lines as find's entries ($n_events, $n_entries)" test "$n_events" = "$n_entries"

# ---- B -----------------------------------------------------------------------
rm "$W/src/r/f30"
chmod 0600 "$W/src/r/f2"
expect_code 23 as_nobody "$FERRY" -q --no-specials --delete --log-file "$L" "$W/src" "$W/dst"
check "B: run 1's lines are still there, first" cmp -n "$(stat -c %s "$LOG/run1.jsonl")" "$LOG/run1.jsonl" "$L"
check "B: two start and two end lines" test "$(count start):$(count end)" = 2:2
tail -n +"$(($(wc -l <"$LOG/run1.jsonl") + 1))" "$L" >"$LOG/run2.jsonl"
check "B: run 2 deleted r/f30" test "$(jq -r 'select(.event == "deleted") | .path' "$LOG/run2.jsonl")" = r/f30
check "B: run 2 applied r/f2's metadata alone" \
	test "$(jq -r 'select(.event == "metadata_applied") | .path' "$LOG/run2.jsonl")" = r/f2
check "B: run 2 failed u/secret again" \
	test "$(jq -r 'select(.event == "failed") | .path' "$LOG/run2.jsonl")" = u/secret
check "B: run 2's start says --delete" test "$(head -n1 "$LOG/run2.jsonl" | jq .options.delete)" = true

# ---- C -----------------------------------------------------------------------
printf 'FILE 3\n' >"$W/dst/r/f3.new"
touch -r "$W/dst/r/f3" "$W/dst/r/f3.new"
mv "$W/dst/r/f3.new" "$W/dst/r/f3"
rm "$W/dst/r/f4"
: >"$L"
expect_code 5 as_nobody "$FERRY" -q --verify --log-file "$L" "$W/src" "$W/dst"
check "C: the start says verify" test "$(head -n1 "$L" | jq -r .command)" = verify
check "C: mismatch r/f3" test "$(paths mismatch)" = r/f3
check "C: missing r/f4" test "$(paths missing)" = r/f4
find_paths "$W/dst" \( -type f -o -type l \) ! -path ./r/f3 >"$LOG/want.verified"
paths verified >"$LOG/got.verified"
check "C: verified: every other file and symlink of DST" diff "$LOG/want.verified" "$LOG/got.verified"
check "C: the end says 5" test "$(tail -n1 "$L" | jq .result)" = 5

# ---- D -----------------------------------------------------------------------
expect_code 1 "$FERRY" -q --log-file "$T/no/such/dir/log" "$W/src" "$T/d1"
stderr_is_one_error
check "D: ... naming the log" grep -qF "cannot open log file '$T/no/such/dir/log'" "$LOG/err"
check "D: nothing copied (DST not made)" test ! -e "$T/d1"
expect_code 1 "$FERRY" -q --log-file "$T" "$W/src" "$T/d2"
check "D: a directory: nothing copied" test ! -e "$T/d2"
expect_code 1 "$FERRY" status --log-file "$T/x" "$W/src" "$W/dst"

# ---- E -----------------------------------------------------------------------
if ! have_strace; then
	say "SKIP E: needs strace, allowed to trace"
	finish
fi
victim=vanishing-victim
mkdir -p srcE/sub
for i in $(seq 1 20); do printf '%s\n' "$i" >"srcE/sub/e$i"; done
printf 'here today\n' >"srcE/sub/$victim"
LE=$T/e.jsonl
bg env "$(no_leak_check_env)" strace -f -o "$LOG/strace" -P "$victim" \
	-e trace=open,openat,openat2 \
	-e inject=open,openat,openat2:delay_enter=3000000 \
	"$FERRY" -q --log-file "$LE" srcE dstE
if ! wait_until 30 grep -qs "\"$victim\"" "$LOG/strace"; then
	fail "E: ferry opened the file within 30 s"
	bg_wait
	finish
fi
rm "srcE/sub/$victim"
# the run is held up 3 s in that open: what it logged so far is out
# within a second or so
written=1
for ((i = 0; i < 200 && written; i++)); do # 2 s and a little
	grep -qs '"event": "start"' "$LE" && written=0 || sleep 0.01
done
alive=$(kill -0 "$BG_PID" 2>/dev/null && echo yes || echo no)
check "E: the start line is in the file while the run goes on (run alive: $alive)" \
	test "$written:$alive" = 0:yes
bg_wait
check "E: the run says a file vanished (exit $BG_RC)" test "$BG_RC" = 24
check "E: the vanished line names it" \
	test "$(jq -r 'select(.event == "vanished") | .path' "$LE")" = "sub/$victim"
check "E: a copied line for each of the others" test "$(grep -c '"event": "copied"' "$LE")" = 20
finish
