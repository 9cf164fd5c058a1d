// Why: the CNI specification makes errors part of the protocol. A runtime reads a JSON object
// {cniVersion, code, msg, details} from the plugin's stdout and decides by its code whether to
// retry, so every failure is thrown as a CniError carrying one of the spec's codes, and main()
// alone turns it into that object and a non-zero exit.
#pragma once

#include <stdexcept>
#include <string>

namespace shaperctl::cni {

// The codes of the CNI specification (section "Error") that this plugin reports.
enum Code : int {
    kIncompatibleVersion = 1,
    kInvalidEnvironment = 4,
    kDecodeFailure = 6,
    kInvalidConfig = 7,
    kTryAgainLater = 11,
    kOther = 999,
};

class CniError : public std::runtime_error {
public:
    CniError(int code, const std::string& msg, std::string details = "")
        : std::runtime_error(msg), code_(code), details_(std::move(details))
    {
    }
    int code() const { return code_; }
    const std::string& details() const { return details_; }

private:
    int code_;
    std::string details_;
};

}  // namespace shaperctl::cni
