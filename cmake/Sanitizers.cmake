# -DSHAPERCTL_SANITIZE=ON: the whole build (loader, CLI, tests, fuzz replays) under
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, for g++ or clang.
# scripts/sanitize.sh builds it into build-asan/ and runs the host tests; it sets
# ASAN_OPTIONS/UBSAN_OPTIONS so that every report, also one from a shaperctl child process
# of the CLI tests, is written to build-asan/sanitizer-logs/ and fails the run.
#
# Only C and C++ compilation is affected: the BPF object is built by a custom command
# (clang -target bpf) that takes none of these flags.
if(SHAPERCTL_SANITIZE)
  if(SHAPERCTL_FUZZ)
    message(FATAL_ERROR "SHAPERCTL_SANITIZE and SHAPERCTL_FUZZ are separate builds "
                        "(the fuzzers carry their own sanitizers)")
  endif()
  set(SHAPERCTL_SANITIZE_FLAGS
      -fsanitize=address,undefined
      -fno-sanitize-recover=all   # UB aborts, as ASan errors do: no report goes unnoticed
      -fno-omit-frame-pointer)
  add_compile_options(${SHAPERCTL_SANITIZE_FLAGS}
      -D_GLIBCXX_ASSERTIONS)      # bounds-checked operator[] etc., ABI compatible
  add_link_options(${SHAPERCTL_SANITIZE_FLAGS})
  message(STATUS "shaperctl: building with ${SHAPERCTL_SANITIZE_FLAGS}")
endif()
