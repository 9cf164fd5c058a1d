#!/bin/sh
# Scenario: the host test binary, run again on a stock Debian cloud kernel (6.1, or another with
# run.sh --suite): the datapath tests on its verifier and helpers, the qdisc tests with a real
# sch_fq, the CLI in police mode.
# Run from the host: vm/run.sh --bin build/tests/shaperctl_tests --bin build/cli/shaperctl tests/gtest-in-vm.sh
#   [--shard I/N] [GTEST_ARGS...]   --shard: only the I-th of N parts of the tests (0-based;
#                                   gtest's own sharding), for N guests booted side by side
export SHAPERCTL_BIN=/usr/local/bin/shaperctl
case "$1" in
  --shard)
    GTEST_SHARD_INDEX=${2%/*} GTEST_TOTAL_SHARDS=${2#*/}
    export GTEST_SHARD_INDEX GTEST_TOTAL_SHARDS
    shift 2 ;;
esac
/usr/local/bin/shaperctl_tests "$@"
status=$?
left=$("$IP" netns list | wc -l)
echo "network namespaces left: $left"
[ "$left" -eq 0 ] || status=1
exit $status
