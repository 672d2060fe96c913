#!/bin/bash
# t50-export: `ferry export` gives out what the manifest records, in forms
# that tools sharing no code with ferry read back.
#
# Proves, over the hostile tree (spaces, a newline, backslashes, CR, a
# comma and quotes, invalid UTF-8, a file named stdin, hard links,
# symlinks, an empty file, a path deeper than PATH_MAX):
#  - the default format is accepted by `cd DST && xxh128sum -c` (the
#    Debian xxhash package), which reads every line OK; it lists every
#    name of every regular file in DST that xxh128sum can open and read
#    back, and nothing else; each file it cannot list (newline, PATH_MAX)
#    is named on stderr and the exit code is 23; symlinks are counted on
#    stderr and not listed;
#  - after a DST file is altered, xxh128sum -c fails, naming that file;
#  - --format=csv, parsed by python3's csv module, and --format=jsonl,
#    parsed by its json module, list every non-directory entry of SRC once
#    with the type, size, mtime, mode, uid and gid os.lstat gives and the
#    hash xxh128sum computes (of the target for a symlink), state done;
#  - a job of more than one read chunk (3000 files) is exported whole,
#    also while a run holds the job, frozen with SIGSTOP mid-copy: export
#    exits 0 and lists no more done files than exist in DST;
#  - a user without write access to the manifest and its directory gets
#    the same csv (an immutable read), and leaves no -wal or -shm;
#  - bad input: an unknown format or --format without export exits 1, a
#    job without a manifest exits 3, each with one error line; a stdout
#    that cannot be written exits 7.
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd xxh128sum python3

build_source() {
	make_hostile_tree src
	(
		cd src || exit 1
		printf 'named stdin\n' >stdin
		printf 'cr\n' >$'carriage\rreturn'
		printf 'csv\n' >'comma, "quoted"'
		printf 'trailing backslash\n' >'back\slash\'
		mkdir sub && printf 'not top\n' >sub/stdin
	) || die "cannot add the export names"
}

# unlistable_count DIR: regular files below DIR whose path xxh128sum -c
# cannot read back (a newline) or open (PATH_MAX, 4096 bytes, or more).
unlistable_count() {
	local p n=0
	while IFS= read -r -d '' p; do
		[[ $p == *$'\n'* ]] || ((${#p} >= 4096)) && n=$((n + 1))
	done < <(cd "$1" && find . -type f -printf '%P\0')
	echo "$n"
}

# listable DIR: the paths of those it can, one a line.
listable() {
	local p
	while IFS= read -r -d '' p; do
		[[ $p == *$'\n'* ]] || ((${#p} >= 4096)) || printf '%s\n' "$p"
	done < <(cd "$1" && find . -type f -printf '%P\0')
}

check_xxh128sum() {
	expect_code 23 "$FERRY" export src dst
	cp "$LOG/out" "$T/list"
	cp "$LOG/err" "$LOG/export.err"
	local want got
	want=$(unlistable_count dst)
	got=$(grep -c "^ferry: export: not listed: '" "$LOG/export.err")
	check "every file xxh128sum cannot read back is named on stderr ($want)" \
		test "$want" -gt 0 -a "$got" = "$want"
	check "stderr counts the symlinks left out" \
		grep -q '^ferry: export: [1-9][0-9]* symlinks not listed' "$LOG/export.err"
	check "stdin is written as ./stdin" grep -qx '[0-9a-f]\{32\}  \./stdin' "$T/list"
	check "sub/stdin is written as is" grep -qx '[0-9a-f]\{32\}  sub/stdin' "$T/list"
	(cd dst && xxh128sum -c "$T/list") >"$LOG/check.out" 2>"$LOG/check.err"
	check "cd DST && xxh128sum -c passes" test $? = 0
	show "$LOG/check.err"
	check "xxh128sum -c says nothing on stderr" test ! -s "$LOG/check.err"
	check "xxh128sum -c reads every line OK ($(wc -l <"$T/list"))" \
		test "$(grep -c ': OK$' "$LOG/check.out")" = "$(wc -l <"$T/list")"
	cut -c35- "$T/list" | sed 's|^\./stdin$|stdin|' >"$LOG/listed"
	listable dst >"$LOG/listable"
	same_set "the list has every name of every regular file it can hold" \
		"$LOG/listable" "$LOG/listed"
	check "no line names the same file twice" \
		test "$(sort "$LOG/listed" | uniq -d | wc -l)" = 0
}

check_altered() {
	printf 'x' >>dst/a/random.bin
	(cd dst && xxh128sum -c "$T/list") >"$LOG/check.out" 2>&1
	check "after a DST file is altered, xxh128sum -c fails" test $? != 0
	check "... naming that file" grep -q '^a/random.bin: FAILED' "$LOG/check.out"
	check "... and only it" test "$(grep -c ': FAILED$' "$LOG/check.out")" = 1
	truncate -s -1 dst/a/random.bin
}

# The oracle: python3 parses the export and compares each row with
# os.lstat of the SRC entry and with xxh128sum of its content (or of a
# symlink's target), opening any depth through directory descriptors.
cat >"$T/oracle.py" <<'EOF'
import csv, json, os, stat, subprocess, sys
fmt, export, root = sys.argv[1], sys.argv[2], os.fsencode(sys.argv[3])
bad = []

def rows():
    if fmt == 'csv':
        with open(export, newline='', encoding='utf-8',
                  errors='surrogateescape') as f:
            r = csv.reader(f, strict=True)
            head = next(r)
            assert head == ['path', 'type', 'size', 'mtime', 'mode', 'uid',
                            'gid', 'hash', 'state'], head
            for rec in r:
                d = dict(zip(head, rec))
                d['path'] = d['path'].encode('utf-8', 'surrogateescape')
                d['hash'] = d['hash'] or None
                yield d
    else:
        with open(export, 'rb') as f:
            for line in f:
                d = json.loads(line)
                if 'path_hex' in d:
                    d['path'] = bytes.fromhex(d['path_hex'])
                else:
                    d['path'] = d['path'].encode('utf-8')
                yield d

def at(path):  # (dir fd, last name): opens any depth
    parts = path.split(b'/')
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for p in parts[:-1]:
        nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd, parts[-1]

def xxh(data):
    out = subprocess.run(['xxh128sum'], input=data, capture_output=True,
                         check=True).stdout
    return out.split()[0].decode()

want = set()  # every entry but directories, at any depth (fwalk: fds)
for dirpath, dirs, files, dfd in os.fwalk(root):
    rel = os.path.relpath(dirpath, root)
    for n in files + dirs:
        if not stat.S_ISDIR(os.lstat(n, dir_fd=dfd).st_mode):
            want.add(n if rel == b'.' else rel + b'/' + n)
seen = set()
for d in rows():
    p = d['path']
    if p in seen:
        bad.append((p, 'listed twice'))
    seen.add(p)
    fd, name = at(p)
    st = os.lstat(name, dir_fd=fd)
    kind = ('symlink' if stat.S_ISLNK(st.st_mode) else
            'file' if stat.S_ISREG(st.st_mode) else 'special')
    if stat.S_ISLNK(st.st_mode):
        h = xxh(os.readlink(name, dir_fd=fd))
    elif stat.S_ISREG(st.st_mode):
        g = os.open(name, os.O_RDONLY, dir_fd=fd)
        with os.fdopen(g, 'rb') as f:
            h = xxh(f.read())
    else:
        h = None
    os.close(fd)
    ns = st.st_mtime_ns
    expect = {'type': kind, 'size': str(st.st_size),
              'mtime': '%d.%09d' % divmod(ns, 10**9),
              'mode': '%04o' % stat.S_IMODE(st.st_mode),
              'uid': str(st.st_uid), 'gid': str(st.st_gid), 'hash': h,
              'state': 'done'}
    for k, v in expect.items():
        got = d[k] if d[k] is None else str(d[k])
        if got != v:
            bad.append((p, '%s: export %r, oracle %r' % (k, got, v)))
missing = want - seen
extra = seen - want
for p in sorted(missing)[:5]:
    bad.append((p, 'not exported'))
for p in sorted(extra)[:5]:
    bad.append((p, 'exported, not in SRC'))
for p, why in bad[:10]:
    print(repr(p), why)
print('%d rows, %d entries in SRC' % (len(seen), len(want)))
sys.exit(1 if bad or not seen else 0)
EOF

check_table() {
	local fmt=$1
	expect_code 0 "$FERRY" export --format="$fmt" src dst
	check "--format=$fmt says nothing on stderr" test ! -s "$LOG/err"
	cp "$LOG/out" "$T/export.$fmt"
	python3 "$T/oracle.py" "$fmt" "$T/export.$fmt" src >"$LOG/oracle.out" 2>&1
	check "--format=$fmt: python3 reads it, and every row agrees with lstat and xxh128sum" test $? = 0
	show "$LOG/oracle.out"
}

check_csv_quoting() {
	check "csv: a field with a comma and quotes is quoted, quotes doubled" \
		grep -q '^"comma, ""quoted""",file,' "$T/export.csv"
	check "csv: a name with a newline is quoted" grep -q '^"new$' "$T/export.csv"
	check "csv: lines end in CRLF" \
		test "$(head -n1 "$T/export.csv" | od -An -c | tr -d ' \n')" = 'path,type,size,mtime,mode,uid,gid,hash,state\r\n'
	check "jsonl: an invalid UTF-8 name has path_hex" \
		grep -q '"path_hex": "fffe20696e76616c6964207574662d38"' "$T/export.jsonl"
}

# A job of more rows than one read chunk, exported while a run holds it.
check_while_running() {
	gen_tree big --seed 5050 --files 3000 --no-links
	local n
	n=$(find big -type f | wc -l)
	bg "$FERRY" -q -j 2 --durability=file big bigdst
	wait_until 60 started_copying bigdst || die "the copy did not start"
	sleep 0.3
	kill -STOP "$BG_PID" || say "the run ended before it could be frozen"
	expect_code 0 "$FERRY" export --format=jsonl big bigdst
	local done_now in_dst
	done_now=$(grep -c '"state": "done"' "$LOG/out")
	in_dst=$(find bigdst -type f ! -name '*.ferry-part' | wc -l)
	say "while frozen: $done_now done of $(wc -l <"$LOG/out") rows, $in_dst files in DST"
	check "during a run, export lists no more done files than DST holds" \
		test "$done_now" -le "$in_dst"
	expect_code 0 "$FERRY" export big bigdst
	kill -CONT "$BG_PID"
	bg_wait
	check "the run went on and ended (exit 0)" test "$BG_RC" = 0
	expect_code 0 "$FERRY" export --format=csv big bigdst
	check "after it, csv has all $n files (more than one read chunk)" \
		test "$(($(wc -l <"$LOG/out") - 1))" = "$n"
	expect_code 0 "$FERRY" export big bigdst
	(cd bigdst && xxh128sum -c --quiet) <"$LOG/out" >"$LOG/check.out" 2>&1
	check "xxh128sum -c passes over the 3000 files" test $? = 0
	check "... and the list has all $n" test "$(wc -l <"$LOG/out")" = "$n"
}

# Without write access to the manifest or its directory (a monitoring
# user): export reads the file as immutable, and gives the same rows.
check_read_only() {
	if ! can_run_unprivileged; then
		say "SKIP export without write access: $WHY_NOT"
		return
	fi
	mkdir "$T/mf"
	cp "$(manifest_path big bigdst)" "$T/mf/job.db"
	chmod 0644 "$T/mf/job.db"
	expect_code 0 "$FERRY" export --format=csv --manifest "$T/mf/job.db"
	cp "$LOG/out" "$T/root.csv"
	expect_code 0 as_nobody "$FERRY" export --format=csv --manifest "$T/mf/job.db"
	check "without write access, export gives the same csv" cmp -s "$LOG/out" "$T/root.csv"
	check "... and leaves no -wal or -shm behind" \
		test ! -e "$T/mf/job.db-wal" -a ! -e "$T/mf/job.db-shm"
}

check_bad_input() {
	expect_code 1 "$FERRY" export --format=md5 src dst && stderr_is_one_error
	expect_code 1 "$FERRY" --format=csv src dst && stderr_is_one_error
	expect_code 1 "$FERRY" export src && stderr_is_one_error
	expect_code 1 "$FERRY" export --json src dst && stderr_is_one_error
	expect_code 3 "$FERRY" export --manifest "$T/none.db" && stderr_is_one_error
	mkdir -p never
	expect_code 3 "$FERRY" export src never && stderr_is_one_error
	if [[ -w /dev/full ]]; then
		run "$FERRY" export --format=csv src dst
		"$FERRY" export --format=csv src dst >/dev/full 2>"$LOG/err"
		check "a stdout that cannot be written exits 7" test $? = 7
	fi
}

build_source
expect_code 0 "$FERRY" -q src dst
check_xxh128sum
check_altered
check_table csv
check_table jsonl
check_csv_quoting
check_bad_input
check_while_running
check_read_only
finish
