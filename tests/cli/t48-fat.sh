#!/bin/bash
# t48-fat: a FAT32 destination through fusefat (issue 10, item 3), which
# refuses chmod and holds files up to 4 GiB - 1:
#  - --no-perms calls no chmod on files, so every file copies (on f9081c4
#    fchmod failed every file); without --no-perms the probe finds that
#    DST keeps no modes, one warning says so, and every file copies too,
#    exit 0 (what DST cannot hold is not counted);
#  - a sparse SRC file of 4 GiB + 1 fails at once, before anything is
#    read or created, with the reason "larger than the destination can
#    hold (4 GiB - 1 on FAT32)" (stderr and `ferry status`), one warning
#    says it at the start, the rest copies (diff -r), exit 23; no 4 GiB
#    was written: the run takes seconds, its bytes_copied are the other
#    files', the image file's allocated size grows by far less, and no
#    temp file is left;
#  - with the big file gone from SRC the next run exits 0;
#  - fusefat sets a file's mtime to now when it is renamed, after its
#    times were set: the probe learns it and the copier sets the times
#    again after the rename, so after the first run into a new DST every
#    file's mtime is SRC's (within FAT's 2 s; SRC's are years old) and
#    --verify exits 0 (on main every mtime was the run's time); a manifest
#    whose cached probe result (note dst_caps) is of the format before
#    this was learned probes again, and the times are kept too.
# Needs root, FUSE, fusefat and mkfs.vfat (dosfstools); skipped with the
# reason otherwise.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd fusefat mkfs.vfat python3
need_root "mounts a FAT32 image through fusefat"
[[ -c /dev/fuse ]] || skip_all "no /dev/fuse"

truncate -s 256M fat.img || die "cannot create the image"
mkfs.vfat -F 32 fat.img >"$LOG/mkfs.out" 2>&1 ||
	skip_all "mkfs.vfat failed: $(head -c 200 "$LOG/mkfs.out")"
mkdir mnt
fusefat -o rw+ fat.img mnt >"$LOG/mount.err" 2>&1 ||
	skip_all "cannot mount FAT32 through fusefat: $(head -c 200 "$LOG/mount.err")"
track_mount "$T/mnt"
mountpoint -q mnt || skip_all "fusefat did not mount fat.img"

mkdir -p src/a src/b
for i in $(seq 60); do printf 'file %d\n' "$i" >"src/a/f$i"; done
for i in $(seq 40); do head -c $((i * 1000)) /dev/urandom >"src/b/g$i"; done
chmod 600 src/a/f1
chmod 755 src/b/g1
small_bytes=$(find src -type f -printf '%s\n' | awk '{n += $1} END {print n}')
truncate -s $((4 * 1024 * 1024 * 1024 + 1)) src/big
[[ $(stat -c %b src/big) -lt 64 ]] || skip_all "SRC cannot hold a sparse file"

# allocated IMG: the image file's allocated bytes on the host
allocated() { echo $(($(stat -c %b "$1") * 512)); }

# run 0: --no-perms calls no chmod on files whatever DST can hold: with
# every chmod refused (a local DST, fault injection), no file fails; only
# directories (ferry makes them 0700) are given the umask's mode
if "$FERRY" --version | grep -q '^test build:'; then
	mkdir -p local
	run env FERRY_FAULT=chmod:0:13 "$FERRY" --no-perms --exclude big src local/dst
	check "run 0 (--no-perms, chmod refused): every file arrived (diff -r)" \
		diff -r -x big src local/dst
	check "run 0: no file failed, only directories' modes" \
		eval '! grep "^ferry: failed:" "$LOG/err" | grep -qv "set directory mode"'
	show "$LOG/err" 4
else
	say "SKIP run 0: needs a build with -DFERRY_TESTING=ON (FERRY_FAULT)"
fi

# run 1: --no-owner --no-perms (as the man page advises for FAT), with the
# big file
before=$(allocated fat.img)
t0=$(date +%s)
run "$FERRY" --json --no-owner --no-perms src mnt/dst
t1=$(date +%s)
after=$(allocated fat.img)
show "$LOG/err" 8
check "run 1: the big file fails, the rest copies: exit 23 (got $RC)" test "$RC" = 23
check "run 1: every other file arrived (diff -r)" diff -r -x big src mnt/dst
check "run 1: the big file names the reason" \
	grep -qxF "ferry: failed: 'big': larger than the destination can hold (4 GiB - 1 on FAT32)" "$LOG/err"
check "run 1: a warning says it once, before the list" \
	test "$(grep -c '^ferry: warning: files larger than the destination can hold (4 GiB - 1 on FAT32)' "$LOG/err")" = 1
check "run 1: only the big file failed" eval '[[ $(grep -c "^ferry: failed:" "$LOG/err") == 1 ]]'
check "run 1: no chmod refusal" eval '! grep -q "set mode\|set owner" "$LOG/err"'
check "run 1: within seconds ($((t1 - t0)) s)" test $((t1 - t0)) -lt 30
check "run 1: bytes_copied are the other files' ($small_bytes)" \
	grep -q "\"bytes_copied\": $small_bytes," "$LOG/out"
check "run 1: the image grew by far less than 4 GiB ($((after - before)) bytes)" \
	test $((after - before)) -lt $((64 * 1024 * 1024))
check "run 1: no big file and no temp file in DST" \
	eval '[[ ! -e mnt/dst/big && -z $(find mnt/dst -name "*.ferry-part*") ]]'
run "$FERRY" status src mnt/dst
check "status: the big file's cause and reason" eval '
	grep -qx "1 × larger than DST can hold" "$LOG/out" &&
	grep -qxF "failed: '"'big'"': larger than the destination can hold (4 GiB - 1 on FAT32)" "$LOG/out"'

# run 2: the defaults into another directory: the probe finds no modes
# (nor owners): said once, not counted
run "$FERRY" src mnt/dst2
check "run 2 (defaults): exit 23 for the big file alone (got $RC)" test "$RC" = 23
check "run 2: every other file arrived (diff -r)" diff -r -x big src mnt/dst2
check "run 2: one warning says DST keeps no owners or modes" \
	test "$(grep -c '^ferry: warning: the destination keeps no owners, modes.*: copying data and times$' "$LOG/err")" = 1
check "run 2: no metadata counted as not applied" \
	eval '! grep -q "metadata not applied" "$LOG/err"'

# run 3: the big file gone from SRC
rm src/big
run "$FERRY" --no-perms src mnt/dst
check "run 3: exit 0 (got $RC)" test "$RC" = 0
check "run 3: DST equals SRC (diff -r)" diff -r src mnt/dst

# run 4: the first run into a new DST keeps SRC's (old) mtimes
i=0
while IFS= read -r -d '' f; do
	touch -d "@$((1500000000 + i * 3601))" "$f"
	i=$((i + 1))
done < <(find src -type f -print0)
run "$FERRY" --no-perms src mnt/dst4
check "run 4 (new DST): exit 0 (got $RC)" test "$RC" = 0
# mtimes_off D: the SRC files whose mtime in D is more than 2 s off
mtimes_off() {
	local f a b n=0
	while IFS= read -r -d '' f; do
		a=$(stat -c %Y "src/$f") b=$(stat -c %Y "$1/$f" 2>/dev/null) || b=0
		((a - b > 2 || b - a > 2)) && n=$((n + 1))
	done < <(cd src && find . -type f -print0)
	echo "$n"
}
# from the image, not the kernel's attribute cache (it shows the times as
# set for a while after the rename): mount it again
{ fusermount -u mnt 2>/dev/null || umount mnt; } &&
	fusefat -o rw+ fat.img mnt >"$LOG/mount.err" 2>&1 && mountpoint -q mnt ||
	die "cannot mount fat.img again: $(head -c 200 "$LOG/mount.err")"
off=$(mtimes_off mnt/dst4)
check "run 4: every file's mtime is SRC's within 2 s ($off of $i off)" test "$off" = 0
run "$FERRY" --verify --no-perms src mnt/dst4
check "run 4: --verify exits 0 (got $RC)" test "$RC" = 0
check "run 4: --verify finds no metadata difference" \
	eval '! grep -q "metadata differs:" "$LOG/out" "$LOG/err"'
show "$LOG/err" 4

# run 5: the cached probe result of an older ferry ("ID ROOT BITS MAX",
# no format word) is not taken as the rename keeping times: every file
# copied again keeps SRC's mtime
m=$(manifest_path src mnt/dst4)
note=$(sqlite3 -readonly "$m" "SELECT CAST(value AS TEXT) FROM meta WHERE key = 'dst_caps'")
check "run 5: the probe result is cached ($note)" eval '[[ $note == "f3 "* ]]'
read -r _ _ root bits max <<<"$note"
id=$(stat -c %d:%i mnt/dst4) # fusefat numbers the root anew at each mount
sqlite3 "$m" "UPDATE meta SET value = '$id $root $((bits & 127)) $max' WHERE key = 'dst_caps'" ||
	die "cannot write the note"
# new data (a copy, renamed into place), an older mtime
while IFS= read -r -d '' f; do
	t=$(stat -c %Y "$f")
	echo more >>"$f"
	touch -d "@$((t - 86400))" "$f"
done < <(find src -type f -print0)
run "$FERRY" --no-perms src mnt/dst4
check "run 5 (an old note): exit 0 (got $RC)" test "$RC" = 0
{ fusermount -u mnt 2>/dev/null || umount mnt; } &&
	fusefat -o rw+ fat.img mnt >"$LOG/mount.err" 2>&1 && mountpoint -q mnt ||
	die "cannot mount fat.img again: $(head -c 200 "$LOG/mount.err")"
off=$(mtimes_off mnt/dst4)
check "run 5: every file's mtime is SRC's within 2 s ($off of $i off)" test "$off" = 0
finish
