#!/bin/bash
# t89-big-uncache: a file copied in chunks leaves its SRC out of the page
# cache once read, and its DST once durable (posix_fadvise DONTNEED), as
# `dd iflag=nocache oflag=nocache` or robocopy /J would: a copy of big
# files from a data mover does not push every other file's cached pages
# out, and on a virtual machine whose freed memory returns to its host,
# each run does not fault in a fresh page for every byte it moves.
#
# SRC holds an 80 MiB file (5 chunks of 16 MiB) and a small one, on the
# test directory's file system. Each file is read once by cat, so that
# fincore (util-linux, an oracle outside ferry) finds it cached, then:
#  - a plain run (the owner stream alone: a local SRC is not latency-bound)
#    leaves at most 4 MiB of the big file cached, of SRC's and of DST's
#    (durable by then), and DST equal (cmp);
#  - a run with FERRY_CHUNK_STREAMS=4 (a test build's knob: 4 streams,
#    block by block as from a share) the same;
#  - the small file (below the chunk size) is copied as before: still
#    fully cached (ferry does not spend a call per small file on this);
#  - --verify (DST's big file read chunk by chunk) and --verify=both (SRC's
#    too), each after cat cached both again, leave them out of the cache.
# Skips, saying why, without fincore, or on a file system that keeps
# every page in memory (tmpfs: its pages are the file).
. "$(dirname "$0")/lib.sh" || exit 1
need_cmd fincore cmp
need_test_hooks

case $(stat -f -c %T "$T") in
tmpfs | ramfs) skip_all "the test directory is on $(stat -f -c %T "$T"): its pages cannot leave the cache" ;;
esac

MIB=$((1 << 20))
mkdir src
head -c $((80 * MIB)) /dev/urandom >src/big || die "cannot write the source"
head -c $((1 * MIB)) /dev/urandom >src/small || die "cannot write the source"

# cached FILE: the bytes of FILE in the page cache, by fincore
cached() { fincore --bytes --noheadings -o RES "$1" | tr -d ' '; }
# warm: every byte of SRC read once, and cached (else the test could not fail)
warm() {
	sync
	cat src/big src/small >/dev/null
	local b s
	b=$(cached src/big) s=$(cached src/small)
	((b >= 76 * MIB && s == MIB)) ||
		skip_all "this file system does not keep what was read cached (fincore: big $b, small $s bytes)"
}

warm
expect_code 0 "$FERRY" src dst
# fincore first: cmp reads SRC again
b=$(cached src/big) s=$(cached src/small) d=$(cached dst/big)
check "plain run: SRC's big file left the cache ($b bytes cached, at most 4 MiB)" \
	test "$b" -le $((4 * MIB))
check "plain run: DST's big file left the cache ($d bytes cached, at most 4 MiB)" \
	test "$d" -le $((4 * MIB))
check "plain run: the small file is still cached ($s bytes)" test "$s" -eq "$MIB"
check "plain run: DST's big file is SRC's" cmp src/big dst/big
check "plain run: DST's small file is SRC's" cmp src/small dst/small

# --verify reads DST's big file (chunk by chunk), --verify=both SRC's too
cat dst/big src/big >/dev/null
expect_code 0 "$FERRY" --verify src dst
d=$(cached dst/big)
check "--verify: DST's big file left the cache ($d bytes cached, at most 4 MiB)" \
	test "$d" -le $((4 * MIB))
cat dst/big src/big >/dev/null
expect_code 0 "$FERRY" --verify=both src dst
b=$(cached src/big) d=$(cached dst/big)
check "--verify=both: SRC's and DST's big files left the cache ($b and $d bytes cached, at most 4 MiB each)" \
	test "$b" -le $((4 * MIB)) -a "$d" -le $((4 * MIB))

warm
rm -rf dst
export FERRY_CHUNK_STREAMS=4
expect_code 0 "$FERRY" --manifest "$T/m2.db" src dst
unset FERRY_CHUNK_STREAMS
b=$(cached src/big) d=$(cached dst/big)
check "4 streams: SRC's big file left the cache ($b bytes cached, at most 4 MiB)" \
	test "$b" -le $((4 * MIB))
check "4 streams: DST's big file left the cache ($d bytes cached, at most 4 MiB)" \
	test "$d" -le $((4 * MIB))
check "4 streams, block by block: DST's big file is SRC's" cmp src/big dst/big

finish
