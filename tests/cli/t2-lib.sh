# tests/cli/t2-lib.sh - helpers of the t2x torture tests, sourced after
# lib.sh (its name does not match tNN-*.sh, so ctest does not run it).
#
#   . "$(dirname "$0")/lib.sh" || exit 1
#   . "$TESTS_CLI/t2-lib.sh" || exit 1
#
# Sourcing it again is a no-op (a second source would empty the lists of
# mounts and loop devices the EXIT trap undoes: t69 leaked a loop device
# per run that way).
#
# Modes (see tests/README):
#   FERRY_TORTURE=long   the long loops (many iterations, big trees); the
#                        default is the short CI mode.
#   FERRY_SANITIZE       set by ctest for a sanitizer build (or detected from
#                        the binary, lib.sh's SANITIZED): the short mode
#                        shrinks further.
#
# The central oracle is manifest_invariant: every row that the manifest calls
# done exists in DST under its name with the recorded size and hash, taken
# by xxhsum -H2 (regular files) or of the link target (symlinks), and the
# names of one hardlinked inode are one inode in DST. It reads the manifest
# with the sqlite3 shell in read-only mode, names as hex.

[[ -n ${T2_LIB_LOADED-} ]] && return 0
T2_LIB_LOADED=1

LONG_MODE=0
[[ ${FERRY_TORTURE-} == long ]] && LONG_MODE=1

# A sanitizer build: lib.sh's SANITIZED.
if ((LONG_MODE)); then
	say "mode: long (FERRY_TORTURE=long)"
elif [[ -n $SANITIZED ]]; then
	say "mode: short, sanitizer build ($SANITIZED): smaller loops"
else
	say "mode: short (set FERRY_TORTURE=long for the long loops)"
fi

# pick SHORT SANITIZER LONG: the value for the current mode.
pick() {
	if ((LONG_MODE)); then
		printf '%s' "$3"
	elif [[ -n $SANITIZED ]]; then
		printf '%s' "$2"
	else
		printf '%s' "$1"
	fi
}

# no_sanitizer_report FILE...: no AddressSanitizer/UBSan/TSan report in the
# outputs of the last run.
no_sanitizer_report() {
	if grep -qE 'Sanitizer|runtime error:' -- "$@" 2>/dev/null; then
		fail "no sanitizer report"
		grep -hE -A5 'Sanitizer|runtime error:' -- "$@" | show -
		return 1
	fi
	return 0
}

# not_a_crash RC: the exit status is not a signal (segfault, abort) nor a
# sanitizer's exit status (ASan and UBSan exit 1 with halt_on_error; ferry
# uses 1 only for usage errors, which these tests never make).
not_a_crash() {
	(($1 < 128 && $1 != 1))
}

# ---- the manifest invariant ----------------------------------------------

# unhex_list: hex strings, one per line, to NUL-terminated byte strings.
unhex_list() {
	sed 's/$/00/' | xxd -r -p
}

# hash_file PATH: xxhsum -H2 of PATH, at any depth (paths longer than
# PATH_MAX are entered one directory at a time).
hash_file() {
	if ((${#1} < 4000)); then
		xxhsum -H2 <"$1" 2>/dev/null | cut -d' ' -f1
		return
	fi
	(
		local rel=$1
		while [[ $rel == */* ]]; do
			cd -- "${rel%%/*}" 2>/dev/null || exit 1
			rel=${rel#*/}
		done
		xxhsum -H2 <"./$rel" 2>/dev/null | cut -d' ' -f1
	)
}

# stat_deep FORMAT PATH: stat -c FORMAT of PATH (not followed), at any depth.
stat_deep() {
	if ((${#2} < 4000)); then
		stat -c "$1" -- "$2" 2>/dev/null
		return
	fi
	(
		local rel=$2
		while [[ $rel == */* ]]; do
			cd -- "${rel%%/*}" 2>/dev/null || exit 1
			rel=${rel#*/}
		done
		stat -c "$1" -- "./$rel" 2>/dev/null
	)
}

# link_hash PATH: xxhsum -H2 of the target of symlink PATH, at any depth.
link_hash() {
	local t
	t=$(
		rel=$1
		if ((${#rel} >= 4000)); then
			while [[ $rel == */* ]]; do
				cd -- "${rel%%/*}" 2>/dev/null || exit 1
				rel=${rel#*/}
			done
			rel=./$rel
		fi
		readlink -- "$rel" && echo x # x keeps trailing newlines
	) || return 1
	printf '%s' "${t%$'\nx'}" | xxhsum -H2 | cut -d' ' -f1
}

# done_rows MANIFEST: the done rows as "id type size hash hl" lines in
# $LOG/inv.meta and their DST-relative paths, NUL-terminated, in the same
# order in $LOG/inv.paths.
done_rows() {
	local q="FROM files f JOIN dirs d ON d.id = f.dir WHERE f.state = 1 ORDER BY f.id"
	sqlite3 -readonly -separator ' ' "$1" \
		"SELECT f.id, f.type, f.size, coalesce(lower(hex(f.hash)), '-'),
		        coalesce(f.hl, '-') $q;" >"$LOG/inv.meta" 2>"$LOG/inv.sqlerr" &&
		sqlite3 -readonly "$1" \
			"SELECT hex(CASE WHEN d.path = X'' THEN f.name
			            ELSE d.path || X'2F' || f.name END) $q;" 2>>"$LOG/inv.sqlerr" |
		unhex_list >"$LOG/inv.paths"
}

# manifest_invariant MANIFEST DST LABEL: the check described at the top,
# as one ok / not ok line. INV_DONE counts the done rows.
manifest_invariant() {
	local m=$1 dst=$2 label=$3
	if [[ ! -f $m ]]; then
		INV_DONE=0
		ok "$label: invariant (no manifest yet)"
		return 0
	fi
	local desc="$label: every done row is in DST with its size and hash"
	if invariant_holds "$m" "$dst"; then
		ok "$desc ($INV_DONE rows)"
		return 0
	fi
	fail "$desc ($(wc -l <"$LOG/inv.bad") of $INV_DONE are not)"
	show "$LOG/inv.bad" 10
	return 1
}

# bad_row REL WHAT: note a row that breaks the invariant.
bad_row() {
	printf '%s: %q\n' "$2" "$1" >>"$LOG/inv.bad"
	printf '%s\0' "$1" >>"$LOG/inv.badpaths"
}

# invariant_holds MANIFEST DST: the invariant, silently; the rows that break
# it are described in $LOG/inv.bad (their paths in $LOG/inv.badpaths,
# NUL-terminated); INV_DONE counts the done rows.
invariant_holds() {
	local m=$1 dst=$2
	local id type size hash hl rel p got i=0
	local -a paths=() plain=() plainwant=() sizes=() hashes=()
	local -A path_of=() hl_of=()
	INV_DONE=0
	: >"$LOG/inv.bad"
	: >"$LOG/inv.badpaths"
	if ! done_rows "$m"; then
		printf 'manifest not readable with sqlite3 -readonly:\n' >"$LOG/inv.bad"
		cat "$LOG/inv.sqlerr" >>"$LOG/inv.bad"
		return 1
	fi
	mapfile -d '' -t paths <"$LOG/inv.paths"
	while read -r id type size hash hl; do
		rel=${paths[i]}
		p=$dst/$rel
		i=$((i + 1))
		path_of[$id]=$rel
		[[ $hl != - && $hl != -1 ]] && hl_of[$id]=$hl
		case $type in
		1)
			if [[ $p == *$'\n'* || ${#p} -ge 4000 ]]; then
				# slow path: one stat and one xxhsum of its own
				got=$(stat_deep '%s %F' "$p")
				got=${got/ regular empty file/ regular file}
				if [[ $got != "$size regular file" ]]; then
					bad_row "$rel" "DST has '${got:-nothing}', manifest size $size"
					continue
				fi
				got=$(hash_file "$p")
				[[ $got == "$hash" ]] ||
					bad_row "$rel" "hash ${got:-?}, manifest $hash"
			elif [[ -L $p || ! -f $p ]]; then
				bad_row "$rel" "done but missing or not a regular file"
			else
				plain+=("$p")
				plainwant+=("$size $hash")
			fi
			;;
		2)
			if [[ $(stat_deep %F "$p") != "symbolic link" ]]; then
				bad_row "$rel" "done but missing or not a symlink"
				continue
			fi
			got=$(link_hash "$p")
			[[ $got == "$hash" ]] ||
				bad_row "$rel" "link target hash $got, manifest $hash"
			;;
		*) ;; # special files are never done with data
		esac
	done <"$LOG/inv.meta"
	INV_DONE=$i

	# the plain names: sizes and hashes with one stat and one xxhsum call
	if ((${#plain[@]})); then
		printf '%s\0' "${plain[@]}" | xargs -0 stat -c %s -- >"$LOG/inv.sizes" 2>/dev/null
		printf '%s\0' "${plain[@]}" | xargs -0 xxhsum -H2 -- 2>/dev/null |
			sed 's/^\\//' | cut -c1-32 >"$LOG/inv.hashes"
		mapfile -t sizes <"$LOG/inv.sizes"
		mapfile -t hashes <"$LOG/inv.hashes"
		for ((i = 0; i < ${#plain[@]}; i++)); do
			got="${sizes[i]-?} ${hashes[i]-?}"
			[[ $got == "${plainwant[i]}" ]] ||
				bad_row "${plain[i]#"$dst/"}" "size+hash $got, manifest ${plainwant[i]}"
		done
	fi

	# hardlinks: a done name and its done leader are one inode in DST
	local lead
	for id in "${!hl_of[@]}"; do
		lead=${path_of[${hl_of[$id]}]-}
		[[ -n $lead ]] || continue
		if ((${#lead} < 4000 && ${#path_of[$id]} < 4000)) &&
			[[ ! $dst/${path_of[$id]} -ef $dst/$lead ]]; then
			bad_row "${path_of[$id]}" "not hardlinked to its leader $(printf %q "$lead")"
		fi
	done
	[[ ! -s $LOG/inv.bad ]]
}

# done_count MANIFEST: the number of done rows.
done_count() {
	sqlite3 -readonly "$1" 'SELECT count(*) FROM files WHERE state = 1;' 2>/dev/null || echo 0
}

# final_state SRC DST [FERRY-OPTIONS...]: the plain command completes, the
# manifest invariant holds, DST equals SRC by the oracles, no temp file is
# left and --verify is clean.
final_state() {
	local src=$1 dst=$2
	shift 2
	expect_code 0 "$FERRY" -q "$@" "$src" "$dst"
	manifest_invariant "$(manifest_path "$src" "$dst")" "$dst" "final run"
	tree_equal "$src" "$dst"
	no_temp_files "$dst"
	expect_code 0 "$FERRY" -q --verify "$@" "$src" "$dst"
}

# held_run PATH-OR-NAME SYSCALLS WHEN CMD...: run CMD in the background (bg)
# under strace, with the WHENth call of SYSCALLS (comma-separated) that
# accesses PATH-OR-NAME (any path when empty) held for HOLD_US microseconds
# (default 1.5 s); returns once that call is being held, 1 if it did not
# come within 30 s. The caller checks have_strace first.
held_run() {
	local what=$1 calls=$2 when=$3 filter=()
	shift 3
	[[ -n $what ]] && filter=(-P "$what")
	: >"$LOG/strace"
	bg env "$(no_leak_check_env)" strace -f -y -o "$LOG/strace" "${filter[@]}" \
		-e trace="$calls" -e inject="$calls:delay_enter=${HOLD_US:-1500000}:when=$when" "$@"
	wait_until 30 eval '(($(grep -cE "^[0-9]+ +(${calls//,/|})\(" "$LOG/strace") >= when))'
}

# ---- mounts -------------------------------------------------------------

# Mount points and loop devices this test made; unmounted / detached by the
# EXIT trap before lib.sh's cleanup removes $T (even when the test fails).
declare -a T2_MOUNTS=() T2_LOOPS=()

t2_cleanup_mounts() {
	local i
	for i in "${BG_PIDS[@]}"; do # nothing may keep a mount busy
		kill -CONT "$i" 2>/dev/null
		kill -KILL "$i" 2>/dev/null
		wait "$i" 2>/dev/null
	done
	cd / || return
	for ((i = ${#T2_MOUNTS[@]} - 1; i >= 0; i--)); do
		mountpoint -q -- "${T2_MOUNTS[i]}" 2>/dev/null || continue
		umount -- "${T2_MOUNTS[i]}" 2>/dev/null ||
			umount -l -- "${T2_MOUNTS[i]}" 2>/dev/null
	done
	for i in "${T2_LOOPS[@]}"; do
		losetup -d "$i" 2>/dev/null
	done
}
trap 't2_cleanup_mounts; cleanup' EXIT

need_root() {
	[[ $(id -u) == 0 ]] || skip_all "needs root ($*)"
}

# track_mount DIR: remember DIR for the EXIT trap.
track_mount() { T2_MOUNTS+=("$1"); }

# mount_exfat SIZE DIR: an exFAT image of SIZE (truncate's units) in $T,
# on a loop device (EXFAT_LOOP), mounted at DIR through exfat-fuse, both
# undone by the EXIT trap; or the test skips, saying why. Needs losetup,
# mkfs.exfat (exfatprogs), mount.exfat-fuse and /dev/fuse.
mount_exfat() {
	local img=$T/exfat.img loop
	truncate -s "$1" "$img" || die "cannot create the image"
	mkfs.exfat "$img" >"$LOG/mkfs.out" 2>&1 ||
		skip_all "mkfs.exfat failed: $(head -c 200 "$LOG/mkfs.out")"
	loop=$(losetup --find --show "$img" 2>"$LOG/losetup.err") ||
		skip_all "no loop device: $(head -c 200 "$LOG/losetup.err")"
	T2_LOOPS+=("$loop")
	EXFAT_LOOP=$loop
	mkdir -p "$2"
	mount.exfat-fuse "$loop" "$2" >"$LOG/mount.err" 2>&1 ||
		skip_all "cannot mount exFAT through FUSE: $(head -c 200 "$LOG/mount.err")"
	track_mount "$2"
	mountpoint -q "$2" || skip_all "exfat-fuse did not mount $loop"
}

# work_in_tmpfs SIZE: when root, move the test's work (trees, DST, the
# manifests) to a tmpfs of SIZE mounted on $T/fast, so that the many
# syncfs/fsync calls of the loops do not wait for the machine's disk; the
# logic under test (crash points, injected faults, locks) does not depend
# on the file system. Otherwise stay where we are, and say so.
work_in_tmpfs() {
	if [[ $(id -u) == 0 ]] && mkdir -p "$T/fast" &&
		mount -t tmpfs -o "size=$1,mode=0755" ferry-test "$T/fast" 2>"$LOG/mount.err"; then
		track_mount "$T/fast"
		cd "$T/fast" || die "cannot enter $T/fast"
		mkdir state
		export XDG_STATE_HOME=$PWD/state
		say "working in a $1 tmpfs (root)"
	else
		say "working on the file system of $T (not root, or tmpfs mount failed)"
	fi
}
