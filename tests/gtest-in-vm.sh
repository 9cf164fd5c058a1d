#!/bin/sh
# Scenario: the host test binary, run again on a stock Debian cloud kernel (6.1, or another with
# run.sh --suite): the datapath tests on its verifier and helpers, the qdisc tests with a real
# sch_fq, the CLI in police mode.
# Run from the host: vm/run.sh --bin build/tests/shaperctl_tests --bin build/cli/shaperctl tests/gtest-in-vm.sh
export SHAPERCTL_BIN=/usr/local/bin/shaperctl
/usr/local/bin/shaperctl_tests "$@"
status=$?
left=$("$IP" netns list | wc -l)
echo "network namespaces left: $left"
[ "$left" -eq 0 ] || status=1
exit $status
