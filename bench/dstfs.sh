# shellcheck shell=bash
# bench/dstfs.sh - sourced by bench/run: --dst-fs ext4, a new file system
# for the destination of every fresh copy.
#
# Why: this machine's work directory is ext4 without a journal, and there
# ext4 will not reuse an inode freed in the last 60 s (360 s while its
# inode-table block is dirty): allocating one tests the free inodes of the
# group in turn, a buffer-cache lookup each (ialloc.c, recently_deleted). bench/run
# removes each copy just before the next one, so every run after the first
# paid for the inodes the one before freed: in the 20,000-file scenario s,
# `recently_deleted` and the lookups under it were 27-36 % of the samples of
# a ferry run (perf), and its time on what ran in the minutes before. With --dst-fs
# ext4 each timed copy goes into a file system made for it: mkfs.ext4's
# defaults (a journal, as on the users' own disks), inode tables zeroed by
# mkfs rather than in the background during the run, on a loop device with
# direct I/O (no second page cache) over an image in the work directory.
#
# Calling sequence (fresh_copy): dstfs_up SRC before the copy sets DSTFS_MNT
# (false with DSTFS_WHY); dstfs_down after it; cleanup_dstfs from the EXIT
# trap. What a killed earlier run left in the same work directory (its
# mount, the loop devices on its image) goes before a new one is made.

DST_FS=work
DSTFS_IMG="" DSTFS_MNT="" DSTFS_LOOP="" DSTFS_WHY=""
declare -A DSTFS_SIZE DSTFS_INODES

dstfs_describe() {
	case $DST_FS in
	ext4) echo "a new ext4 for every timed copy (mkfs.ext4 defaults, with a journal, inode tables zeroed by mkfs) on a loop device with direct I/O over an image in the work directory (--dst-fs ext4)" ;;
	*) echo "the work directory" ;;
	esac
}

# dstfs_size SRC: the image's bytes and inodes for a copy of SRC (cached).
dstfs_size() {
	local kib entries
	[ -n "${DSTFS_SIZE[$1]:-}" ] && return 0
	# -l: a tool that does not keep hard links writes every name's data
	kib=$(du -skl "$1" | awk '{ print $1 }')
	entries=$(find "$1" | wc -l)
	# twice the tree and 512 MiB for the journal and metadata; twice the
	# names (temp files, snapshots that do not share an inode)
	DSTFS_SIZE[$1]=$(((2 * kib + 524288) * 1024))
	DSTFS_INODES[$1]=$((2 * entries + 4096))
}

dstfs_up() {
	local src=$1 logf=$WORK/logs/dstfs.log
	if [ "$(id -u)" != 0 ]; then
		DSTFS_WHY="--dst-fs ext4 needs root (losetup, mount)"
		return 1
	fi
	DSTFS_IMG=$WORK/dstfs.img DSTFS_MNT=$WORK/mnt-dstfs
	dstfs_down || return 1
	dstfs_size "$src"
	mkdir -p "$DSTFS_MNT"
	truncate -s "${DSTFS_SIZE[$src]}" "$DSTFS_IMG" || { DSTFS_WHY="cannot create $DSTFS_IMG"; return 1; }
	DSTFS_LOOP=$(losetup --direct-io=on --find --show "$DSTFS_IMG" 2>"$logf") || {
		DSTFS_LOOP="" DSTFS_WHY="no loop device: $(head -c 200 "$logf")"
		dstfs_down
		return 1
	}
	mkfs.ext4 -q -F -N "${DSTFS_INODES[$src]}" -E lazy_itable_init=0,lazy_journal_init=0 \
		"$DSTFS_LOOP" >"$logf" 2>&1 || {
		DSTFS_WHY="mkfs.ext4 failed: $(head -c 200 "$logf")"
		dstfs_down
		return 1
	}
	mount "$DSTFS_LOOP" "$DSTFS_MNT" 2>"$logf" || {
		DSTFS_WHY="mount failed: $(head -c 200 "$logf")"
		dstfs_down
		return 1
	}
}

# dstfs_down: unmounts (lazily when it stays busy), detaches every loop
# device on the image (a busy one goes once unmounted: losetup -d sets
# autoclear) and removes the image; false when the mount stays.
dstfs_down() {
	local i dev
	if [ -n "$DSTFS_MNT" ]; then
		for i in 1 2 3 4 5; do
			mountpoint -q "$DSTFS_MNT" || break
			umount "$DSTFS_MNT" 2>/dev/null || sleep 1
		done
		mountpoint -q "$DSTFS_MNT" && umount -l "$DSTFS_MNT" 2>/dev/null
		if mountpoint -q "$DSTFS_MNT"; then
			DSTFS_WHY="cannot unmount '$DSTFS_MNT'"
			log "$DSTFS_WHY"
			return 1
		fi
	fi
	[ -n "$DSTFS_LOOP" ] && { losetup -d "$DSTFS_LOOP" 2>/dev/null || log "cannot detach '$DSTFS_LOOP'"; }
	DSTFS_LOOP=""
	if [ -n "$DSTFS_IMG" ] && [ -e "$DSTFS_IMG" ]; then
		for dev in $(losetup -n -O NAME -j "$DSTFS_IMG" 2>/dev/null); do
			losetup -d "$dev" 2>/dev/null || log "cannot detach '$dev'"
		done
		rm -f "$DSTFS_IMG"
	fi
	return 0
}

# (EXIT trap): the names are those dstfs_up uses, so that an interrupt
# between the attach and its assignment leaves nothing either
cleanup_dstfs() {
	[ "$DST_FS" = ext4 ] && [ -n "${WORK:-}" ] || return 0
	DSTFS_IMG=$WORK/dstfs.img DSTFS_MNT=$WORK/mnt-dstfs
	dstfs_down
}
