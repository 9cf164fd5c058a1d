#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang, ASan + UBSan) into build-fuzz/ and fuzzes each
# for SECONDS (default 600), $FUZZ_JOBS at a time (default: one per core), then prints one
# summary line per target: executions, coverage, corpus, crashes. Exits 1 if any crashed.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: parse_rate parse_size parse_time parse_int
#                                                      parse_config parse_netconf
#   scripts/fuzz.sh --build-only               install clang's runtime if missing, build only
#                                              (CI, then: ctest --test-dir build-fuzz -j2)
#   FUZZ_MERGE=1 scripts/fuzz.sh ...           afterwards, minimize the inputs that added
#                                              coverage into fuzz/corpus/<target>/ (to commit)
#
# Seeds: fuzz/corpus/<target>/ and fuzz/regressions/<target>/ (read only). New inputs go to
# build-fuzz/fuzz-corpus/<target>/ (kept between runs, shared with the CTest fuzz tests);
# logs and crash artifacts to build-fuzz/fuzz-run/<target>/. A crash becomes a regression:
# copy its artifact to fuzz/regressions/<target>/<what-broke> (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/fuzz.sh [SECONDS] [TARGET...] | scripts/fuzz.sh --build-only"
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
seconds=${1:-600}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "$usage" >&2; exit 2; }  # 0 would mean forever
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse_rate parse_size parse_time parse_int parse_config parse_netconf)
jobs=${FUZZ_JOBS:-$(nproc)}

# clang's libFuzzer and sanitizer runtimes are in libclang-rt-14-dev, which clang only
# recommends (install-deps.sh installs without recommends).
need=()
for p in clang cmake make libclang-rt-14-dev nlohmann-json3-dev linux-libc-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "fuzz: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

start=$SECONDS
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DSHAPERCTL_FUZZ=ON >/dev/null
# A failed make fails the script (pipefail); only grep's finding nothing to show is ignored.
make -C build-fuzz -j"$(nproc)" --no-print-directory fuzzers 2>&1 \
  | { grep -Ev '^\[|^make|Built target|Consolidate compiler' || true; }
if [ $build_only = 1 ]; then
  echo "fuzz: built build-fuzz/ in $((SECONDS - start)) s (ctest --test-dir build-fuzz runs the fuzz tests)"
  exit 0
fi
echo "fuzz: built in $((SECONDS - start)) s; fuzzing ${targets[*]} for ${seconds} s each, ${jobs} at a time"

# libFuzzer options per target, as fuzz/CMakeLists.txt (fuzz_options) gives the CTest fuzz tests:
# fuzz/<target>.dict where there is one, else units.dict; 4 KiB inputs for a config file.
options() {
  local dict=fuzz/$1.dict max_len=1024
  [ -f "$dict" ] || dict=fuzz/units.dict
  case $1 in parse_config|parse_netconf) max_len=4096 ;; esac
  echo "-dict=$dict -max_len=$max_len"
}

run_one() {
  local t=$1 run=build-fuzz/fuzz-run/$1
  rm -rf "$run" && mkdir -p "$run/artifacts" "build-fuzz/fuzz-corpus/$t"
  local rc=0
  # shellcheck disable=SC2046
  build-fuzz/fuzz/fuzz_"$t" -max_total_time="$seconds" $(options "$t") -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$run/artifacts/" \
    "build-fuzz/fuzz-corpus/$t" "fuzz/corpus/$t" "fuzz/regressions/$t" >"$run/log" 2>&1 || rc=$?
  echo "$rc" >"$run/rc"
}

pids=()
for t in "${targets[@]}"; do
  [ -x "build-fuzz/fuzz/fuzz_$t" ] || { echo "fuzz: no target $t" >&2; exit 2; }
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$t" &
  pids+=($!)
done
wait "${pids[@]}" || true

failed=0
for t in "${targets[@]}"; do
  run=build-fuzz/fuzz-run/$t
  log=$run/log
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1 || true)
  execs=$(stat number_of_executed_units); execs=${execs:-$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")}
  cov=$(sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/cov \1, ft \2, corpus \3/p' <<<"$last")
  artifacts=$(find "$run/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  crashes=$(grep -c . <<<"$artifacts" || true)
  printf 'fuzz %-12s %5s s  execs %s (%s/s)  %s  new %s  crashes %s\n' "$t" "$seconds" \
    "${execs:-?}" "$(stat average_exec_per_sec)" "${cov:-cov ?}" "$(stat new_units_added)" "$crashes"
  if [ "$crashes" -gt 0 ] || [ "$(cat "$run/rc")" != 0 ]; then
    failed=1
    grep -E '^\*\*\* |^SUMMARY|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$log" | head -6 | sed 's/^/    /'
    for a in $artifacts; do echo "    reproduce: build-fuzz/fuzz/fuzz_$t $a"; done
    [ -n "$artifacts" ] || echo "    exit status $(cat "$run/rc"), log: $log"
  fi
done

if [ "${FUZZ_MERGE:-0}" = 1 ]; then
  for t in "${targets[@]}"; do
    before=$(ls "fuzz/corpus/$t" | wc -l)
    # shellcheck disable=SC2046
    build-fuzz/fuzz/fuzz_"$t" -merge=1 $(options "$t") "fuzz/corpus/$t" "build-fuzz/fuzz-corpus/$t" \
      >"build-fuzz/fuzz-run/$t/merge.log" 2>&1
    echo "fuzz $t: merged $(( $(ls "fuzz/corpus/$t" | wc -l) - before )) inputs into fuzz/corpus/$t"
  done
fi
echo "fuzz: total $((SECONDS - start)) s"
exit $failed
