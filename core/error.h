// The one exception the library throws: its message is a single line, fit to print as is.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace shaperctl {

// Control characters (a newline typed into a device name, say) as \xNN: one line, always.
std::string one_line(std::string_view text);

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(one_line(message)) {}
};

// The running kernel has no such qdisc (sch_fq on a kernel built without it): callers that can
// do without it (police mode) tell it from other failures by its type, never by its text.
class QdiscUnavailable : public Error {
public:
    using Error::Error;
};

// "what: strerror(err)" for a failed system or libbpf call (err may be negative).
std::string errno_message(const std::string& what, int err);

}  // namespace shaperctl
