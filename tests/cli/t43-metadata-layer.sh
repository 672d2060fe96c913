#!/bin/bash
# t43-metadata-layer: metadata is its own layer (as root: owners matter).
#
# Proves, each against an oracle that shares no code with ferry (stat,
# getfattr, cmp, rsync's itemized dry run, strace's count of bytes written):
#  - a chmod 600, a chown, a touch -m whose mtime is then restored, and a
#    setfattr of a 64 MiB file in SRC: the re-run writes no data (--json
#    bytes_copied 0, under 64 KiB written into DST's files: strace -y), DST keeps its
#    inode and its blocks, and DST's mode/owner/xattr is SRC's (stat,
#    getfattr). After a setfattr the re-run reads no data of the file
#    either (strace -y: bytes read from its descriptors), and a touch -r
#    content change of a file with xattrs is still copied;
#  - --atimes: a changed access time alone is applied in place (stat);
#  - the ctime rule: a content change behind a restored mtime (touch -r,
#    same size) is copied (cmp equal); with --trust-mtime it is not
#    (bytes_copied 0: as documented, rsync's way), --verify=source finds
#    it and the next run copies it;
#  - option reconciliation: after --no-perms --no-times --no-owner
#    --no-hard-links, a plain run makes DST right (rsync -aHn -i
#    --numeric-ids lists nothing, hard links share their DST inode), writes
#    no data (bytes_copied 0; the names of hard-linked files are re-made
#    as links: files_linked) and --verify passes.
. "$(dirname "$0")/lib.sh" || exit 1

[[ $(id -u) -eq 0 ]] || skip_all "needs root (owners are part of the metadata)"
need_cmd rsync

# run_json NAME ARGS...: ferry --json ARGS src dst, summary in $LOG/NAME.json
run_json() {
	local name=$1
	shift
	expect_code 0 "$FERRY" -q --json "$@" || return 1
	tail -n1 "$LOG/out" >"$LOG/$name.json"
}

# dst_written DST TRACE...: bytes the write-family calls of strace -ff -y
# logs put into files below DST (the manifest, and whatever a sanitizer's
# runtime writes, are elsewhere).
dst_written() {
	local dst=$1
	shift
	cat "$@" | grep -E '^(write|pwrite64|pwritev|writev|copy_file_range|sendfile)\(' |
		grep -F "<$dst/" |
		awk -F'= ' '{n = $NF + 0; if (n > 0) c += n} END {print c + 0}'
}

# in_place NAME WHAT ARGS...: a re-run (ferry ARGS src dst) after WHAT
# wrote no data and kept big's DST inode and blocks.
in_place() {
	local name=$1 what=$2
	shift 2
	local before after
	before=$(stat -c '%i %b' dst/big)
	if have_strace; then
		rm -f "$LOG/$name.trace".*
		expect_code 0 env "$(no_leak_check_env)" strace -ff -qq -y -s 0 \
			-o "$LOG/$name.trace" \
			-e trace=write,pwrite64,pwritev,writev,copy_file_range,sendfile \
			"$FERRY" -q --json "$@" src dst || return 1
		tail -n1 "$LOG/out" >"$LOG/$name.json"
		local w
		w=$(dst_written "$(realpath dst)" "$LOG/$name.trace".*)
		check "$what: no data written into DST (strace: $w bytes)" \
			test "$w" -lt 65536
	else
		say "strace missing: the written bytes are checked from --json only"
		run_json "$name" "$@" src dst || return 1
	fi
	expect_json "$LOG/$name.json" bytes_copied 0
	expect_json "$LOG/$name.json" files_copied 0
	after=$(stat -c '%i %b' dst/big)
	check "$what: DST keeps its inode and blocks ($before -> $after)" \
		test "$before" = "$after"
}

# src_read_bytes FILE TRACE...: bytes read from FILE's descriptors (strace
# -y names each fd's path; -ff keeps one thread per file, so no call is
# split into unfinished/resumed halves); an mmap of it counts as all of it.
src_read_bytes() {
	local f=$1
	shift
	awk -v f="<$f>" '
		index($0, f) == 0 { next }
		/^mmap\(/ { n += 1073741824; next }
		{ r = $NF + 0; if (r > 0) n += r }
		END { print n + 0 }' "$@"
}

# flip_first FILE: a new first byte, same size, mtime restored (touch -r)
flip_first() {
	touch -r "$1" "$LOG/ref"
	cp -- "$1" "$LOG/was"
	local b
	b=$(head -c1 -- "$1" | od -An -tu1 | tr -d ' ')
	printf "\\x$(printf %02x $(((b + 1) % 256)))" |
		dd of="$1" conv=notrunc status=none
	cmp -s "$1" "$LOG/was" && die "flip_first: $1 did not change"
	touch -r "$LOG/ref" "$1"
}

mkdir -p src/sub
head -c $((64 << 20)) /dev/urandom >src/big
printf 'small\n' >src/sub/small
head -c 100000 /dev/urandom >src/sub/mid
ln -s ../big src/sub/link
run_json first src dst || finish
expect_json "$LOG/first.json" bytes_copied $(((64 << 20) + 6 + 100000))

# ---- metadata alone, in place -------------------------------------------

chmod 600 src/big
in_place chmod "chmod 600"
check "chmod 600: DST's mode is 600 (stat: $(stat -c %a dst/big))" \
	test "$(stat -c %a dst/big)" = 600
expect_json "$LOG/chmod.json" meta_applied 1

chown 1234:5678 src/big
in_place chown "chown 1234:5678"
check "chown: DST's owner is 1234:5678 (stat: $(stat -c %u:%g dst/big))" \
	test "$(stat -c %u:%g dst/big)" = 1234:5678

touch -r src/big "$LOG/ref" && touch -m src/big && touch -r "$LOG/ref" src/big
in_place touch "touch -m, mtime restored (ctime alone: re-hashed, equal)"
check "touch: DST's mtime is SRC's" \
	test "$(stat -c %Y.%y dst/big)" = "$(stat -c %Y.%y src/big)"

if command -v setfattr >/dev/null && setfattr -n user.t43 -v yes src/big 2>/dev/null; then
	in_place setfattr "setfattr user.t43"
	check "setfattr: DST has user.t43=yes (getfattr)" \
		test "$(getfattr --only-values -n user.t43 dst/big 2>/dev/null)" = yes
	# a setfattr moves the ctime alone; the changed xattrs explain it, so
	# the re-run reads no data of SRC's big (strace, one file per thread)
	if have_strace; then
		setfattr -n user.t43 -v again src/big
		rm -f "$LOG"/xread.*
		expect_code 0 env "$(no_leak_check_env)" strace -ff -qq -y -s 0 -o "$LOG/xread" \
			-e trace=read,pread64,readv,preadv,preadv2,copy_file_range,sendfile,mmap \
			"$FERRY" -q --json src dst
		tail -n1 "$LOG/out" >"$LOG/xread.json"
		n=$(src_read_bytes "$(realpath src/big)" "$LOG"/xread.*)
		check "setfattr: the re-run read no data of SRC's big (strace: $n bytes)" \
			test "$n" -lt 65536
		expect_json "$LOG/xread.json" bytes_copied 0
		expect_json "$LOG/xread.json" meta_applied 1
		check "setfattr again: DST has user.t43=again (getfattr)" \
			test "$(getfattr --only-values -n user.t43 dst/big 2>/dev/null)" = again
	else
		say "strace missing: the reads of the setfattr re-run are not counted"
	fi
	# an xattr recorded and unchanged explains nothing: a content change
	# behind a restored mtime is still re-hashed and copied
	flip_first src/big
	run_json xflip src dst
	expect_json "$LOG/xflip.json" bytes_copied $((64 << 20))
	check "touch -r content change of a file with xattrs: copied (cmp)" \
		cmp -s src/big dst/big
	check "and DST keeps user.t43 (getfattr)" \
		test "$(getfattr --only-values -n user.t43 dst/big 2>/dev/null)" = again
else
	say "setfattr missing or SRC holds no user xattrs: that case not run"
fi

# --atimes: a changed access time alone is applied in place; a run with
# it again has nothing to do
run_json atimes1 --atimes src dst
touch -a -d @1000000000 src/sub/small
run_json atimes2 --atimes src dst
expect_json "$LOG/atimes2.json" meta_applied 1
check "--atimes: DST's atime is SRC's (stat: $(stat -c %X dst/sub/small))" \
	test "$(stat -c %X dst/sub/small)" = 1000000000
run_json atimes3 --atimes src dst
expect_json "$LOG/atimes3.json" meta_applied 0

# ---- the ctime rule -----------------------------------------------------


flip_first src/sub/mid
run_json ctime src dst
expect_json "$LOG/ctime.json" bytes_copied 100000
check "touch -r content change: copied (cmp)" cmp -s src/sub/mid dst/sub/mid

flip_first src/sub/mid
run_json trust --trust-mtime src dst
expect_json "$LOG/trust.json" bytes_copied 0
check "--trust-mtime: the content change behind the mtime is trusted away" \
	bash -c '! cmp -s src/sub/mid dst/sub/mid'
# what --trust-mtime trusted away, --verify=source finds; the next run
# copies it
expect_code 5 "$FERRY" -q --verify=source src dst
check "--verify=source finds the content --trust-mtime missed" \
	grep -q 'mismatch: sub/mid' "$LOG/out" "$LOG/err"
run_json fix src dst
expect_json "$LOG/fix.json" bytes_copied 100000
check "after --verify=source, the next run copies it (cmp)" \
	cmp -s src/sub/mid dst/sub/mid

# ---- option reconciliation ----------------------------------------------

mkdir -p src2/a src2/b
for i in 1 2 3 4 5; do
	head -c $((i * 3000)) /dev/urandom >"src2/a/f$i"
	ln "src2/a/f$i" "src2/b/f$i"
done
chmod 640 src2/a/f1 && chmod 600 src2/a/f2 && chown 4321:8765 src2/a/f3
touch -d @1500000000 src2/a/f4
ln -s f1 src2/a/s
chown -h 4321:8765 src2/a/s
touch -h -d @1400000000 src2/a/s
touch -d @1300000000 src2/a src2/b
expect_code 0 "$FERRY" -q --no-perms --no-times --no-owner --no-hard-links src2 dst2
rsync -aHn -i --numeric-ids src2/ dst2/ >"$LOG/rsync.before"
check "the reduced run left DST wrong (rsync lists $(wc -l <"$LOG/rsync.before") entries)" \
	test -s "$LOG/rsync.before"
expect_code 0 "$FERRY" -q --json src2 dst2
tail -n1 "$LOG/out" >"$LOG/recon.json"
rsync -aHn -i --numeric-ids src2/ dst2/ >"$LOG/rsync.after"
if [[ ! -s $LOG/rsync.after ]]; then
	ok "a plain run made DST right (rsync -aHn -i --numeric-ids: nothing)"
else
	fail "a plain run made DST right (rsync -aHn -i --numeric-ids lists:)"
	show "$LOG/rsync.after"
fi
expect_json "$LOG/recon.json" bytes_copied 0
expect_json "$LOG/recon.json" files_copied 0
expect_json "$LOG/recon.json" files_linked 5
for i in 1 2 3 4 5; do
	[[ $(stat -c %i "dst2/a/f$i") == $(stat -c %i "dst2/b/f$i") ]] || {
		fail "a/f$i and b/f$i share their DST inode"
		continue
	}
done
ok "the hard-linked names are links in DST (stat)"
check "--verify passes" "$FERRY" -q --verify src2 dst2
run_json recon2 src2 dst2
expect_json "$LOG/recon2.json" meta_applied 0
expect_json "$LOG/recon2.json" files_linked 0

finish
