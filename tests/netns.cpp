#include "netns.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace shaperctl::test {
namespace {

constexpr const char* kPrefix = "shaperctl-test-";

// The stock-kernel VM's shell runs busybox applets for bare `ip`/`tc`: it names the real
// tools in $IP and $TC.
std::string tool(const char* variable, const char* name)
{
    const char* path = std::getenv(variable);
    return path && *path ? path : name;
}

// Namespaces of earlier test processes that died before their destructors ran.
void sweep_orphans()
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
        const std::string name = entry.path().filename();
        if (!name.starts_with(kPrefix))
            continue;
        const long pid = std::strtol(name.c_str() + std::strlen(kPrefix), nullptr, 10);
        if (pid > 0 && pid != getpid() && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            run(ip_tool() + " netns del " + name);
    }
}

}  // namespace

std::string ip_tool()
{
    return tool("IP", "ip");
}

std::string tc_tool()
{
    return tool("TC", "tc");
}

CommandResult run(const std::string& command)
{
    CommandResult result;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (!pipe)
        throw std::runtime_error("cannot run `" + command + "`: " + std::strerror(errno));
    char chunk[4096];
    size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0)
        result.output.append(chunk, n);
    const int status = pclose(pipe);
    if (status != -1 && WIFEXITED(status))
        result.status = WEXITSTATUS(status);
    return result;
}

std::string must_run(const std::string& command)
{
    CommandResult result = run(command);
    if (result.status != 0)
        throw std::runtime_error("`" + command + "` failed (status " +
                                 std::to_string(result.status) + "): " + result.output);
    return result.output;
}

NetNs::NetNs()
{
    static std::atomic<unsigned> count{0};
    sweep_orphans();
    name_ = kPrefix + std::to_string(getpid()) + "-" + std::to_string(++count);
    must_run(ip_tool() + " netns add " + name_);

    original_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int target =
        original_ < 0 ? -1 : open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0 || setns(target, CLONE_NEWNET) != 0) {
        const std::string why = std::strerror(errno);
        if (target >= 0)
            close(target);
        if (original_ >= 0)
            close(original_);
        run(ip_tool() + " netns del " + name_);
        throw std::runtime_error("cannot enter network namespace " + name_ + ": " + why);
    }
    close(target);
}

NetNs::~NetNs()
{
    if (setns(original_, CLONE_NEWNET) != 0) {
        // Later tests would run in a namespace about to vanish: better stop here.
        std::fprintf(stderr, "cannot leave network namespace %s: %s\n", name_.c_str(),
                     std::strerror(errno));
        std::abort();
    }
    close(original_);
    CommandResult result = run(ip_tool() + " netns del " + name_);
    if (result.status != 0)
        std::fprintf(stderr, "cannot delete network namespace %s: %s", name_.c_str(),
                     result.output.c_str());
}

std::string NetNs::ip(const std::string& args) const
{
    return must_run(ip_tool() + " -n " + name_ + " " + args);
}

std::string NetNs::tc(const std::string& args) const
{
    return must_run(tc_tool() + " -n " + name_ + " " + args);
}

void NetNs::add_veth(const std::string& name, const std::string& peer, unsigned tx_queues,
                     bool up) const
{
    // Queue counts go on each end: after `peer name`, they would apply to the peer only.
    const std::string queues =
        " numtxqueues " + std::to_string(tx_queues) + " numrxqueues " + std::to_string(tx_queues);
    ip("link add " + name + queues + " type veth peer name " + peer + queues);
    if (up) {
        ip("link set " + name + " up");
        ip("link set " + peer + " up");
    }
}

void NetNs::disable_ipv6() const
{
    // /proc/sys/net shows the namespace of the thread that opens it: this one. A kernel
    // without IPv6 has nothing to disable.
    for (const char* conf : {"all", "default"}) {
        const std::string path = std::string("/proc/sys/net/ipv6/conf/") + conf + "/disable_ipv6";
        if (FILE* file = std::fopen(path.c_str(), "w")) {
            std::fputs("1", file);
            std::fclose(file);
        }
    }
}

int NetNs::ifindex(const std::string& device) const
{
    // The calling thread is in the namespace, so the lookup is too.
    const unsigned index = if_nametoindex(device.c_str());
    if (index == 0)
        throw std::runtime_error("no device " + device + " in " + name_ + ": " +
                                 std::strerror(errno));
    return static_cast<int>(index);
}

}  // namespace shaperctl::test
