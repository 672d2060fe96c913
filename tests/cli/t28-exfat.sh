#!/bin/bash
# t28-exfat: names that an exFAT destination cannot hold are reported per
# file, clearly, and the rest of the tree copies.
#
# DST is exFAT through exfat-fuse on a loop device (mkfs.exfat from
# exfatprogs), copied with --no-owner --no-perms --no-hard-links as the man
# page advises. The source holds a generated tree (no links) plus names
# exFAT refuses (: ? " * < > | \ and a control character), a symlink (exFAT
# has none), and two names that differ only by case. Proves:
#  - exit 23; each refused name is listed on stderr as "failed: 'NAME':
#    reason", with a reason that says the destination cannot hold the name
#    (not a bare errno such as "No such file or directory");
#  - of two names that differ only by case, one is copied and the other is
#    reported, never silently overwritten: the manifest invariant holds (each
#    done row is in DST with its size and hash);
#  - every other file is copied with its content (diff -r);
#  - a second run copies nothing again (times compare at exFAT's
#    granularity).
# Needs root, a loop device, FUSE, exfat-fuse and exfatprogs; skipped with
# the reason otherwise.
. "$(dirname "$0")/lib.sh" || exit 1
. "$(dirname "$0")/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd losetup mkfs.exfat mount.exfat-fuse
need_root "mounts an exFAT loop device through FUSE"
[[ -c /dev/fuse ]] || skip_all "no /dev/fuse"

BUG_NAME_REASON="a name exFAT cannot hold fails with the file system's bare errno ('create destination: No such file or directory') instead of a clear reason, and only when copied, not up front"
BUG_CASE="two names that differ only by case are both 'copied' to a case-insensitive DST: the second overwrites the first, and both rows are done"

truncate -s 128M exfat.img || die "cannot create the image"
mkfs.exfat exfat.img >"$LOG/mkfs.out" 2>&1 || skip_all "mkfs.exfat failed: $(head -c 200 "$LOG/mkfs.out")"
LOOP=$(losetup --find --show exfat.img 2>"$LOG/losetup.err") ||
	skip_all "no loop device: $(head -c 200 "$LOG/losetup.err")"
T2_LOOPS+=("$LOOP")
mkdir mnt
mount.exfat-fuse "$LOOP" mnt >"$LOG/mount.err" 2>&1 ||
	skip_all "cannot mount exFAT through FUSE: $(head -c 200 "$LOG/mount.err")"
track_mount "$T/mnt"
mountpoint -q mnt || skip_all "exfat-fuse did not mount $LOOP"

gen_tree src --seed 2828 --files 200 --median 4K --max-size 256K --no-links
BAD_NAMES=('colon:name' 'question?' 'quote"name' 'star*name' 'less<than' 'greater>than'
	'pipe|name' 'back\slash' $'control\x01char')
mkdir src/names
for n in "${BAD_NAMES[@]}"; do
	printf 'bad name %s\n' "$n" >"src/names/$n"
done
printf 'upper\n' >src/names/Readme.txt
printf 'lower, longer\n' >src/names/README.TXT
ln -s Readme.txt src/names/a-symlink
OPTS=(--no-owner --no-perms --no-hard-links)

run "$FERRY" -q "${OPTS[@]}" src mnt/dst
check "exit 23 (got $RC)" test "$RC" = 23
no_sanitizer_report "$LOG/err"
unclear=0
for n in "${BAD_NAMES[@]}" a-symlink; do
	q=$(printf '%s' "names/$n" | sed 's/\\/\\\\/g; s/\x01/\\x01/g')
	line=$(grep -F "failed: '$q': " "$LOG/err" | head -n1)
	if [[ -n $line ]]; then
		ok "reported: $(printf '%q' "names/$n")"
	else
		fail "reported: $(printf '%q' "names/$n")"
	fi
	[[ $line == *"No such file or directory"* ]] && unclear=$((unclear + 1))
done
if ((unclear == 0)); then
	ok "each refused name has a clear reason"
else
	known_bug "each refused name has a clear reason ($unclear say 'No such file or directory')" \
		"$BUG_NAME_REASON" false
	show "$LOG/err" 3
fi

# the case pair: one copied, one reported; no done row lies
cased=$(grep -c "failed: 'names/\(Readme.txt\|README.TXT\)'" "$LOG/err")
if invariant_holds "$(manifest_path src mnt/dst)" mnt/dst && ((cased == 1)); then
	ok "names that differ only by case: one copied, one reported"
else
	known_bug "names that differ only by case: one copied, one reported ($cased reported)" \
		"$BUG_CASE" false
	show "$LOG/inv.bad" 3
fi

check "every other file is copied (diff -r)" \
	diff -r --no-dereference -x names src mnt/dst
run "$FERRY" -v "${OPTS[@]}" src mnt/dst
verbose_copied "$LOG/out" >"$LOG/recopied"
if [[ ! -s $LOG/recopied ]]; then
	ok "a second run copies nothing again (exit $RC)"
else
	fail "a second run copies nothing again ($(wc -l <"$LOG/recopied") files)"
	show "$LOG/recopied"
fi
finish
