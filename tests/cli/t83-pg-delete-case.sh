#!/bin/bash
# t83-pg-delete-case: --delete in a shared job on a DST that compares names
# without case (exFAT through exfat-fuse on a loop device), against a
# throw-away PostgreSQL cluster on a Unix socket. A file or a directory
# renamed by case alone in SRC is, in DST, the same entry under either
# spelling: the new spelling's copy goes there, and the old spelling's
# row, removed from SRC, must not delete it (rule 9). Proves:
#  - after SRC renames Readme.txt to README.TXT and the directory Docs to
#    docs, a run with --delete exits 0 and DST still holds every file of
#    SRC with its content (cmp by SRC's names), and the file a user put in
#    DST stays;
#  - a file really removed from SRC is deleted (the same run), and the
#    next --delete run deletes nothing more;
#  - psql: no removed row is left.
# Needs root, a loop device, FUSE, exfat-fuse, exfatprogs and PostgreSQL;
# skipped with the reason otherwise.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
. "$TESTS_CLI/pg-lib.sh" || exit 1
pg_need
need_cmd losetup mkfs.exfat mount.exfat-fuse
[[ -c /dev/fuse ]] || skip_all "no /dev/fuse"
trap 'pg_cleanup; t2_cleanup_mounts; cleanup' EXIT

mount_exfat 64M "$T/mnt"

pg_init
pg_start
URL=$PG_SOCK_URL
fy() { "$FERRY" --manifest "$URL" --job-name case -j 4 --no-owner --no-perms "$@" src "$T/mnt/dst"; }
# same: every file of SRC is in DST with its content, looked up by SRC's
# names (DST finds them under any spelling)
same() {
	local f
	while IFS= read -r f; do
		cmp -s "src/$f" "mnt/dst/$f" || return 1
	done < <(cd src && find . -type f -printf '%P\n')
}

# (below SRC's top level, whose names are the job's fingerprint of SRC)
mkdir -p src/top/Docs src/keep
echo "read me" >src/top/Readme.txt
for f in a b c; do echo "doc $f" >"src/top/Docs/$f"; done
for f in x y; do echo "keep $f" >"src/keep/$f"; done
run fy
check "first run onto exFAT: exit 0 (got $RC)" test "$RC" = 0
[[ $RC == 0 ]] || show "$LOG/err"
check "... every file in DST" same

mv src/top/Readme.txt src/top/README.TXT
mv src/top/Docs src/top/docs
rm src/keep/y
echo "a user's file" >mnt/dst/keep/mine
sleep 1.2
run fy --delete
check "renamed by case in SRC (a file, a directory), --delete: exit 0 (got $RC)" \
	test "$RC" = 0 || show "$LOG/err"
check "... every file of SRC is still in DST with its content (cmp)" same
check "... the user's file stays" test -f mnt/dst/keep/mine
check "... keep/y, removed from SRC, deleted" test ! -e mnt/dst/keep/y
check "... psql: no removed file row left" \
	test "$(sql "SELECT count(*) FROM ferry.files WHERE state = 5")" = 0
run fy --delete
check "the next --delete run: exit 0, nothing deleted (got $RC)" \
	eval 'test "$RC" = 0 && grep -q " 0 deleted," "$LOG/err"' || show "$LOG/err"
check "... every file of SRC still in DST" same
finish
