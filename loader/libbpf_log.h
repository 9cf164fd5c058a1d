// libbpf's messages, kept whole. They go to stderr only when SHAPERCTL_DEBUG is set; otherwise
// the last one is kept so that an error can quote it on its single line. The verifier log of a
// failed load (megabytes on a large program) is kept apart: the error quotes its last meaningful
// line, and with SHAPERCTL_DEBUG set the whole log goes to a file the error names.
#pragma once

#include <cstdarg>
#include <string>
#include <string_view>

#include <bpf/libbpf.h>

namespace shaperctl {

// Installs the print callback (idempotent).
void quiet_libbpf();
std::string last_libbpf_message();

// Drops the verifier log of an earlier load.
void forget_verifier_log();
// What the error of a failed load adds about the verifier: `: the verifier said "LINE" (...)`,
// the parenthesis naming the file with the whole log or how to get one; "" when libbpf passed on
// no verifier log.
std::string verifier_log_summary();

namespace detail {
// The callback itself, for tests.
int libbpf_print(enum libbpf_print_level level, const char* format, va_list args);
// The verifier's verdict in a log: its last line that is not a statistic.
std::string verifier_last_words(std::string_view log);
// Where the whole log goes for a SHAPERCTL_DEBUG value: the value when it is an absolute path,
// else verifier.log under the run directory; "" when unset.
std::string verifier_log_path(const char* debug);
}  // namespace detail

}  // namespace shaperctl
