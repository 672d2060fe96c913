#!/bin/bash
# t19-progress: the progress display, on a terminal and off it.
#
# The copy is slowed down by strace (each read(2) of ferry delayed), so
# that it lasts long enough for progress to show; `script` gives ferry a
# terminal. Proves:
#  - on a terminal, a line "ferry: DONE/TOTAL files, BYTES/BYTES, N
#    files/s, RATE/s, ETA h:mm:ss, N errors" is redrawn in place (\r, erase
#    line) at least three times; the files done never go down; once the
#    scan is over TOTAL is the number of files in SRC and an ETA is given;
#    the last one reads TOTAL/TOTAL with the bytes all done; then the
#    summary line;
#  - --verify shows the same line, its total the files copied, with an ETA;
#  - -q shows no progress on a terminal;
#  - off a terminal, a run shorter than 10 s prints no progress line, and
#    a longer one prints plain lines (no \r, no escape sequence), one per
#    10 s, each its own line.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd script
need_strace
need_gentree

gen_tree src --seed 1919 --files 120 --median 4K --max-size 64K --no-links
nfiles=$(find src -type f | wc -l)

# slow DELAY_US CMD...: CMD under strace with every read(2) held DELAY_US.
slow() {
	local us=$1
	shift
	env "$(no_leak_check_env)" strace -f -o /dev/null \
		-e trace=read -e inject=read:delay_enter="$us" "$@"
}

# --- on a terminal
rm -rf dst "$XDG_STATE_HOME/ferry"
cmd=$(printf '%q ' slow_env "$FERRY" -j 1 src dst)
{
	printf 'slow_env() { env %q strace -f -o /dev/null -e trace=read -e inject=read:delay_enter=20000 "$@"; }\n' \
		"$(no_leak_check_env)"
	printf '%s\n' "$cmd"
} >tty.sh
script -qfec "bash tty.sh" "$T/tty.raw" >/dev/null 2>&1
check "on a terminal: the copy is whole" diff -r src dst
# the redrawn lines: split at \r, keep the progress ones
tr '\r' '\n' <"$T/tty.raw" | sed 's/\x1b\[K//g' | grep -a '^ferry: [0-9]*/[0-9]*+\? files, ' >"$T/tty.lines"
n=$(wc -l <"$T/tty.lines")
check "on a terminal: the progress line was drawn at least 3 times ($n)" test "$n" -ge 3
check "on a terminal: it is redrawn in place (\\r, erase line)" \
	grep -qa $'\r\x1b\\[Kferry: [0-9]' "$T/tty.raw"
check "on a terminal: every line has the rates, an ETA and the errors" \
	eval '! grep -av "^ferry: [0-9]*/[0-9]*+\\? files, [0-9.]* [KMGTP]\\?i\\?B/[0-9.]* [KMGTP]\\?i\\?B, [0-9]* files/s, [0-9.]* [KMGTP]\\?i\\?B/s, ETA \\([0-9]*:[0-9][0-9]:[0-9][0-9]\\|?\\), [0-9]* errors\$" "$T/tty.lines"'
show "$T/tty.lines" 5
done_col=$(sed 's|^ferry: \([0-9]*\)/.*|\1|' "$T/tty.lines")
check "on a terminal: the files done never go down" \
	eval 'sort -n -c <<<"$done_col"'
check "on a terminal: after the scan the total is the $nfiles files of SRC" \
	grep -aq "^ferry: [0-9]*/$nfiles files, " "$T/tty.lines"
check "on a terminal: an ETA is given once the scan is over" \
	grep -aq "^ferry: [0-9]*/$nfiles files, .*ETA [0-9]*:[0-9][0-9]:[0-9][0-9], " "$T/tty.lines"
last=$(tail -n 1 "$T/tty.lines")
check "on a terminal: the last reads $nfiles/$nfiles with all bytes done" \
	eval '[[ $last =~ ^ferry:\ $nfiles/$nfiles\ files,\ ([^/]*)/([^,]*), ]] && [[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]]'
say "last: $last"
check "on a terminal: then the summary line" \
	grep -aq "^ferry: $nfiles files copied" <(tr '\r' '\n' <"$T/tty.raw")

# --verify on a terminal: the total is the files copied, with an ETA
{
	printf 'slow_env() { env %q strace -f -o /dev/null -e trace=read,pread64 -e inject=read:delay_enter=20000 -e inject=pread64:delay_enter=20000 "$@"; }\n' \
		"$(no_leak_check_env)"
	printf '%s\n' "$(printf '%q ' slow_env "$FERRY" -j 1 --verify src dst)"
} >tty-verify.sh
script -qfec "bash tty-verify.sh" "$T/tty-verify.raw" >/dev/null 2>&1
tr '\r' '\n' <"$T/tty-verify.raw" | sed 's/\x1b\[K//g' |
	grep -a '^ferry: [0-9]*/[0-9]* files, ' >"$T/tty-verify.lines"
check "--verify on a terminal: drawn at least twice ($(wc -l <"$T/tty-verify.lines"))" \
	test "$(wc -l <"$T/tty-verify.lines")" -ge 2
check "--verify on a terminal: the total is the $nfiles files copied" \
	eval '! grep -av "^ferry: [0-9]*/$nfiles files, " "$T/tty-verify.lines" | grep -q .'
check "--verify on a terminal: an ETA is given" \
	grep -aq "ETA [0-9]*:[0-9][0-9]:[0-9][0-9], " "$T/tty-verify.lines"
show "$T/tty-verify.lines" 3

rm -rf dst "$XDG_STATE_HOME/ferry"
printf '%s\n' "$(printf '%q ' "$FERRY" -q src dst)" >tty-q.sh
script -qfec "bash tty-q.sh" "$T/tty-q.raw" >/dev/null 2>&1
check "-q on a terminal: no progress" eval '! grep -aq "files/s" "$T/tty-q.raw"'
check "-q on a terminal: the copy is whole" diff -r src dst

# --- off a terminal
rm -rf dst "$XDG_STATE_HOME/ferry"
t0=$SECONDS
expect_code 0 "$FERRY" src dst
if ((SECONDS - t0 < 9)); then
	check "a short run off a terminal prints no progress line" \
		eval '! grep -q "files/s" "$LOG/err"'
else
	say "the short run took $((SECONDS - t0)) s (a slow build): its progress lines are not counted"
fi
rm -rf dst "$XDG_STATE_HOME/ferry"
start=$(date +%s)
# one read(2) per small file (ferry reads a file's size, not up to EOF):
# 120 of them held 0.1 s make a run of over 10 s
run slow 100000 "$FERRY" -j 1 src dst
secs=$(($(date +%s) - start))
check "a slowed run off a terminal: exit 0 (got $RC)" test "$RC" = 0
check "it lasted over 10 s (${secs} s)" test "$secs" -gt 10
plain=$(grep -c '^ferry: [0-9]*/[0-9]* files, .* files/s, ' "$LOG/err")
check "off a terminal: plain progress lines, about one per 10 s ($plain in ${secs} s)" \
	test "$plain" -ge 1 -a "$plain" -le $((secs / 10))
check "off a terminal: no \\r and no escape sequence" \
	eval '! grep -q $'"'"'[\r\x1b]'"'"' "$LOG/err"'
show "$LOG/err" 4
check "off a terminal: the copy is whole" diff -r src dst

finish
