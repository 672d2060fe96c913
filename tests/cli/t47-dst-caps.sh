#!/bin/bash
# t47-dst-caps: metadata failures are kept apart from data failures (issue
# 10, item 3). DST holds owners (a local file system, as root), but its
# chown of some files fails (fault injection, FERRY_FAULT=chown):
#  - every file's data arrives (diff -r), no file counts failed, and the
#    exit code is 26 (FERRY_EMETA), not 23;
#  - stderr names the first few of the cause ("ferry: metadata: 'F': set
#    owner: Operation not permitted") and says the rest as one count;
#  - `ferry status` shows "metadata not applied: N" and lists them by
#    cause apart from failures, and its JSON has meta_failed and
#    metadata_failures with the cause;
#  - the next run applies the metadata (owners equal, by stat and by
#    rsync -aHAXn -i --numeric-ids: nothing itemized) and exits 0; with the
#    metadata layer (--trust-mtime is its option) it copies no data;
#  - a shortfall and a file's data failure in one run: 23 comes first,
#    status counts each apart, the next run makes up both;
#  - a directory's chmod and chown refused (the directory is there): a
#    shortfall too (26, named, listed by status, not a failed directory),
#    and the next run applies it (find -printf, rsync) and exits 0.
# Needs root (files of another owner) and a test build (FERRY_FAULT).
. "$(dirname "$0")/lib.sh" || exit 1
[[ $(id -u) == 0 ]] || skip_all "needs root (makes files of another owner)"
"$FERRY" --version | grep -q '^test build:' ||
	skip_all "needs a build with -DFERRY_TESTING=ON (FERRY_FAULT)"
need_cmd rsync python3

mkdir -p src/sub
for i in $(seq 13); do printf 'file %d\n' "$i" >"src/sub/f$i"; done
printf 'top\n' >src/top
chown -R 4321:4321 src/sub src/top
FERRY_FAULT_LOG=$T/fault.log
export FERRY_FAULT_LOG

# owners DIR: "uid:gid path" of every file under DIR, sorted
owners() { (cd "$1" && find . -type f -printf '%U:%G %p\n' | sort); }

# run 1: the chown of each of the 14 files fails (the first 14 calls: the
# directories' come at the end of the run, not faulted here; run 5 is theirs)
: >"$FERRY_FAULT_LOG"
faults=$(for i in $(seq 14); do printf 'chown:%d:1,' "$i"; done)
run env FERRY_FAULT="${faults%,}" "$FERRY" -j 2 src dst
check "run 1: data arrived, owners not: exit 26 (got $RC)" test "$RC" = 26
show "$LOG/err" 12
check "run 1: every file's data arrived (diff -r)" diff -r src dst
check "run 1: the 14 faults fired" test "$(wc -l <"$FERRY_FAULT_LOG")" = 14
check "run 1: no file counted failed" \
	grep -q ' 14 files copied .* 0 failed' "$LOG/err"
n=$(grep -c "^ferry: metadata: '[a-z/0-9]*': set owner: Operation not permitted$" "$LOG/err")
check "run 1: stderr names the first 5 of the cause (got $n)" test "$n" = 5
check "run 1: ... and says the other 9 as a count" \
	grep -q "^ferry: warning: metadata not applied to 9 more entries (set owner: Operation not permitted)" "$LOG/err"
check "run 1: the summary counts 14 shortfalls" \
	grep -q '^ferry: metadata not applied: 14 ' "$LOG/err"
check "run 1: no 'failed:' line" eval '! grep -q "^ferry: failed:" "$LOG/err"'

run "$FERRY" status src dst
check "status: exit 0 (got $RC)" test "$RC" = 0
check "status: metadata not applied: 14" grep -qx 'metadata not applied: 14' "$LOG/out"
check "status: failed: 0 files" grep -qx 'failed: 0 files' "$LOG/out"
check "status: grouped by cause" \
	grep -qx '14 × operation not permitted setting an owner in DST' "$LOG/out"
n=$(grep -c "^metadata: '[a-z/0-9]*': set owner: Operation not permitted$" "$LOG/out")
check "status: names 5 with the reason (got $n)" test "$n" = 5
check "status: ... and says how many more" \
	grep -q '^\.\.\. and 9 more of this cause' "$LOG/out"
run "$FERRY" status --failures src dst
n=$(grep -c "^metadata: '[a-z/0-9]*': set owner: Operation not permitted$" "$LOG/out")
check "status --failures: names all 14 (got $n)" test "$n" = 14
"$FERRY" status --json src dst >"$LOG/json" 2>&1
check "status --json: meta_failed, metadata_failures and their cause" \
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["meta_failed"] == 14, d["meta_failed"]
assert d["failures"] == [] and d["causes"] == [], d["causes"]
m = d["metadata_failures"]
assert len(m) == 14 and all(x["step"] == "chown" and x["errno"] == 1 for x in m), m[:2]
assert d["metadata_causes"] == [{"cause": "operation not permitted setting an owner in DST",
    "key": "dst:chown:1", "side": "DST", "step": "chown", "errno": 1, "count": 14}], d["metadata_causes"]
' "$LOG/json"

# run 2: DST takes the owners now
run "$FERRY" --json src dst
check "run 2: exit 0 (got $RC)" test "$RC" = 0
check "run 2: the owners are SRC's (stat)" cmp -s <(owners src) <(owners dst)
rsync -aHAXn -i --numeric-ids src/ dst/ >"$LOG/rsync" 2>&1
check "run 2: rsync -aHAXn -i itemizes nothing" eval '[[ ! -s $LOG/rsync ]]'
show "$LOG/rsync"
check "run 2: status counts no shortfall" \
	test "$("$FERRY" status src dst | sed -n 's/^metadata not applied: //p')" = 0
if "$FERRY" --help | grep -q -- --trust-mtime; then
	check "run 2: metadata alone, no data copied" \
		grep -q '"bytes_copied": 0,' "$LOG/out"
else
	say "run 2: no metadata layer in this build (--trust-mtime): the files are copied again"
fi

# run 3: a data failure (a read of SRC refused) and a shortfall: 23 comes
# first
rm -rf dst
: >"$FERRY_FAULT_LOG"
run env FERRY_FAULT=read:1:13,chown:3:1 "$FERRY" -j 1 src dst
check "run 3: the faults fired" test "$(wc -l <"$FERRY_FAULT_LOG")" = 2
check "run 3: a failed file and a shortfall: exit 23 (got $RC)" test "$RC" = 23
check "run 3: the list of failures at the end holds the failed file alone" \
	test "$(grep -c '^ferry: failed:' "$LOG/err")" = 1
check "run 3: the shortfall is named as metadata" \
	test "$(grep -c '^ferry: metadata:' "$LOG/err")" = 1
check "run 3: status counts both, apart" eval '
	"$FERRY" status src dst | grep -qx "failed: 1 files" &&
	"$FERRY" status src dst | grep -qx "metadata not applied: 1"'
run "$FERRY" src dst
check "run 4: both made up: exit 0 (got $RC)" test "$RC" = 0
check "run 4: DST equals SRC (diff -r, owners)" eval 'diff -r src dst && cmp -s <(owners src) <(owners dst)'

# run 5: a directory that is there in DST but whose chmod and chown DST
# refuses is a metadata shortfall too (26, listed, applied by the next
# run), not a failed directory. No files: the only chmod and chown calls
# are the directories' (a, b and the root, at the end of the run).
mkdir -p srcd/a srcd/b
chmod 750 srcd/a
chmod 705 srcd/b
chown 4321:4321 srcd/a srcd/b
: >"$FERRY_FAULT_LOG"
run env FERRY_FAULT=chmod:1:1,chown:2:1 "$FERRY" -j 1 srcd dstd
check "run 5: both faults fired" test "$(wc -l <"$FERRY_FAULT_LOG")" = 2
check "run 5: a directory's refused chmod/chown: exit 26 (got $RC)" test "$RC" = 26
show "$LOG/err" 8
check "run 5: no directory counted failed (no 'failed:' line)" \
	eval '! grep -q "^ferry: failed:" "$LOG/err"'
n=$(grep -c "^ferry: metadata: '[ab]': set directory \(mode\|owner\): Operation not permitted$" "$LOG/err")
check "run 5: stderr names both directories' shortfalls (got $n)" test "$n" = 2
check "run 5: the summary counts 2 shortfalls" \
	grep -q '^ferry: metadata not applied: 2 ' "$LOG/err"
check "run 5: both directories are there in DST" test -d dstd/a -a -d dstd/b
run "$FERRY" status srcd dstd
check "run 5: status: metadata not applied: 2" grep -qx 'metadata not applied: 2' "$LOG/out"
check "run 5: status: failed: 0 files" grep -qx 'failed: 0 files' "$LOG/out"
n=$(grep -c "^metadata: '[ab]': set directory \(mode\|owner\): Operation not permitted$" "$LOG/out")
check "run 5: status lists both directories (got $n)" test "$n" = 2
run "$FERRY" srcd dstd
check "run 6: the directories' metadata applied: exit 0 (got $RC)" test "$RC" = 0
modes() { (cd "$1" && find . -printf '%m %U:%G %p\n' | sort); }
check "run 6: DST's modes and owners are SRC's (find -printf)" \
	cmp -s <(modes srcd) <(modes dstd)
rsync -aHAXn -i --numeric-ids srcd/ dstd/ >"$LOG/rsync" 2>&1
check "run 6: rsync -aHAXn -i itemizes nothing" eval '[[ ! -s $LOG/rsync ]]'
show "$LOG/rsync"
check "run 6: status counts no shortfall" \
	test "$("$FERRY" status srcd dstd | sed -n 's/^metadata not applied: //p')" = 0
finish
