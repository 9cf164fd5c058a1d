// Test helper: a throw-away network namespace, entered by the calling thread for the helper's
// lifetime, so that tests can create devices and qdiscs without touching the host's.
#pragma once

#include <string>

namespace shaperctl::test {

struct CommandResult {
    int status = -1;     // exit status; -1 if it did not exit normally
    std::string output;  // stdout and stderr
};

// iproute2's `ip` and `tc`: $IP and $TC if set (the stock-kernel VM sets them), else by name.
std::string ip_tool();
std::string tc_tool();

// Runs a command through /bin/sh.
CommandResult run(const std::string& command);

// Runs a command; throws std::runtime_error naming it and quoting its output unless it exits 0.
std::string must_run(const std::string& command);

// `ip netns add shaperctl-test-<pid>-<n>`, then setns() of the calling thread into it. The
// destructor puts the thread back in the namespace it came from and deletes the namespace,
// whatever the test did. Namespaces left behind by test processes that died are swept away.
class NetNs {
public:
    NetNs();
    ~NetNs();
    NetNs(const NetNs&) = delete;
    NetNs& operator=(const NetNs&) = delete;

    const std::string& name() const { return name_; }

    // `ip -n NAME ARGS` and `tc -n NAME ARGS`; throw like must_run().
    std::string ip(const std::string& args) const;
    std::string tc(const std::string& args) const;

    // A veth pair, both ends with `tx_queues` TX (and RX) queues, brought up unless !up (a
    // device never brought up has no root qdisc to show).
    void add_veth(const std::string& name, const std::string& peer, unsigned tx_queues = 1,
                  bool up = true) const;

    int ifindex(const std::string& device) const;

    // No IPv6 in the namespace, for devices created after: otherwise bringing a device up sends
    // router solicitations and MLD reports, which move counters (e.g. in htb's options).
    void disable_ipv6() const;

private:
    std::string name_;
    int original_ = -1;  // fd of the thread's namespace before
};

}  // namespace shaperctl::test
