#!/bin/bash
# t27-hostile-manifest: a damaged or foreign manifest is refused with one
# clear line and exit 3, and is never written to.
#
# A real manifest (a finished copy of a generated tree) is damaged in copies:
#  - truncated at several offsets (inside the header, at page boundaries,
#    in the middle of a page, one byte short);
#  - random bytes written over the b-tree header of page 1, over the header
#    of a page in the middle, and at random offsets (seeded);
#  - from a newer schema version (PRAGMA user_version = 999);
#  - an index out of step with its table (its definition rewritten), which
#    only integrity_check sees: a run checks beside its scan and must not
#    COMMIT before the verdict;
#  - 0 bytes beside a -wal with frames;
#  - not SQLite at all: text, random bytes, zeros, the SQLite magic followed
#    by garbage, a directory; an SQLite file of another program; the
#    manifest of another SRC and DST.
# For each, the copy (`ferry --manifest M SRC DST`), `ferry --verify` and
# `ferry status --manifest M` must exit 3 with exactly one "ferry: " line on
# stderr and no sanitizer report, M must be byte-identical afterwards (cmp)
# with no -wal or -shm file left next to it, and DST must not be created.
# For random damage, the sqlite3 shell's PRAGMA integrity_check is the
# oracle of whether the file is corrupt: when it finds nothing wrong either,
# ferry may use the file, but must not crash. (ferry reads a manifest this
# small through before writing to it; `ferry status` only reads, and may
# show a manifest whose damage its queries do not meet.)
# A first run killed as it made its manifest (FERRY_CRASH=manifest_created)
# leaves 0 bytes and no DST (or the empty one the user made): the same
# command must make it anew and complete. Finally the default manifest ($XDG_STATE_HOME/ferry/*.db) is damaged the
# same way, and once it is restored the job completes.
. "$(dirname "$0")/lib.sh" || exit 1
. "$TESTS_CLI/t2-lib.sh" || exit 1
need_cmd sqlite3 xxhsum xxd cmp od

seed=${FERRY_TEST_SEED:-$$}
RANDOM=$seed
say "random seed $seed (set FERRY_TEST_SEED to repeat)"
RANDOM_DAMAGE=$(pick 6 3 40)

gen_tree src --seed 2727 --files 300 --median 2K
expect_code 0 "$FERRY" -q --manifest good.db src dst-good
[[ -f good.db && ! -e good.db-wal ]] || die "no checkpointed manifest good.db after a clean run"
SIZE=$(stat -c %s good.db)
PAGE=$(sqlite3 -readonly good.db 'PRAGMA page_size;')
say "manifest: $SIZE bytes, pages of $PAGE"
cases=0

# integrity_ok FILE: the sqlite3 shell finds nothing wrong with FILE.
integrity_ok() {
	[[ $(sqlite3 -readonly "$1" 'PRAGMA integrity_check;' 2>&1) == ok ]]
}

# one_refusal LABEL M DEEP CMD...: CMD exits 3 with one clear "ferry: "
# line, no sanitizer report, leaves M byte-identical and no -wal or -shm
# next to it. With DEEP=1 (damage deep inside that only PRAGMA
# integrity_check sees), status, which only reads, may also exit 0 without
# writing; a copy or --verify, which write, must refuse.
one_refusal() {
	local label=$1 m=$2 deep=$3
	shift 3
	run_ferry "$@"
	local desc changed=unchanged
	desc="$label: $(quote_cmd "$@" | sed 's/^ferry //')"
	cmp -s "$m" "$m.orig" || changed=changed
	local is_status=0
	[[ $1 == status || ${2-} == status ]] && is_status=1
	if [[ $RC == 0 && $deep == 1 && $is_status == 1 && $changed == unchanged ]]; then
		ok "$desc: exit 0 (need not read the damaged part), unchanged"
	else
		if [[ $RC == 3 ]]; then
			ok "$desc: exit 3"
		else
			fail "$desc: exit 3 (got $RC)"
			show "$LOG/err"
		fi
		if [[ $(wc -l <"$LOG/err") == 1 ]] && grep -q '^ferry: ' "$LOG/err"; then
			ok "$desc: one line: $(cut -c1-100 "$LOG/err")"
		else
			fail "$desc: one error line starting 'ferry: '"
			show "$LOG/err"
		fi
		no_sanitizer_report "$LOG/err" "$LOG/out" && ok "$desc: no sanitizer report"
		check "$desc: the manifest is byte-identical" test "$changed" = unchanged
	fi
	check "$desc: no -wal or -shm file next to it" test ! -e "$m-wal" -a ! -e "$m-shm"
	rm -f "$m-wal" "$m-shm"
}

# refused LABEL M [DEEP]: the copy, --verify and status refuse M, and DST is
# left alone (see one_refusal for DEEP).
refused() {
	local label=$1 m=$2 deep=${3:-0}
	cases=$((cases + 1))
	cp -a "$m" "$m.orig"
	dst_listing >"$LOG/dst.before"
	one_refusal "$label" "$m" "$deep" "$FERRY" -q --manifest "$m" src dst-good
	dst_listing >"$LOG/dst.after"
	if cmp -s "$LOG/dst.before" "$LOG/dst.after"; then
		ok "$label: DST is left alone"
	else
		fail "$label: DST is left alone"
		diff "$LOG/dst.before" "$LOG/dst.after" | show -
	fi
	cp -a "$m.orig" "$m"
	one_refusal "$label" "$m" "$deep" "$FERRY" -q --verify --manifest "$m" src dst-good
	cp -a "$m.orig" "$m"
	one_refusal "$label" "$m" "$deep" "$FERRY" status --manifest "$m"
	rm -rf "$m.orig" "$m.lock"
}

# dst_listing: names, sizes, ns mtimes and inodes of everything in dst-good.
dst_listing() {
	find dst-good -printf '%P %s %T@ %i %m\n' | sort
}

# damaged NAME: a fresh copy of the good manifest named NAME.
damaged() {
	rm -f "$1" "$1".*
	cp good.db "$1"
}

# overwrite FILE OFFSET COUNT: COUNT random bytes (from the seed) at OFFSET.
overwrite() {
	local i esc=
	for ((i = 0; i < $3; i++)); do
		esc+=$(printf '\\x%02x' $((RANDOM % 256)))
	done
	printf '%b' "$esc" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# run_ferry CMD...: run (lib.sh) with a time limit: a ferry that hangs on a
# damaged manifest is a failure of its own (RC 124).
HANG_LIMIT=$(pick 60 180 60)
run_ferry() {
	run timeout -k 5 "$HANG_LIMIT" "$@"
	if [[ $RC == 124 || $RC == 137 ]]; then
		fail "$(quote_cmd "$@"): ferry ends within $HANG_LIMIT s (it hung; seed $seed)"
	fi
}

# truncations: at page boundaries SQLite sees a short file; inside the last
# page it reads the missing bytes as zeros and only integrity_check (or a
# size check) can tell
for off in 0 16 50 100 $((PAGE)) $((PAGE + 1000)) $((SIZE / 2)) $((SIZE - PAGE)) $((SIZE - 100)) $((SIZE - 1)); do
	((off >= 0 && off < SIZE)) || continue
	damaged cut.db
	truncate -s "$off" cut.db
	if ((off <= 2 * PAGE)); then
		refused "truncated to $off bytes" cut.db
	elif ((off % PAGE == 0)); then
		refused "truncated to $off bytes (a page boundary)" cut.db
	else
		refused "truncated to $off bytes (inside a page)" cut.db
	fi
done

# page 1's b-tree header (after the 100-byte file header) and a middle page
damaged hdr.db
overwrite hdr.db 100 12
refused "random bytes over page 1's b-tree header" hdr.db
damaged mid.db
mid=$((SIZE / PAGE / 2 * PAGE))
printf '\xff\xff\xff\xff\xff\xff\xff\xff' | dd of=mid.db bs=1 seek="$mid" conv=notrunc status=none
refused "0xff over the header of page $((mid / PAGE + 1))" mid.db 1

# random damage in the middle, judged by integrity_check
for ((i = 1; i <= RANDOM_DAMAGE; i++)); do
	damaged rnd.db
	off=$((2 * PAGE + (RANDOM * 32768 + RANDOM) % (SIZE - 3 * PAGE)))
	len=$((RANDOM % 64 + 1))
	overwrite rnd.db "$off" "$len"
	if integrity_ok rnd.db; then
		# not even SQLite can tell: ferry may use it, but not crash
		cases=$((cases + 1))
		run_ferry "$FERRY" -q --manifest rnd.db src dst-good
		if not_a_crash "$RC" && no_sanitizer_report "$LOG/err"; then
			ok "$len random bytes at $off (integrity_check: ok): no crash (exit $RC)"
		else
			fail "$len random bytes at $off (integrity_check: ok): no crash (exit $RC)"
			show "$LOG/err"
		fi
		continue
	fi
	refused "$len random bytes at $off (integrity_check: corrupt)" rnd.db 1
done

# an index that no longer matches its table: no query of a run meets
# it, only integrity_check does, which a run makes beside its scan
# (manifest/check.c): the first COMMIT must wait for it and be refused
damaged idx.db
sqlite3 idx.db "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = replace(sql, 'IN (4, 5)', 'IN (1, 4, 5)') WHERE name = 'files_removed';" ||
	die "cannot rewrite an index's definition"
rm -f idx.db-wal idx.db-shm
integrity_ok idx.db && die "the rewritten index passes integrity_check"
refused "an index out of step with its table" idx.db 1
run_ferry "$FERRY" -q --manifest idx.db src dst-good
check "index out of step: the message is integrity_check's" grep -q 'missing from index' "$LOG/err"

# a crashed run's -wal holding damage, in a manifest of an older schema
# (a migration is due, so the check runs at open, after configure): the
# refusal must not replay that -wal into the file when it closes
damaged walold.db
python3 - walold.db <<'PY' || die "cannot make a manifest with a crashed -wal"
import shutil, sqlite3, sys
p = sys.argv[1]
c = sqlite3.connect(p, isolation_level=None)
c.execute("PRAGMA wal_autocheckpoint = 0")
c.execute("PRAGMA writable_schema = ON")
c.execute("UPDATE sqlite_schema SET sql = replace(sql, 'IN (4, 5)', "
          "'IN (1, 4, 5)') WHERE name = 'files_removed'")
v = c.execute("PRAGMA user_version").fetchone()[0]
c.execute("PRAGMA user_version = %d" % (v - 1))
# the files as a crash leaves them: the changes in the -wal only
shutil.copy(p, p + ".crash")
shutil.copy(p + "-wal", p + ".crash-wal")
c.close()
PY
mv walold.db.crash walold.db && mv walold.db.crash-wal walold.db-wal && rm -f walold.db-shm
cp walold.db walold.db.orig
run_ferry "$FERRY" -q --manifest walold.db src dst-good
check "older schema, damage in a crashed -wal: exit 3 (got $RC)" test "$RC" = 3
check "older schema, damage in a crashed -wal: the file is byte-identical (the -wal not replayed into it)" \
	cmp -s walold.db walold.db.orig
rm -f walold.db walold.db.orig walold.db-wal walold.db-shm walold.db.lock

# a newer schema
damaged newer.db
sqlite3 newer.db 'PRAGMA user_version = 999;' || die "cannot set user_version"
rm -f newer.db-wal newer.db-shm
refused "schema version 999" newer.db
run_ferry "$FERRY" -q --manifest newer.db src dst-bad
check "schema version 999: the message says newer or version" grep -qiE 'newer|version' "$LOG/err"

# not SQLite, or not ours
printf 'this is a text file, not a manifest\n' >text.db
refused "a text file" text.db
head -c 65536 /dev/urandom >random.db
refused "64 KiB of random bytes" random.db
head -c 65536 /dev/zero >zeros.db
refused "64 KiB of zeros" zeros.db
{
	printf 'SQLite format 3\0'
	head -c 8192 /dev/urandom
} >magic.db
refused "the SQLite magic and garbage" magic.db
sqlite3 other.db 'CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ("mine");' ||
	die "cannot create other.db"
refused "an SQLite file of another program" other.db
mkdir dir.db
rm -rf dst-bad
run_ferry "$FERRY" -q --manifest dir.db src dst-bad
check "a directory as manifest: exit 3 (got $RC)" test "$RC" = 3
stderr_is_one_error
check "a directory as manifest: DST is not created" test ! -e dst-bad
cases=$((cases + 1))
gen_tree src2 --seed 2728 --files 20
expect_code 0 "$FERRY" -q --manifest pair.db src2 dst2
cp pair.db pair.db.orig
rm -rf dst-bad
one_refusal "the manifest of another SRC and DST" pair.db 0 "$FERRY" -q --manifest pair.db src dst-bad
check "another pair: DST is not created" test ! -e dst-bad
one_refusal "the manifest of another SRC and DST" pair.db 0 "$FERRY" -q --verify --manifest pair.db src dst-good
cases=$((cases + 1))

# a first run killed between SQLite's open of a new manifest and its first
# write leaves 0 bytes and no DST (or an empty one): nothing to keep, so
# the same command makes it anew and copies (it once stopped with "not an
# SQLite database", t55 under TSan); with a DST that holds files (the
# truncations above) it is refused
if "$FERRY" --version 2>/dev/null | grep -q '^test build:'; then
	rm -rf dst-cut cut.db*
	run env "$(crash_env)" FERRY_CRASH=manifest_created:1 "$FERRY" -q --manifest cut.db src dst-cut
	check "killed as the manifest was made: exit 86 (got $RC)" test "$RC" = 86
	check "killed as the manifest was made: it holds 0 bytes" test -f cut.db -a ! -s cut.db
	run_ferry "$FERRY" status --manifest cut.db src dst-cut
	check "status of the 0-byte manifest: exit 3 (got $RC)" test "$RC" = 3
	check "status of the 0-byte manifest: says it is empty" grep -q 'is empty (0 bytes)' "$LOG/err"
	check "status of the 0-byte manifest: still 0 bytes" test -f cut.db -a ! -s cut.db
	expect_code 0 "$FERRY" -q --manifest cut.db src dst-cut
	tree_equal src dst-cut
	expect_code 0 "$FERRY" -q --verify --manifest cut.db src dst-cut
	# the same into an empty DST the user made
	rm -rf cut.db* && mkdir dst-mine
	run env "$(crash_env)" FERRY_CRASH=manifest_created:1 "$FERRY" -q --manifest cut.db src dst-mine
	check "into an empty DST, killed as the manifest was made: exit 86 (got $RC)" test "$RC" = 86
	check "into an empty DST: the manifest holds 0 bytes" test -f cut.db -a ! -s cut.db
	expect_code 0 "$FERRY" -q --manifest cut.db src dst-mine
	tree_equal src dst-mine
	# the same 0 bytes beside a -wal with frames are not ferry's leftovers
	: >odd.db
	head -c 4096 /dev/urandom >odd.db-wal
	cp odd.db-wal odd.wal.orig
	rm -rf dst-bad
	run_ferry "$FERRY" -q --manifest odd.db src dst-bad
	check "0 bytes beside a -wal: exit 3 (got $RC)" test "$RC" = 3
	stderr_is_one_error
	check "0 bytes beside a -wal: the -wal is untouched" cmp -s odd.db-wal odd.wal.orig
	check "0 bytes beside a -wal: DST is not created" test ! -e dst-bad
	cases=$((cases + 2))
else
	say "SKIP the 0-byte manifest of a killed run: needs a build with -DFERRY_TESTING=ON (FERRY_CRASH)"
fi

# the default manifest
expect_code 0 "$FERRY" -q src dst
m=$(manifest_path src dst)
cp "$m" default.good
overwrite "$m" 100 12
cp "$m" "$m.orig"
run_ferry "$FERRY" -q src dst
check "damaged default manifest: exit 3 (got $RC)" test "$RC" = 3
stderr_is_one_error
check "damaged default manifest: byte-identical" cmp -s "$m" "$m.orig"
cases=$((cases + 1))
rm -f "$m.orig"
cp default.good "$m"
final_state src dst
say "hostile manifests: $cases cases"
finish
