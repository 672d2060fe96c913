#!/bin/bash
# t17-jobs-durability: -j/--jobs sets the number of copy workers, and
# --durability decides which syncs reach DST (ferry(1)).
#
# Proves, with strace as the oracle:
#  - -j N starts N workers: runs with -j 1, --jobs=3 and -j 8 create threads
#    (clone/clone3 with CLONE_THREAD), besides the scan's (on demand: the
#    thread that reads SRC's root and those scan threads create, 1 to 64),
#    in counts that differ by exactly 2 and 7 from the -j 1 run, the threads
#    that create temp files in DST are among those created, and there is one
#    of them with -j 1 and from 2 to N with N > 1 (so the workers are what
#    -j counts, and they share the work);
#  - --durability=none: no fsync, fdatasync or syncfs of anything in DST
#    (while the manifest, outside DST, is synced: the trace sees syncs);
#  - --durability=file: every regular file is fsynced before it is renamed
#    into place (the temp files fsynced are, by name, exactly the inodes of
#    the regular files in DST), and so is each directory that received a
#    file and every directory once its metadata is set; DST is never
#    syncfs'ed;
#  - --durability=batch, and no option (the default): at least one syncfs of
#    DST, an fsync of each directory that received a file (on XFS, Btrfs,
#    ext2/3/4, where the syncfs and one fsync after it cover them all, an
#    fsync of DST's root and of no other: t75 proves each kind on loop
#    images), and no fsync of anything but directories in DST;
#  - every run leaves DST equal to SRC (tree_equal).
# fds are named by strace -y; only those inside DST count.
. "$(dirname "$0")/lib.sh" || exit 1

need_strace
need_cmd rsync

gen_tree src --seed 1717 --files 600 --median 1K --max-size 64K

# traced DST TRACE FERRY-ARGS...: ferry -q FERRY-ARGS src DST under strace -f
# -y with -e trace=TRACE into $LOG/strace.DST; a check that it exits 0, then
# tree_equal src DST.
traced() {
	local dst=$1 calls=$2
	shift 2
	expect_code 0 env "$(no_leak_check_env)" strace -f -y -o "$LOG/strace.$dst" \
		-e trace="$calls" "$FERRY" -q "$@" src "$dst"
	tree_equal src "$dst"
}

# calls_in LOG NAMES DIR: the calls of NAMES (an ERE such as
# 'fsync|fdatasync') in the strace LOG whose first argument is an fd inside
# DIR (DIR itself or below), as "name path" lines. A call interrupted by
# another thread's (" <unfinished ...>") is listed by its first half, which
# holds the arguments; the "<... resumed>" half is not.
calls_in() {
	sed -nE "s#^[0-9]+ +($2)\\([0-9]+<($3(/[^>]*)?)>.*#\\1 \\2#p" "$1"
}

# ---- -j / --jobs ----------------------------------------------------------

# thread_count LOG: threads created (clone or clone3 with CLONE_THREAD).
thread_count() {
	grep -cE '^[0-9]+ +clone3?\(.*CLONE_THREAD' "$1"
}

# scan_count LOG: the scan's threads, which start on demand: the created
# thread that first reads SRC's root (getdents64), and every thread that a
# scan thread created.
scan_count() {
	awk -v root="$(readlink -f src)" '
		/^[0-9]+ +(clone3?\(.*CLONE_THREAD|<\.\.\. clone3? resumed>).* = [0-9]+$/ {
			parent[$NF] = $1
		}
		!first && index($0, " getdents64(") && index($0, "<" root ">,") {
			if ($1 in parent) first = $1
		}
		END {
			if (!first) { print 0; exit }
			scan[first] = 1
			for (grew = 1; grew;) {
				grew = 0
				for (t in parent)
					if (!(t in scan) && (parent[t] in scan)) { scan[t] = 1; grew = 1 }
			}
			n = 0
			for (t in scan) n++
			print n
		}' "$1"
}

# created_tids LOG: the ids of the threads created, one a line.
created_tids() {
	grep -E '^[0-9]+ +clone3?\(.*CLONE_THREAD' "$1" | sed -nE 's/.* = ([0-9]+)$/\1/p'
	# a creation cut by another thread's call ends in its resumed half
	grep -E '^[0-9]+ +<\.\.\. clone3? resumed>' "$1" | sed -nE 's/.* = ([0-9]+)$/\1/p'
}

# writer_tids LOG: the threads that created a temp file of a copy in DST
# (ferry's name probes at the start are made by the main thread: left out).
writer_tids() {
	grep -E '^[0-9]+ +openat2?\(.*\.ferry-part".*O_CREAT' "$1" |
		grep -v '\.ferry-probe\.' | awk '{print $1}' | sort -u
}

check_jobs() {
	local n dst base
	local -A threads=()
	for n in 1 3 8; do
		dst=dst-j$n
		if ((n == 3)); then
			traced "$dst" clone,clone3,openat,openat2,getdents64 --jobs=$n
		else
			traced "$dst" clone,clone3,openat,openat2,getdents64 -j $n
		fi
		local scan
		scan=$(scan_count "$LOG/strace.$dst")
		check "-j $n: 1 to 64 scan threads (got $scan)" test "$scan" -ge 1 -a "$scan" -le 64
		threads[$n]=$(($(thread_count "$LOG/strace.$dst") - scan))
		writer_tids "$LOG/strace.$dst" >"$LOG/writers.$n"
		created_tids "$LOG/strace.$dst" | sort -u >"$LOG/created.$n"
		local w
		w=$(wc -l <"$LOG/writers.$n")
		say "-j $n: ${threads[$n]} threads created besides $scan of the scan, $w of them created files in DST"
		if ((n == 1)); then
			check "-j 1: one thread creates the files in DST (got $w)" test "$w" = 1
		else
			check "-j $n: 2 to $n threads create the files in DST (got $w)" \
				test "$w" -ge 2 -a "$w" -le "$n"
		fi
		check "-j $n: the threads that create files are created threads, not main" \
			test -s "$LOG/writers.$n" -a -z "$(comm -23 "$LOG/writers.$n" "$LOG/created.$n")"
	done
	base=${threads[1]}
	check "--jobs=3 creates 2 threads more than -j 1 (${threads[3]} vs $base)" \
		test $((threads[3] - base)) = 2
	check "-j 8 creates 7 threads more than -j 1 (${threads[8]} vs $base)" \
		test $((threads[8] - base)) = 7
}

# ---- --durability ---------------------------------------------------------

# touched_dirs DST: the directories of DST that hold a file or symlink
# (those ferry put there), as absolute paths.
touched_dirs() {
	find "$DSTABS/$1" ! -type d -printf '%h\n' | sort -u
}

# synced_dirs_cover DST MODE: every directory that received a file was
# fsynced.
synced_dirs_cover() {
	calls_in "$LOG/strace.$1" fsync "$DSTABS/$1" | cut -d' ' -f2- | sort -u >"$LOG/fsynced"
	touched_dirs "$1" >"$LOG/touched"
	comm -23 "$LOG/touched" "$LOG/fsynced" >"$LOG/unsynced"
	if [[ ! -s $LOG/unsynced ]]; then
		ok "$2: each of the $(wc -l <"$LOG/touched") directories that received files is fsynced"
	else
		fail "$2: each directory that received files is fsynced ($(wc -l <"$LOG/unsynced") not)"
		show "$LOG/unsynced" 5
	fi
}

check_none() {
	traced dst-none fsync,fdatasync,syncfs --durability=none
	calls_in "$LOG/strace.dst-none" 'fsync|fdatasync|syncfs' "$DSTABS/dst-none" >"$LOG/dst-syncs"
	check "none: no fsync, fdatasync or syncfs of DST or anything in it" \
		test ! -s "$LOG/dst-syncs"
	show "$LOG/dst-syncs" 5
	# the trace works: the manifest's own syncs are there
	calls_in "$LOG/strace.dst-none" 'fsync|fdatasync' "$XDG_STATE_HOME" >"$LOG/state-syncs"
	check "none: the trace sees the manifest's syncs ($(wc -l <"$LOG/state-syncs"), outside DST)" \
		test -s "$LOG/state-syncs"
}

check_file() {
	local p dir base
	traced dst-file fsync,fdatasync,syncfs --durability=file
	# the temp files fsynced, by their final names: ".NAME.ID.ferry-part"
	calls_in "$LOG/strace.dst-file" 'fsync|fdatasync' "$DSTABS/dst-file" |
		cut -d' ' -f2- | grep '\.ferry-part$' | sort -u >"$LOG/synced-temps"
	: >"$LOG/synced-inodes"
	while IFS= read -r p; do
		dir=${p%/*} base=${p##*/}
		base=${base#.}
		base=${base%.ferry-part}
		base=${base%.*}
		stat -c %i -- "$dir/$base" >>"$LOG/synced-inodes" 2>/dev/null ||
			printf 'no file for %s\n' "$p" >>"$LOG/synced-inodes"
	done <"$LOG/synced-temps"
	sort -u -o "$LOG/synced-inodes" "$LOG/synced-inodes"
	find dst-file -type f -printf '%i\n' | sort -u >"$LOG/file-inodes"
	if [[ -s $LOG/file-inodes ]] && cmp -s "$LOG/file-inodes" "$LOG/synced-inodes"; then
		ok "file: each of the $(wc -l <"$LOG/file-inodes") regular files is fsynced before its rename"
	else
		fail "file: each regular file is fsynced before its rename (< not synced, > no such file)"
		diff "$LOG/file-inodes" "$LOG/synced-inodes" | show - 10
	fi
	synced_dirs_cover dst-file file
	# no syncfs at all, also not at the end of the run: this mode is for
	# file systems whose syncfs is not reliable; instead every directory,
	# empty ones included, is fsynced once its metadata is set
	calls_in "$LOG/strace.dst-file" syncfs "$DSTABS/dst-file" >"$LOG/syncfs"
	check "file: no syncfs of DST ($(wc -l <"$LOG/syncfs") calls)" test ! -s "$LOG/syncfs"
	calls_in "$LOG/strace.dst-file" 'fsync|fdatasync' "$DSTABS/dst-file" |
		cut -d' ' -f2- | sort -u >"$LOG/synced-paths"
	find "$DSTABS/dst-file" -type d | sort >"$LOG/all-dirs"
	comm -23 "$LOG/all-dirs" "$LOG/synced-paths" >"$LOG/dirs-unsynced"
	check "file: each of the $(wc -l <"$LOG/all-dirs") directories of DST is fsynced" \
		test ! -s "$LOG/dirs-unsynced"
	show "$LOG/dirs-unsynced" 5
}

# check_batch DST LABEL FERRY-ARGS...
check_batch() {
	local dst=$1 label=$2 p
	shift 2
	traced "$dst" fsync,fdatasync,syncfs "$@"
	calls_in "$LOG/strace.$dst" syncfs "$DSTABS/$dst" >"$LOG/syncfs"
	check "$label: syncfs of DST ($(wc -l <"$LOG/syncfs") calls)" test -s "$LOG/syncfs"
	: >"$LOG/not-dirs"
	while IFS= read -r p; do
		[[ -d $p ]] || printf '%s\n' "$p" >>"$LOG/not-dirs"
	done < <(calls_in "$LOG/strace.$dst" 'fsync|fdatasync' "$DSTABS/$dst" | cut -d' ' -f2- | sort -u)
	check "$label: no fsync or fdatasync of anything but directories in DST" \
		test ! -s "$LOG/not-dirs"
	show "$LOG/not-dirs" 5
	if one_fsync_covers "$DSTABS/$dst"; then
		local kind
		kind=$(findmnt -n -o FSTYPE -T "$DSTABS/$dst" | tail -n 1)
		calls_in "$LOG/strace.$dst" fsync "$DSTABS/$dst" | cut -d' ' -f2- | sort -u >"$LOG/fsynced"
		check "$label: on $kind, an fsync of DST's root" \
			grep -qxF "$DSTABS/$dst" "$LOG/fsynced"
		grep -vxF "$DSTABS/$dst" "$LOG/fsynced" >"$LOG/synced-anyway"
		check "$label: on $kind, no other directory is fsynced ($(wc -l <"$LOG/synced-anyway") are)" \
			test ! -s "$LOG/synced-anyway"
		show "$LOG/synced-anyway" 5
	else
		synced_dirs_cover "$dst" "$label"
	fi
}

# check_file_delete: --durability=file --delete, where a directory removed
# from SRC cannot be removed from DST (it holds a file ferry did not copy):
# the files ferry deleted in it are made durable by an fsync of it, after
# the deletions, since no later step visits that directory.
check_file_delete() {
	mkdir -p srcdel/gone srcdel/kept
	printf 'a\n' >srcdel/gone/a
	printf 'b\n' >srcdel/gone/b
	printf 'k\n' >srcdel/kept/k
	expect_code 0 "$FERRY" -q --durability=file srcdel dst-del
	printf 'not ferry'"'"'s\n' >dst-del/gone/user-file
	rm -r srcdel/gone
	expect_code 0 env "$(no_leak_check_env)" strace -f -y -o "$LOG/strace.del" \
		-e trace=fsync,fdatasync,syncfs,unlinkat "$FERRY" -q --durability=file \
		--delete srcdel dst-del
	check "file --delete: the files ferry copied are deleted, the other kept" \
		test ! -e dst-del/gone/a -a ! -e dst-del/gone/b -a -e dst-del/gone/user-file
	local last_unlink last_sync
	last_unlink=$(grep -n "unlinkat([0-9]*<$DSTABS/dst-del/gone>, \"[ab]\"" "$LOG/strace.del" | tail -n 1 | cut -d: -f1)
	last_sync=$(grep -n "fsync([0-9]*<$DSTABS/dst-del/gone>)" "$LOG/strace.del" | tail -n 1 | cut -d: -f1)
	check "file --delete: the directory that could not be removed is fsynced after the deletions in it" \
		test -n "$last_unlink" -a -n "$last_sync" -a "${last_sync:-0}" -gt "${last_unlink:-0}"
	calls_in "$LOG/strace.del" syncfs "$DSTABS/dst-del" >"$LOG/syncfs"
	check "file --delete: no syncfs" test ! -s "$LOG/syncfs"
}

DSTABS=$(readlink -f .)
XDG_STATE_HOME=$(readlink -f "$XDG_STATE_HOME")
check_jobs
check_none
check_file
check_file_delete
check_batch dst-batch batch --durability=batch
check_batch dst-default "default (batch)"
finish
