# tests/cli/lib.sh - setup and helpers shared by ferry's command-line tests.
#
# A test script sources this file, then checks things and calls finish:
#
#   . "$(dirname "$0")/lib.sh" || exit 1
#   make_hostile_tree src
#   expect_code 0 "$FERRY" -q src dst
#   tree_equal src dst
#   finish
#
# Environment (ctest sets the first three, see CMakeLists.txt):
#   FERRY            the ferry binary under test (required)
#   GENTREE          bench/gentree, the seeded tree generator
#   FERRY_SRCDIR     the source tree (man page, headers)
#   FERRY_TEST_KEEP  when set, keep the temporary directory for inspection
#   FERRY_SLOW       how many times slower than a release build on a quiet
#                    machine a run may be (ctest: 1, or 10 for a sanitizer
#                    build; by hand: detected from the binary)
#
# Every test runs in a fresh directory $T under $TMPDIR (the working
# directory), with XDG_STATE_HOME=$T/state so that manifests stay inside it.
# The trap removes $T and any background process the test started.
#
# Output is TAP-like: "ok N - what" or "not ok N - what" with details as
# "#" lines. finish exits 1 when a check failed. skip_all exits 77, which
# ctest reports as skipped (SKIP_RETURN_CODE), and says why.
#
# Trees are compared with oracles that share no code with ferry: diff -r,
# rsync in checksum dry-run mode, find's metadata listing (ns mtimes, modes,
# owners) and, for the part deeper than PATH_MAX that diff and rsync cannot
# open, content hashes taken with find -execdir.

set -u -o pipefail
export LC_ALL=C

: "${FERRY:?FERRY must name the ferry binary (ctest sets it)}"
GENTREE=${GENTREE-}
FERRY_SRCDIR=${FERRY_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# tests/cli, absolute: the scripts source t2-lib.sh from here after lib.sh
# has entered the test's directory (a relative "$0" no longer works then)
TESTS_CLI=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# FERRY=build/src/ferry by hand (tests/README): absolute before the cd below
[[ $FERRY == */* && $FERRY != /* ]] && FERRY=$PWD/$FERRY
[[ -n $GENTREE && $GENTREE == */* && $GENTREE != /* ]] && GENTREE=$PWD/$GENTREE
TEST_NAME=$(basename "$0" .sh)

# The name of the directory that make_hostile_tree fills with a path longer
# than PATH_MAX; tree_equal compares every directory of that name with
# tools that handle any depth.
LONG_DIR=longpath.d

# SANITIZED: a sanitizer build, from the environment (ctest sets
# FERRY_SANITIZE) or the sanitizer runtime's entry point in the binary
# (linked statically or dynamically: readelf, or its bytes without it);
# empty otherwise.
SANITIZED=${FERRY_SANITIZE-}
if [[ -z $SANITIZED ]] &&
	{ { command -v readelf >/dev/null 2>&1 &&
		readelf -sW "$FERRY" 2>/dev/null | grep -qE '__(asan|tsan|msan)_init'; } ||
		grep -aqE '__(asan|tsan|msan)_init' "$FERRY"; }; then
	SANITIZED=detected
fi

# SLOW: the factor every wait and every bound on a run's time is scaled by
# (slow_s), for a sanitizer build on a loaded machine: a deadline that a
# release build meets with room to spare says nothing about ferry there.
SLOW=${FERRY_SLOW:-$([[ -n $SANITIZED ]] && echo 10 || echo 1)}
[[ $SLOW =~ ^[1-9][0-9]*$ ]] || SLOW=1

# slow_s SECONDS: SECONDS (a whole number) scaled by SLOW.
slow_s() { printf '%s' $(($1 * SLOW)); }

NOBODY_UID=65534
NOBODY_GID=65534

test_count=0
test_failed=0
declare -a BG_PIDS=()

# ---- reporting --------------------------------------------------------

say() { printf '# %s\n' "$*"; }

ok() {
	test_count=$((test_count + 1))
	printf 'ok %d - %s\n' "$test_count" "$*"
}

fail() {
	test_count=$((test_count + 1))
	test_failed=$((test_failed + 1))
	printf 'not ok %d - %s\n' "$test_count" "$*"
}

# check DESC CMD...: ok when CMD succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# show FILE [LINES]: print the head of a file (- for stdin) as "#" comment
# lines, with control bytes made visible and long lines cut.
show() {
	[[ $1 == - || -s $1 ]] || return 0
	head -n "${2:-20}" -- "$1" | cut -c1-300 | cat -v | sed 's/^/#   /'
}

skip_all() {
	printf '# SKIP %s: %s\n' "$TEST_NAME" "$*"
	exit 77
}

# die MSG: the test itself could not be set up; this is a failure.
die() {
	printf 'Bail out! %s\n' "$*"
	exit 1
}

finish() {
	if ((test_failed)); then
		printf '# %s: %d of %d checks failed\n' "$TEST_NAME" "$test_failed" "$test_count"
		exit 1
	fi
	printf '# %s: all %d checks passed\n' "$TEST_NAME" "$test_count"
	exit 0
}

# ---- environment ------------------------------------------------------

cleanup() {
	local pid
	[[ -n ${WATCHDOG_PID-} ]] && kill "$WATCHDOG_PID" 2>/dev/null
	for pid in "${BG_PIDS[@]}"; do
		kill -CONT "$pid" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	cd / || return
	if [[ -n ${FERRY_TEST_KEEP-} ]]; then
		printf '# kept %s\n' "$T"
	elif [[ -d ${T-} ]]; then
		chmod -R u+rwX "$T" 2>/dev/null
		rm -rf "$T"
	fi
}

T=$(mktemp -d "${TMPDIR:-/tmp}/ferry-$TEST_NAME.XXXXXX") || die "mktemp failed"
trap cleanup EXIT
trap 'exit 130' INT TERM

# The watchdog: ctest ends a test past its timeout with SIGKILL, which runs
# no trap, and a FUSE mount or a PostgreSQL cluster of the test would stay.
# 20 s before that (FERRY_TEST_TIMEOUT, from tests/cli/CMakeLists.txt) it
# says so, stops the test's own children (a command that hangs) and then
# the test with SIGTERM, whose trap cleans up; the test fails (exit 130).
# cleanup stops the watchdog (and its sleep).
watchdog() {
	local left=$((FERRY_TEST_TIMEOUT - 20)) nap c me=$BASHPID
	sleep "$left" >/dev/null 2>&1 </dev/null &
	nap=$!
	trap 'kill "$nap" 2>/dev/null; exit 0' TERM
	wait "$nap" || exit 0
	# the test is still this one's parent (not ended, its pid not reused)
	[[ $(cut -d' ' -f4 "/proc/$me/stat" 2>/dev/null) == "$$" ]] || exit 0
	printf '# watchdog: %s ran %d s, near its timeout: stopping it\n' "$TEST_NAME" "$left"
	for c in $(cat "/proc/$$/task/"*/children 2>/dev/null); do
		[[ $c == "$me" ]] || kill -TERM "$c" 2>/dev/null
	done
	kill -TERM $$
}
WATCHDOG_PID=
if [[ ${FERRY_TEST_TIMEOUT-} =~ ^[0-9]+$ ]] && ((FERRY_TEST_TIMEOUT > 40)); then
	watchdog &
	WATCHDOG_PID=$!
fi
chmod 0755 "$T" # the unprivileged tests run as nobody inside it
mkdir "$T/state" "$T/log"
export XDG_STATE_HOME=$T/state
export HOME=$T/home
mkdir "$HOME"
cd "$T" || die "cannot enter $T"
LOG=$T/log # stdout/stderr of the last expect_code live here

[[ -x $FERRY ]] || die "FERRY='$FERRY' is not executable"
say "$TEST_NAME in $T"

need_cmd() {
	local c
	for c; do
		command -v "$c" >/dev/null 2>&1 || skip_all "needs '$c', which is not installed"
	done
}

# need_test_hooks: ferry was built with -DFERRY_TESTING=ON (FERRY_FAULT and
# FERRY_CRASH honoured); its --version says so on a second line.
need_test_hooks() {
	"$FERRY" --version 2>/dev/null | grep -q '^test build:' ||
		skip_all "needs a build with -DFERRY_TESTING=ON (the fault-injection hooks; .ci/test builds with them)"
}

need_gentree() {
	[[ -n $GENTREE && -x $GENTREE ]] ||
		skip_all "needs bench/gentree (GENTREE='$GENTREE' is not executable)"
}

# need_slowfs: SLOWFS is bench/slowfs (the FUSE file system with a latency
# per operation, built beside gentree), or the test skips, saying why.
# umount_fuse DIR: unmounts the FUSE mount at DIR if there is one (lazily
# when it is busy); for the EXIT trap too.
need_slowfs() {
	SLOWFS=${GENTREE:+$(dirname "$GENTREE")/slowfs}
	[[ -n $SLOWFS && -x $SLOWFS && -c /dev/fuse ]] && command -v fusermount3 >/dev/null ||
		skip_all "needs bench/slowfs (libfuse3), /dev/fuse and fusermount3"
}
umount_fuse() {
	if mountpoint -q "$1" 2>/dev/null; then
		fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null
	fi
}

# have_strace: strace is installed and allowed to trace (ptrace may be
# forbidden in containers). need_strace skips the test otherwise.
have_strace() {
	command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true 2>/dev/null
}
need_strace() {
	have_strace || skip_all "needs strace, allowed to trace (ptrace)"
}

# Under AddressSanitizer, LeakSanitizer refuses to run inside ptrace and
# fails the process; leaks are checked by the untraced runs anyway.
no_leak_check_env() {
	printf 'ASAN_OPTIONS=%s' "${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# crash_env: an environment assignment for runs with FERRY_CRASH. Its
# _exit(86) leaves the other threads running, which ThreadSanitizer would
# report as thread leaks (and exit 66); they are intended here.
crash_env() {
	printf 'TSAN_OPTIONS=%s' "${TSAN_OPTIONS:+$TSAN_OPTIONS:}report_thread_leaks=0"
}

# ---- running commands -------------------------------------------------

# run CMD...: run with stdout in $LOG/out, stderr in $LOG/err; RC is the
# exit status. Never fails itself.
run() {
	"$@" >"$LOG/out" 2>"$LOG/err"
	RC=$?
	return 0
}

# quote_cmd CMD...: a short printable form of a command for messages.
quote_cmd() {
	local s
	s=$(printf '%q ' "$@")
	s=${s//"$T"/\$T}
	s=${s//"$FERRY"/ferry}
	printf '%s' "${s% }"
}

# expect_code N CMD...: run CMD, check that it exits N. Its stdout and
# stderr stay in $LOG/out and $LOG/err for further checks.
expect_code() {
	local want=$1
	shift
	run "$@"
	if [[ $RC == "$want" ]]; then
		ok "exit $want: $(quote_cmd "$@")"
		return 0
	fi
	fail "exit $want: $(quote_cmd "$@") (got $RC)"
	say "stderr:"
	show "$LOG/err"
	say "stdout:"
	show "$LOG/out"
	return 1
}

# bg CMD...: start CMD in the background with output in $LOG/bg.out and
# $LOG/bg.err; BG_PID is its pid. The trap kills it if the test dies.
# Job control is on while it starts: a non-interactive shell would otherwise
# start it with SIGINT ignored, and t04 could not interrupt it.
bg() {
	set -m
	"$@" >"$LOG/bg.out" 2>"$LOG/bg.err" &
	BG_PID=$!
	set +m
	BG_PIDS+=("$BG_PID")
}

# bg_wait: wait for the background command; BG_RC is its exit status
# (128 + signal when killed; the shell's "Killed" notice is silenced).
bg_wait() {
	wait "$BG_PID" 2>/dev/null
	BG_RC=$?
	# reaped: its pid may be another process's by cleanup time
	local keep=() p
	for p in "${BG_PIDS[@]}"; do
		[[ $p == "$BG_PID" ]] || keep+=("$p")
	done
	BG_PIDS=("${keep[@]}")
}

# wait_until TIMEOUT_S CMD...: poll CMD every 10 ms until it succeeds,
# for TIMEOUT_S (a whole number) times SLOW seconds at most.
wait_until() {
	local deadline=$((${EPOCHREALTIME/./} + $1 * SLOW * 1000000))
	shift
	until "$@"; do
		((${EPOCHREALTIME/./} < deadline)) || return 1
		sleep 0.01
	done
}

# is_stopped PID: the process is stopped (SIGSTOP), not running or gone.
is_stopped() {
	[[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == T ]]
}

# stderr_is_one_error: the last command wrote exactly one line on stderr,
# starting with "ferry: " (the documented error format).
stderr_is_one_error() {
	local n
	n=$(wc -l <"$LOG/err")
	if [[ $n == 1 ]] && grep -q '^ferry: ' "$LOG/err"; then
		ok "one error line starting 'ferry: '"
		return 0
	fi
	fail "one error line starting 'ferry: ' (got $n lines)"
	show "$LOG/err"
	return 1
}

# json_get FILE KEY: print a top-level value of a JSON object (python3 if
# present, else a grep good enough for flat numbers).
json_get() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))[sys.argv[2]]
print(json.dumps(v) if isinstance(v, (list, dict)) else v)' "$1" "$2"
	else
		grep -o "\"$2\"[[:space:]]*:[[:space:]]*[^,}]*" "$1" | head -n1 |
			sed 's/^[^:]*:[[:space:]]*//; s/^"//; s/"$//'
	fi
}

# json_has FILE KEY: the JSON object has KEY at the top level.
json_has() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys
assert sys.argv[2] in json.load(open(sys.argv[1]))' "$1" "$2" 2>/dev/null
	else
		grep -q "\"$2\"[[:space:]]*:" "$1"
	fi
}

# json_valid FILE: the file holds exactly one JSON object.
json_valid() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys
assert isinstance(json.load(open(sys.argv[1])), dict)' "$1" 2>/dev/null
	else
		grep -q '^[[:space:]]*{' "$1" && grep -q '}[[:space:]]*$' "$1"
	fi
}

# expect_json FILE KEY VALUE: a check that the summary says KEY=VALUE.
expect_json() {
	local got
	got=$(json_get "$1" "$2" 2>/dev/null)
	if [[ $got == "$3" ]]; then
		ok "json $2 = $3"
	else
		fail "json $2 = $3 (got '$got')"
		show "$1" 5
	fi
}

# ---- unprivileged runs ------------------------------------------------

# can_run_unprivileged: root can drop to nobody, and nobody can run ferry
# from where it was built. Otherwise false, with the reason in WHY_NOT.
can_run_unprivileged() {
	WHY_NOT=
	if [[ $(id -u) != 0 ]]; then
		WHY_NOT="needs root to switch to an unprivileged user"
	elif command -v setpriv >/dev/null 2>&1; then
		AS_NOBODY=(setpriv --reuid="$NOBODY_UID" --regid="$NOBODY_GID" --clear-groups --)
	elif command -v runuser >/dev/null 2>&1; then
		AS_NOBODY=(runuser -m -u "#$NOBODY_UID" --)
	else
		WHY_NOT="needs setpriv or runuser to run as an unprivileged user"
	fi
	[[ -z $WHY_NOT ]] || return 1
	mkdir -p "$T/nobody/state" "$T/nobody/home"
	chown -R "$NOBODY_UID:$NOBODY_GID" "$T/nobody"
	if ! as_nobody "$FERRY" --version >/dev/null 2>&1; then
		WHY_NOT="user $NOBODY_UID cannot run $FERRY (a parent directory is private?)"
		return 1
	fi
	if ! as_nobody test -w "$T/nobody"; then
		WHY_NOT="user $NOBODY_UID cannot reach $T (TMPDIR under a private directory?)"
		return 1
	fi
}

# need_unprivileged: skip the whole test unless can_run_unprivileged.
need_unprivileged() {
	can_run_unprivileged || skip_all "$WHY_NOT"
}

# as_nobody CMD...: run CMD as uid/gid 65534 with its own state directory.
as_nobody() {
	env XDG_STATE_HOME="$T/nobody/state" HOME="$T/nobody/home" \
		"${AS_NOBODY[@]}" "$@"
}

# one_fsync_covers DIR: DIR's file system is one where ferry's barrier
# runs syncfs and then fsyncs one directory, the one it opened first,
# instead of each (src/fsio.h, ferry_fsio_fs_sync: XFS, Btrfs, and ext2,
# ext3, ext4 as their drivers run them: the mount table's type, not what
# statfs reports).
one_fsync_covers() {
	case $(findmnt -n -o FSTYPE -T "$1" 2>/dev/null | tail -n 1) in
	xfs | btrfs | ext2 | ext3 | ext4) return 0 ;;
	*) return 1 ;;
	esac
}

# ---- trees ------------------------------------------------------------

# gen_tree DIR GENTREE-OPTIONS...: a deterministic tree from bench/gentree.
gen_tree() {
	local dir=$1
	shift
	need_gentree
	"$GENTREE" "$@" "$dir" >"$LOG/gentree.out" 2>&1 ||
		die "gentree $* $dir failed: $(cat "$LOG/gentree.out")"
}

# set_times DIR: give every entry below DIR (not DIR itself) a distinct
# mtime with nanoseconds, children before parents, at any depth.
set_times() {
	(cd "$1" && find . -depth -mindepth 1 -execdir bash -c '
		for f; do
			n=$(stat -c %i -- "$f" | cksum); n=${n%% *}
			touch -h -d "@$((1300000000 + n % 400000000)).$(printf %09d $((n % 999999999 + 1)))" -- "$f"
		done' set_times {} +)
}

# make_long_path DIR: create DIR holding a chain of 30 directories with
# 200-byte names (about 6000 bytes, more than PATH_MAX), with files in the
# middle and at the bottom. Built with relative mkdir + cd, the only way.
make_long_path() {
	(
		mkdir -- "$1" && cd -- "$1" || exit 1
		local i name
		for ((i = 1; i <= 30; i++)); do
			name=$(printf '%03d' "$i")$(printf 'p%.0s' {1..197})
			mkdir -- "$name" && cd -- "$name" || exit 1
			if ((i == 15)); then
				printf 'halfway down\n' >middle-file
			fi
		done
		printf 'the bottom of a very long path\n' >leaf
		head -c 70000 /dev/urandom >leaf.bin
		ln -s leaf leaf-link
		ln leaf leaf-hardlink
		mkdir empty-at-the-bottom
	) || die "cannot build the long path in $1"
}

# make_sparse FILE SIZE: a file of SIZE bytes with two small data islands
# and holes everywhere else (including a trailing hole).
make_sparse() {
	truncate -s "$2" -- "$1" &&
		printf 'head of a sparse file' | dd of="$1" conv=notrunc status=none &&
		printf 'island in the middle' |
		dd of="$1" bs=1 seek=$(($2 / 2)) conv=notrunc status=none
}

# make_hostile_tree DIR: a small tree with every kind of entry and name
# that breaks naive copiers. Times are set last.
make_hostile_tree() {
	local d=$1 long255 dir255
	long255=$(printf 'L%.0s' {1..255})
	dir255=$(printf 'D%.0s' {1..255})
	mkdir -p -- "$d" || die "mkdir $d"
	(
		cd -- "$d" || exit 1
		set -e
		# nesting, empty things
		mkdir -p a/b/c/d 'empty dir/nested empty' 'dir with space'
		printf 'deep file\n' >a/b/c/d/file.txt
		: >empty-file
		head -c 100000 /dev/urandom >a/random.bin
		head -c 1048577 /dev/urandom >a/b/one-mib-plus-one.bin
		# names
		printf 'space\n' >'dir with space/file with space'
		printf 'trailing\n' >'trailing space '
		printf 'only a space\n' >' '
		printf 'newline\n' >$'new\nline'
		printf 'tab\n' >$'tab\there'
		printf 'bytes\n' >$'\xff\xfe invalid utf-8'
		mkdir $'dir\xc3\x28-invalid'
		printf 'in bad dir\n' >$'dir\xc3\x28-invalid/f'
		printf 'dash\n' >-leading-dash
		mkdir -- -dash-dir
		printf 'glob\n' >'*glob?[x]'
		printf 'quotes\n' >"quote'\"\\back"
		printf 'percent\n' >'100%d %s %n'
		printf 'utf8\n' >'ünïcödé-名前'
		printf 'name max\n' >"$long255"
		mkdir -- "$dir255"
		printf 'in a 255-byte dir\n' >"$dir255/$long255"
		printf 'looks hidden\n' >.hidden
		# symlinks are copied as symlinks, never followed
		ln -s a/b/c/d/file.txt link-to-file
		ln -s a/b link-to-dir
		ln -s /etc/hostname link-absolute
		ln -s does/not/exist link-dangling
		ln -s link-loop link-loop
		ln -s .. a/link-to-parent
		ln -s $'new\nline' link-to-newline
		# hardlinks: a pair across dirs, a triple
		printf 'pair\n' >a/hard1
		ln a/hard1 'dir with space/hard2'
		printf 'triple\n' >tri1
		ln tri1 a/b/tri2
		ln tri1 'dir with space/tri3'
		# sparse files
		make_sparse sparse.img $((64 << 20))
		make_sparse a/sparse-small.img $((3 << 20))
		# modes
		printf 'private\n' >mode-0600 && chmod 0600 mode-0600
		printf '#!/bin/sh\n' >mode-0755 && chmod 0755 mode-0755
		printf 'read only\n' >mode-0444 && chmod 0444 mode-0444
		mkdir dir-0700 && printf 'x\n' >dir-0700/f && chmod 0700 dir-0700
		mkdir dir-1777 && chmod 1777 dir-1777
		mkdir dir-0555 && printf 'x\n' >dir-0555/f && chmod 0555 dir-0555
		# owners (only root can give files away, and read mode 0000)
		if [[ $(id -u) == 0 ]]; then
			printf 'nothing\n' >mode-0000 && chmod 0000 mode-0000
			printf 'nobody owns me\n' >owned-by-nobody
			chown "$NOBODY_UID:$NOBODY_GID" owned-by-nobody
			ln -s owned-by-nobody link-owned-by-nobody
			chown -h "$NOBODY_UID:$NOBODY_GID" link-owned-by-nobody
			mkdir dir-owned-by-nobody
			chown "$NOBODY_UID:$NOBODY_GID" dir-owned-by-nobody
		fi
	) || die "cannot build the hostile tree in $d"
	make_long_path "$d/$LONG_DIR"
	set_times "$d"
}

# ---- oracles ----------------------------------------------------------

# meta_list DIR: one NUL-terminated record per entry (DIR included), sorted:
# relative path, type, mode, owner, size (not for dirs), mtime with ns (not
# for symlinks, which ferry need not time-stamp), link target.
meta_list() {
	find "$1" \( -type l -printf '%P// l %U:%G -> %l\0' \) -o \
		\( -type d -printf '%P// d %m %U:%G %T@\0' \) -o \
		-printf '%P// %y %m %U:%G %s %T@\0' | sort -z
}

# deep_hashes DIR: "path<TAB>sha1" records for every regular file below DIR,
# at any depth (-execdir runs in the file's own directory).
deep_hashes() {
	(cd "$1" && find . -type f -printf '%P\t' \
		-execdir sh -c 'sha1sum <"$1" | cut -d" " -f1' sh {} \;) | sort
}

# show_diff_z A B: the first differing records of two NUL-separated lists.
show_diff_z() {
	diff <(tr '\0\n' '\n|' <"$1") <(tr '\0\n' '\n|' <"$2") | head -n 20 |
		cut -c1-300 | cat -v | sed 's/^/#   /'
}

# tree_equal A B: A and B hold the same names, content, symlinks, modes,
# owners and nanosecond mtimes (directories included), by four oracles.
# diff and rsync cannot open paths longer than PATH_MAX, so they skip every
# $LONG_DIR subtree; find and deep_hashes cover those.
tree_equal() {
	local a=$1 b=$2 rc=0 rel

	# 1. diff: names, file content, symlink targets
	if diff -r --no-dereference -x "$LONG_DIR" -- "$a" "$b" >"$LOG/diff" 2>&1; then
		ok "diff -r: $a and $b have the same content"
	else
		fail "diff -r: $a and $b have the same content"
		show "$LOG/diff"
		rc=1
	fi

	# 2. rsync checksum dry run: any itemized line is a difference
	# (content, perms, times of files and dirs, owner, hardlinks, extras).
	rsync -rlptgoDHnc --omit-link-times --delete --itemize-changes \
		--exclude="$LONG_DIR/" -- "$a/" "$b/" >"$LOG/rsync" 2>&1
	local rrc=$?
	if [[ $rrc == 0 && ! -s $LOG/rsync ]]; then
		ok "rsync -nc: nothing to transfer from $a to $b"
	else
		fail "rsync -nc: nothing to transfer from $a to $b (rc $rrc)"
		show "$LOG/rsync"
		rc=1
	fi

	# 3. find: metadata of every entry at any depth, ns mtimes
	meta_list "$a" >"$LOG/meta.a"
	meta_list "$b" >"$LOG/meta.b"
	if cmp -s "$LOG/meta.a" "$LOG/meta.b"; then
		ok "find: same types, modes, owners, sizes, ns mtimes in $a and $b"
	else
		fail "find: same types, modes, owners, sizes, ns mtimes in $a and $b"
		show_diff_z "$LOG/meta.a" "$LOG/meta.b"
		rc=1
	fi

	# 4. content below PATH_MAX depth, which diff and rsync cannot open
	while IFS= read -r -d '' rel; do
		if [[ -d $b/$rel ]] && diff <(deep_hashes "$a/$rel") \
			<(deep_hashes "$b/$rel") >"$LOG/deep" 2>&1; then
			ok "content of $rel (deeper than PATH_MAX) is equal"
		else
			fail "content of $rel (deeper than PATH_MAX) is equal"
			show "$LOG/deep"
			rc=1
		fi
	done < <(cd "$a" && find . -type d -name "$LONG_DIR" -prune -printf '%P\0')
	return $rc
}

# no_temp_files DIR: no *.ferry-part file was left behind.
no_temp_files() {
	find "$1" -name '*.ferry-part' -print0 >"$LOG/temps"
	if [[ ! -s $LOG/temps ]]; then
		ok "no *.ferry-part left in $1"
		return 0
	fi
	fail "no *.ferry-part left in $1"
	tr '\0' '\n' <"$LOG/temps" | show -
	return 1
}

# link_groups DIR: one line per set of paths below DIR that share an inode
# (link count > 1), each path %q-quoted; sorted, so two trees compare.
link_groups() {
	local rec ino
	local -A group=()
	while IFS= read -r -d '' rec; do
		ino=${rec%%/*}
		group[$ino]+=" $(printf '%q' "${rec#*/}")"
	done < <(find "$1" ! -type d -links +1 -printf '%i/%P\0' | sort -z -t/ -k2)
	for ino in "${!group[@]}"; do
		printf '%s\n' "${group[$ino]}"
	done | sort
}

# hardlinks_equal A B: the same paths are hardlinked together in both.
hardlinks_equal() {
	link_groups "$1" >"$LOG/links.a"
	link_groups "$2" >"$LOG/links.b"
	if [[ -s $LOG/links.a ]] && cmp -s "$LOG/links.a" "$LOG/links.b"; then
		ok "hardlinks: the same $(wc -l <"$LOG/links.a") groups in $1 and $2"
		return 0
	fi
	fail "hardlinks: the same groups in $1 and $2"
	diff "$LOG/links.a" "$LOG/links.b" | show -
	return 1
}

# allocated FILE: bytes allocated on disk.
allocated() {
	local b
	b=$(stat -c '%b %B' -- "$1") || return 1
	echo $((${b% *} * ${b#* }))
}

# sparse_kept A B REL: REL is sparse in A and no less sparse in B (1 MiB slack
# for different allocation policies).
sparse_kept() {
	local size sa sb
	size=$(stat -c %s -- "$1/$3") || return 1
	sa=$(allocated "$1/$3")
	sb=$(allocated "$2/$3")
	if ((sa >= size / 2)); then
		say "$3 is not sparse in $1 on this file system ($sa of $size bytes)"
		ok "# SKIP sparse check of $3"
		return 0
	fi
	if [[ -n $sb ]] && ((sb <= sa + (1 << 20))); then
		ok "$3 stays sparse ($sb bytes allocated for $size, source $sa)"
	else
		fail "$3 stays sparse (${sb:-?} bytes allocated for $size, source $sa)"
	fi
}

# inode_map DIR: "inode<TAB>path" for every regular file below DIR, by path.
inode_map() {
	(cd "$1" && find . -type f -printf '%i\t%P\n') | sort -t$'\t' -k2
}

# ---- ferry's outputs --------------------------------------------------

# manifest_path SRC DST: the manifest ferry uses for the pair, from status.
manifest_path() {
	"$FERRY" status "$1" "$2" 2>/dev/null | sed -n 's/^manifest: //p' | head -n1
}

# status_count SRC DST STATE: N from the "STATE: N files" status line.
status_count() {
	"$FERRY" status "$1" "$2" 2>/dev/null |
		sed -n "s/^$3: \([0-9][0-9]*\) files.*/\1/p" | head -n1
}

# started_copying DST: a regular file (final or temporary) exists below DST.
started_copying() {
	[[ -d $1 && -n $(find "$1" -type f -print -quit 2>/dev/null) ]]
}

# same_set DESC EXPECTED-FILE ACTUAL-FILE: both hold the same set of lines.
same_set() {
	if diff <(sort -u "$2") <(sort -u "$3") >"$LOG/set.diff"; then
		ok "$1 ($(sort -u "$2" | wc -l) entries)"
		return 0
	fi
	fail "$1 (< expected, > actual)"
	show "$LOG/set.diff"
	return 1
}

# verbose_copied FILE / verbose_deleted FILE: the paths that a -v (or -n)
# run listed as copied / deleted: the path relative to SRC for a copy,
# "deleting PATH" for a deletion (as rsync -v does).
verbose_copied() { grep -v '^deleting ' -- "$1"; }
verbose_deleted() { sed -n 's/^deleting //p' -- "$1"; }

# done_files SRC DST: relative paths of the regular files the manifest of
# SRC -> DST marks done, read with the sqlite3 shell in read-only mode (no
# run is active, or it does not matter).
done_files() {
	local m
	m=$(manifest_path "$1" "$2")
	[[ -f $m ]] || return 0
	sqlite3 -readonly "$m" "
		SELECT CASE WHEN d.path = X'' THEN CAST(f.name AS TEXT)
		       ELSE CAST(d.path AS TEXT) || '/' || CAST(f.name AS TEXT) END
		FROM files f JOIN dirs d ON d.id = f.dir
		WHERE f.state = 1 AND f.type = 1;"
}

# dst_meta DIR: "path<TAB>inode ctime" of every file in place in DIR, by
# path (temp files left out).
dst_meta() {
	find "$1" -type f ! -name '*.ferry-part' -printf '%P\t%i %C@\n' 2>/dev/null | sort
}
