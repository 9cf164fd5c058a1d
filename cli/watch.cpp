#include "watch.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <vector>

#include "core/error.h"
#include "loader/shaper.h"
#include "status_json.h"
#include "status_table.h"
#include "text_sink.h"
#include "core/units.h"

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
    // Each class's bytes at its reading in the frame before, by id: its rate is over the time
    // between its own two readings. A class absent from that frame has no rate yet.
    struct Reading {
        uint64_t bytes = 0, ns = 0, frame = 0;
    };
    std::vector<Reading> last;
    uint64_t frame = 0, last_ns = 0;
    for (;;) {
        if (!Shaper::is_attached(dev, side))
            throw Error("dev " + dev + ": detached");
        frame++;
        // Each frame is written as the classes are read, like status: no whole status is held.
        TextSink text(std::cout);
        StatusJsonWriter json_writer(text, true);
        StatusTableWriter table_writer(text);
        shaper.status(
            std::chrono::nanoseconds(0),
            [&](const DeviceStatus& head) {
                DeviceStatus st = head;
                const uint64_t now = monotonic_ns();
                st.sample_ns = last_ns ? now - last_ns : 0;
                last_ns = now;
                if (last.size() < st.max_classes)
                    last.resize(st.max_classes);
                if (json) {
                    json_writer.head(st);
                    return;
                }
                if (tty)
                    text << "\033[H\033[2J";
                text << "every " << format_time(interval_ns) << "  " << wall_clock() << "  (Ctrl-C to quit)\n";
                table_writer.head(st);
            },
            [&](const ClassStatus& read) {
                ClassStatus c = read;
                const uint64_t now = monotonic_ns();
                if (c.spec.id >= last.size())
                    last.resize(c.spec.id + 1);
                Reading& before = last[c.spec.id];
                if (before.ns && before.frame + 1 == frame && c.counters.bytes >= before.bytes && now > before.ns)
                    c.rate_estimate_bps =
                        uint64_t((unsigned __int128)(c.counters.bytes - before.bytes) * 8 * 1'000'000'000ull / (now - before.ns));
                before = {c.counters.bytes, now, frame};
                if (json)
                    json_writer.add(c);
                else
                    table_writer.add(c);
            });
        if (json) {
            json_writer.end();
            text << "\n";
        } else {
            table_writer.end();
            text << (tty ? "" : "\n");
        }
        text.flush();
        std::cout.flush();

        timespec wait{time_t(interval_ns / 1'000'000'000ull), long(interval_ns % 1'000'000'000ull)};
        const int sig = sigtimedwait(&stop, nullptr, &wait);
        if (sig == SIGINT || sig == SIGTERM)
            return;
    }
}

}  // namespace shaperctl
