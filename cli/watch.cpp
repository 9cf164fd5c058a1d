#include "watch.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <map>

#include "loader/error.h"
#include "loader/shaper.h"
#include "output.h"
#include "units.h"

namespace shaperctl {
namespace {

std::string wall_clock()
{
    const std::time_t now = std::time(nullptr);
    char buf[16];
    std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&now));
    return buf;
}

}  // namespace

void watch_status(const std::string& dev, uint64_t interval_ns, bool json, Direction side)
{
    // Ctrl-C (and SIGTERM) end the wait between frames; nothing else is interrupted.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, nullptr);

    // Unlocked: a watch must never hold up changes to the device.
    const Shaper shaper = Shaper::open_unlocked(dev, side);
    const bool tty = isatty(STDOUT_FILENO);
    std::map<uint32_t, uint64_t> last_bytes;
    uint64_t last_ns = 0;
    for (;;) {
        if (!Shaper::is_attached(dev, side))
            throw Error("dev " + dev + ": detached");
        DeviceStatus st = shaper.status(std::chrono::nanoseconds(0));
        const uint64_t now = monotonic_ns();
        if (last_ns) {
            st.sample_ns = now - last_ns;
            for (ClassStatus& c : st.classes) {
                auto it = last_bytes.find(c.spec.id);
                if (it != last_bytes.end() && c.counters.bytes >= it->second)
                    c.rate_estimate_bps = uint64_t((unsigned __int128)(c.counters.bytes - it->second) * 8 *
                                                   1'000'000'000ull / st.sample_ns);
            }
        }
        last_ns = now;
        last_bytes.clear();
        for (const ClassStatus& c : st.classes)
            last_bytes[c.spec.id] = c.counters.bytes;

        if (json) {
            std::cout << status_json(st).dump() << std::endl;
        } else {
            if (tty)
                std::cout << "\033[H\033[2J";
            std::cout << "every " << format_time(interval_ns) << "  " << wall_clock()
                      << "  (Ctrl-C to quit)\n"
                      << status_table(st) << (tty ? "" : "\n") << std::flush;
        }

        timespec wait{time_t(interval_ns / 1'000'000'000ull), long(interval_ns % 1'000'000'000ull)};
        const int sig = sigtimedwait(&stop, nullptr, &wait);
        if (sig == SIGINT || sig == SIGTERM)
            return;
    }
}

}  // namespace shaperctl
