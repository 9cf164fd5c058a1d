// `shaperctl doctor`: what this kernel and host offer shaperctl, and whether the devices it
// manages are still set up as attach left them. Probes that change anything run on the
// loopback device of a scratch network namespace that vanishes with the probing thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shaperctl {

struct Finding {
    std::string check;   // "sch_fq", "dev eth0 filter", ...
    std::string status;  // "ok", "warn" or "fail"
    std::string detail;  // what was found
    std::string hint;    // what to do about it ("" when there is nothing to do)
};

// Host checks, then the managed devices of network namespace `netns` (/run/netns/NAME, entered
// by the calling thread) or, when "", of the calling thread's.
std::vector<Finding> run_doctor(const std::string& netns);

namespace detail {
// Runs `probe` on a thread of its own in a new, empty network namespace (only `lo`, down).
// Error: what the probe threw, or why the namespace could not be made.
void in_scratch_netns(const std::function<void()>& probe);
}  // namespace detail

}  // namespace shaperctl
