// Control-plane scale (bench/run.sh, part 3), on a device attached by the real CLI:
//   shaperctl -n NS attach --dev DEV --mode police --max-classes 131072
//   control_bench --netns NS --dev DEV --classes 100000 --json out.json
// Works on the device's pinned maps (ShaperMaps::open_pinned(Device::resolve(dev).pin_dir()))
// and measures, in this order:
//   1. map memory: memlock of each pinned map (/proc/self/fdinfo), bytes per class slot
//   2. adding N classes: make_class_config for all; ShaperMaps::write_class_config in a loop
//      (one bpf(MAP_UPDATE_ELEM) per class); the same through BPF_MAP_UPDATE_BATCH (config and
//      clock, what an `apply` could do); Shaper::add_class for the first 1,000 (the path the CLI
//      runs: the whole configuration read, checked, planned, applied), the rest in one change
//   3. add_class, with and without a parent, and del_class while N classes exist
//   4. status of N classes in-process, phase by phase (class_ids, counters, configs, clocks,
//      status_json, dump), and the same reads through BPF_MAP_LOOKUP_BATCH
// It leaves the N classes configured (default class 1) so that run.sh can time the real
// `shaperctl -n NS status --dev DEV --json --sample 0`.
#include <bpf/bpf.h>
#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/class_config.h"
#include "loader/device.h"
#include "core/direction.h"
#include "core/error.h"
#include "loader/fd.h"
#include "loader/libbpf_log.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/rules.h"
#include "loader/shaper.h"
#include "output.h"
#include "shaper_abi.h"

using namespace shaperctl;
using json = nlohmann::ordered_json;

namespace {

double thread_cpu_s()
{
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// Wall seconds of f(); its CPU seconds (this thread: user + system) are kept under `name` in
// g_cpu, since other work on the host stretches wall time but not CPU time.
json g_cpu = json::object();
double seconds_of(const std::function<void()>& f, const char* name = nullptr)
{
    const double c0 = thread_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (name)
        g_cpu[name] = thread_cpu_s() - c0;
    return wall;
}

// One pinned object's kernel memory, from /proc/self/fdinfo (maps and programs both report
// memlock; maps also their shape).
struct PinMem {
    std::string name, kind;  // kind: "map" or "prog"
    uint64_t map_type = 0, value_size = 0, max_entries = 0, memlock = 0;
};

PinMem pin_memory(const std::string& dir, const std::string& name)
{
    PinMem m;
    m.name = name;
    int fd = bpf_obj_get((dir + "/" + name).c_str());
    if (fd < 0)
        throw std::runtime_error("cannot open " + dir + "/" + name + ": " + strerror(errno));
    Fd owned(fd);
    std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
    std::string line;
    auto value = [&](const char* key, uint64_t& out) {
        if (line.rfind(key, 0) == 0) {
            out = std::stoull(line.substr(std::strlen(key)));
            return true;
        }
        return false;
    };
    uint64_t prog_type = 0;
    while (std::getline(in, line)) {
        value("map_type:", m.map_type);
        value("value_size:", m.value_size);
        value("max_entries:", m.max_entries);
        value("memlock:", m.memlock);
        if (value("prog_type:", prog_type))
            m.kind = "prog";
    }
    if (m.kind.empty())
        m.kind = "map";
    return m;
}

Fd open_pin(const std::string& path)
{
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0)
        throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
    return Fd(fd);
}

void update_batch(int fd, std::vector<uint32_t>& keys, const void* values, const char* what)
{
    uint32_t count = uint32_t(keys.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_update_batch(fd, keys.data(), values, &count, &opts) || count != keys.size())
        throw std::runtime_error(std::string("BPF_MAP_UPDATE_BATCH ") + what + ": " +
                                 strerror(errno) + " after " + std::to_string(count));
}

// Whole-array read through BPF_MAP_LOOKUP_BATCH; returns the entries read.
uint32_t lookup_batch_all(int fd, uint32_t entries, size_t value_bytes)
{
    std::vector<uint32_t> keys(entries);
    std::vector<uint8_t> values(size_t(entries) * value_bytes);
    uint32_t count = entries, out_batch = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int err = bpf_map_lookup_batch(fd, nullptr, &out_batch, keys.data(), values.data(), &count, &opts);
    if (err && errno != ENOENT)
        throw std::runtime_error(std::string("BPF_MAP_LOOKUP_BATCH: ") + strerror(errno));
    return count;
}

// The veth part's i-th destination, 10.201.(i/250).(i%250+1), as a /32 rule to `class_id`.
shaper_rule veth_dst_rule(uint32_t i, uint32_t class_id)
{
    shaper_rule r{};
    r.pref = i + 1;
    r.class_id = class_id;
    r.fields = SHAPER_RULE_F_DST;
    r.family = 4;
    r.dst_plen = 32;
    const uint32_t be = htonl(0x0ac90000u | ((i / 250) << 8) | (i % 250 + 1));
    std::memcpy(r.dst, &be, 4);
    return r;
}

// Rules by slot, then one compile and switch (add_rule would recompile the set per rule).
void write_rules(const ShaperMaps& maps, uint32_t count, uint32_t classes)
{
    for (uint32_t i = 0; i < count; i++)
        maps.write_rule(i, veth_dst_rule(i, i % classes + 1));
    publish_rules(maps);
}

void clear_rules(const ShaperMaps& maps, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        maps.write_rule(i, shaper_rule{});
    publish_rules(maps);
}

struct Options {
    std::string netns, dev, json_out;
    uint32_t classes = 100'000;
    uint32_t parent_adds = 8;
    uint32_t rules = 10'000;
    bool populate = false;  // only configure classes and rules (for the veth part), no timing
};

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc)
                throw std::runtime_error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--netns")
            o.netns = next();
        else if (a == "--dev")
            o.dev = next();
        else if (a == "--classes")
            o.classes = uint32_t(std::stoul(next()));
        else if (a == "--parent-adds")
            o.parent_adds = uint32_t(std::stoul(next()));
        else if (a == "--json")
            o.json_out = next();
        else if (a == "--rules")
            o.rules = uint32_t(std::stoul(next()));
        else if (a == "--populate")
            o.populate = true;
        else
            throw std::runtime_error("unknown option " + a +
                                     " (--netns NS --dev DEV --classes N --rules N --parent-adds K --json F; --populate)");
    }
    if (o.dev.empty())
        throw std::runtime_error("--dev is required");
    return o;
}

void say(const char* fmt, double v, const char* unit)
{
    std::fprintf(stderr, "  %-58s %10.3f %s\n", fmt, v, unit);
}

}  // namespace

int main(int argc, char** argv)
try {
    const Options o = parse(argc, argv);
    quiet_libbpf();
    if (!o.netns.empty())
        enter_netns(o.netns);
    const Device device = Device::resolve(o.dev);
    const std::string pin = device.pin_dir();
    const uint32_t n = o.classes;
    json out;

    if (o.populate) {
        // The veth part's "shaperctl with rules" scenario: N classes at 100 Mbit, and rules
        // sending each destination /32 to a class, as HTB's u32 filters do.
        const Shaper shaper = Shaper::open(o.dev);
        for (uint32_t id = 1; id <= n; id++)
            shaper.add_class({.id = id, .rate_bps = 100'000'000, .burst_bytes = 65'536});
        write_rules(shaper.maps(), o.rules, n);
        return 0;
    }

    // 1. Memory of everything pinned for the device: the maps sized by max_classes cost per
    // class; the others (settings, rules, program) are fixed.
    Fd config_fd = open_pin(pin + "/shaper_class_config"), clock_fd = open_pin(pin + "/shaper_classes"),
       stats_fd = open_pin(pin + "/shaper_class_stats");
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(pin))
        names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    uint32_t max_classes = 0;
    std::vector<PinMem> mems;
    for (const std::string& name : names) {
        mems.push_back(pin_memory(pin, name));
        if (name == "shaper_class_config")
            max_classes = uint32_t(mems.back().max_entries);
    }
    if (n >= max_classes)
        throw std::runtime_error("--classes " + std::to_string(n) + " needs max_classes above it (have " +
                                 std::to_string(max_classes) + ")");
    uint64_t per_class_maps = 0, fixed = 0;
    const int ncpu = libbpf_num_possible_cpus();
    // Per class: arrays cost their value (rounded to 8); per-CPU arrays a pointer plus the value
    // on every possible CPU, so the projection to a 64-CPU host is computed from the shape.
    std::string breakdown;
    double per_slot_64 = 0;
    json jm = json::array();
    for (const PinMem& m : mems) {
        // The maps the loader sizes by max_classes (the flow table's fixed size may equal it).
        // The counters hold one set per CPU: possible CPUs x max_classes entries.
        const bool per_cpu_sets = m.name == "shaper_class_stats" && m.max_entries == uint64_t(max_classes) * ncpu;
        const bool per_class = m.kind == "map" && (m.max_entries == max_classes || per_cpu_sets) &&
                               (m.name == "shaper_classes" || m.name.rfind("shaper_class_", 0) == 0);
        (per_class ? per_class_maps : fixed) += m.memlock;
        jm.push_back({{"name", m.name}, {"kind", m.kind}, {"map_type", m.map_type},
                      {"value_size", m.value_size}, {"max_entries", m.max_entries},
                      {"memlock_bytes", m.memlock}, {"sized_by_max_classes", per_class}});
        if (!per_class)
            continue;
        const uint64_t value = (m.value_size + 7) / 8 * 8;
        const bool percpu = m.map_type == BPF_MAP_TYPE_PERCPU_ARRAY || per_cpu_sets;
        std::string name = m.name == "shaper_classes"                ? "entry"
                           : m.name.rfind("shaper_class_", 0) == 0 ? m.name.substr(13)
                                                                   : m.name;
        breakdown += (breakdown.empty() ? "" : " + ") + name + " " +
                     (percpu ? std::to_string(value) + "x" + std::to_string(ncpu) : std::to_string(value));
        per_slot_64 += percpu ? value * 64.0 : double(m.memlock) / max_classes;
    }
    const double per_slot = double(per_class_maps) / max_classes;
    out["memory"] = {{"pins", jm},
                     {"possible_cpus", ncpu},
                     {"max_classes", max_classes},
                     {"bytes_per_class_slot", per_slot},
                     {"bytes_per_class_formula", breakdown},
                     {"bytes_per_class_slot_at_64_cpus", per_slot_64},
                     {"per_class_maps_bytes", per_class_maps},
                     {"fixed_bytes", fixed},
                     {"total_bytes", per_class_maps + fixed},
                     {"classes", n},
                     {"total_bytes_if_max_classes_eq_classes_plus_1",
                      uint64_t(per_slot * (n + 1)) + fixed}};
    say("memlock per class slot (B)", per_slot, "B");
    say("memlock of the maps sized by max_classes (MiB)", per_class_maps / 1048576.0, "MiB");
    say("memlock of the fixed maps and program (MiB)", fixed / 1048576.0, "MiB");

    // 2. Adding N classes.
    ShaperMaps maps = ShaperMaps::open_pinned(pin);
    std::vector<shaper_class_config> configs(n);
    std::vector<uint32_t> keys(n);
    const uint64_t horizon = SHAPER_DEFAULT_POLICE_HORIZON_NS;
    const double t_make = seconds_of([&] {
        for (uint32_t i = 0; i < n; i++) {
            keys[i] = i + 1;
            configs[i] = make_class_config({.id = i + 1, .rate_bps = 10'000'000ull + i,
                                            .burst_bytes = 15'000, .overhead = 24},
                                           max_classes, horizon);
        }
    });
    say("make_class_config x N (s)", t_make, "s");
    const std::vector<shaper_class_config> no_configs(n);
    const std::vector<shaper_class> zero_clocks(n);
    auto clear_all = [&] {
        update_batch(config_fd.get(), keys, no_configs.data(), "clear configs");
        update_batch(clock_fd.get(), keys, zero_clocks.data(), "clear clocks");
    };
    const double t_clear = seconds_of(clear_all);

    const double t_loop = seconds_of([&] {
        for (uint32_t i = 0; i < n; i++)
            maps.write_class_config(keys[i], configs[i]);
    }, "write_class_config_loop_s");
    say("write_class_config loop (s)", t_loop, "s");
    if (maps.class_ids().size() != n)
        throw std::runtime_error("write loop: class count mismatch");
    clear_all();

    const double t_batch = seconds_of([&] {
        update_batch(clock_fd.get(), keys, zero_clocks.data(), "clocks");
        update_batch(config_fd.get(), keys, configs.data(), "configs");
    }, "update_batch_clock_and_config_s");
    say("BPF_MAP_UPDATE_BATCH clocks + configs (s)", t_batch, "s");
    if (maps.class_ids().size() != n)
        throw std::runtime_error("batch: class count mismatch");
    clear_all();

    // Shaper::add_class is one change of the whole configuration (read, checked, planned,
    // applied: what `add-class` does), so its cost grows with the classes present: timed for the
    // first classes and again at N present. The rest go in as one change, as `apply -f` adds them.
    double t_add_first = 0, t_bulk = 0, t_add_at_n = 0, t_parent_add = 0, t_parent_del = 0;
    const uint32_t first = std::min<uint32_t>(n, 1000);
    {
        const Shaper shaper = Shaper::open(o.dev);
        auto spec_of = [](uint32_t i) {
            return ClassSpec{.id = i + 1, .rate_bps = 10'000'000ull + i, .burst_bytes = 15'000,
                             .overhead = 24};
        };
        t_add_first = seconds_of([&] {
            for (uint32_t i = 0; i < first; i++)
                shaper.add_class(spec_of(i));
        }, "shaper_add_class_first_s") / first;
        say(("Shaper::add_class, the first " + std::to_string(first) + " classes (s each)").c_str(), t_add_first, "s");
        t_bulk = seconds_of([&] {
            const ShaperConfig current = shaper.config();
            ShaperConfig desired = current;
            for (uint32_t i = first; i < n; i++) {
                ClassSpec c = spec_of(i);
                c.horizon_ns = default_horizon(Direction::Egress, SHAPER_MODE_POLICE, c.rate_bps);
                desired.classes.push_back(c);
            }
            const CheckedRules rules = check_config(desired, shaper.limits(), &current.rules);
            shaper.apply(plan_config(current, desired), rules);
        }, "shaper_bulk_add_s");
        say(("the other " + std::to_string(n - first) + " in one change (s)").c_str(), t_bulk, "s");
        // 3. Single changes while N classes exist, top level and with a parent; a few, each.
        t_add_at_n = seconds_of([&] {
            for (uint32_t k = 0; k < o.parent_adds; k++)
                shaper.add_class(spec_of(n + k));
        }) / o.parent_adds;
        say("Shaper::add_class, N classes present (s each)", t_add_at_n, "s");
        for (uint32_t k = 0; k < o.parent_adds; k++)
            maps.erase_class(n + 1 + k);
        t_parent_add = seconds_of([&] {
            for (uint32_t k = 0; k < o.parent_adds; k++)
                shaper.add_class({.id = n + 1 + k, .rate_bps = 1'000'000, .parent = 1});
        }) / o.parent_adds;
        say("Shaper::add_class with a parent, N classes present (s each)", t_parent_add, "s");
        const uint32_t dels = std::max<uint32_t>(1, o.parent_adds / 4);
        t_parent_del = seconds_of([&] {
            for (uint32_t k = 0; k < dels; k++)
                shaper.del_class(n + 1 + k);
        }) / dels;
        say("Shaper::del_class, N classes present (s each)", t_parent_del, "s");
        for (uint32_t k = dels; k < o.parent_adds; k++)
            maps.erase_class(n + 1 + k);
        shaper.set_default(1);
    }
    if (maps.class_ids().size() != n)
        throw std::runtime_error("add_class: class count mismatch");
    const double nd = n;
    out["add_classes"] = {
        {"classes", n},
        {"make_class_config_s", t_make},
        {"write_class_config_loop_s", t_loop},
        {"write_class_config_us_each", t_loop / nd * 1e6},
        {"update_batch_clock_and_config_s", t_batch},
        {"batch_clear_s", t_clear},
        {"shaper_add_class_first", first},
        {"shaper_add_class_first_s_each", t_add_first},
        {"shaper_bulk_add_s", t_bulk},
        {"shaper_add_class_s_each_at_n", t_add_at_n},
        {"add_class_with_parent_s_each_at_n", t_parent_add},
        {"del_class_s_each_at_n", t_parent_del},
        {"add_n_with_parents_estimate_s", t_parent_add * nd / 2},
    };

    // 3b. Rules: publish N destination rules at once (stored slot by slot, compiled and
    // switched once), one more through add_rule (what `add-rule` does) with N present, then
    // clear them so that status below shows classes only.
    json jr;
    if (o.rules) {
        const ShaperMaps& m = maps;
        const double t_publish = seconds_of([&] { write_rules(m, o.rules, n); }, "publish_rules_s");
        const double t_add_rule = seconds_of([&] { add_rule(m, rule_spec_of(veth_dst_rule(o.rules, 1))); },
                                             "add_rule_at_n_s");
        const double t_clear = seconds_of([&] { clear_rules(m, o.rules + 1); });
        say("rules: write_rule x R + publish_rules once (s)", t_publish, "s");
        say("rules: add_rule with R present (s)", t_add_rule, "s");
        jr = {{"rules", o.rules}, {"publish_s", t_publish}, {"add_rule_at_n_s", t_add_rule},
              {"add_n_rules_one_by_one_estimate_s", t_add_rule * o.rules / 2}, {"clear_s", t_clear}};
    }
    out["rules"] = jr;

    // 4. Status, in-process, phase by phase (what Shaper::status does), then through batches.
    json js;
    {
        const Shaper shaper = Shaper::open(o.dev);
        DeviceStatus st;
        const double t_status = seconds_of([&] { st = shaper.status(std::chrono::nanoseconds(0)); }, "library_status_s");
        nlohmann::ordered_json j;
        const double t_json = seconds_of([&] { j = status_json(st); }, "status_json_s");
        std::string text;
        const double t_dump = seconds_of([&] { text = j.dump(2); }, "dump_s");
        std::string streamed;
        const double t_stream = seconds_of([&] { streamed = status_json_text(st); }, "status_json_text_s");
        const bool stream_identical = streamed == text;
        const double t_free = seconds_of([&] { j = nlohmann::ordered_json(); }, "json_free_s");
        std::vector<uint32_t> ids;
        const double t_ids = seconds_of([&] { ids = maps.class_ids(); }, "class_ids_s");
        const double t_counters = seconds_of([&] {
            for (uint32_t id : ids)
                maps.counters(id);
        }, "counters_loop_s");
        const double t_configs = seconds_of([&] {
            for (uint32_t id : ids)
                maps.class_config(id);
        }, "class_config_loop_s");
        const double t_clocks = seconds_of([&] {
            for (uint32_t id : ids)
                maps.clock(id);
        }, "clock_loop_s");
        say("status(): Shaper::status in-process (s)", t_status, "s");
        say("  class_ids() (one batch read of the config array) (s)", t_ids, "s");
        say("  counters(id) x N (per-CPU lookup; status does it twice) (s)", t_counters, "s");
        say("  class_config(id) x N (s)", t_configs, "s");
        say("  clock(id) x N (s)", t_clocks, "s");
        say("status_json() (s)", t_json, "s");
        say("dump(2) (s)", t_dump, "s");
        say("JSON size (MB)", text.size() / 1e6, "MB");
        say("freeing the JSON DOM (s)", t_free, "s");
        say(stream_identical ? "status_json_text() (what the CLI prints; identical) (s)"
                             : "status_json_text() (what the CLI prints; DIFFERS) (s)", t_stream, "s");
        const double b_config = seconds_of([&] { lookup_batch_all(config_fd.get(), max_classes, sizeof(shaper_class_config)); }, "batch_read_config_s");
        const double b_clock = seconds_of([&] { lookup_batch_all(clock_fd.get(), max_classes, sizeof(shaper_class)); }, "batch_read_clock_s");
        const double b_stats = seconds_of([&] {
            lookup_batch_all(stats_fd.get(), uint32_t(max_classes) * ncpu, sizeof(shaper_class_stats));
        }, "batch_read_stats_s");
        say("BPF_MAP_LOOKUP_BATCH config+clock+stats (whole arrays) (s)", b_config + b_clock + b_stats, "s");
        js = {{"classes", st.classes.size()},
              {"library_status_s", t_status},
              {"class_ids_s", t_ids},
              {"counters_loop_s", t_counters},
              {"counters_loops_in_status", 2},
              {"class_config_loop_s", t_configs},
              {"clock_loop_s", t_clocks},
              {"status_json_s", t_json},
              {"dump_s", t_dump},
              {"json_bytes", text.size()},
              {"json_free_s", t_free},
              {"status_json_text_s", t_stream},
              {"status_json_text_identical", stream_identical},
              {"batch_read_config_s", b_config},
              {"batch_read_clock_s", b_clock},
              {"batch_read_stats_s", b_stats},
              {"batch_read_total_s", b_config + b_clock + b_stats}};
    }
    out["status_breakdown"] = js;
    g_cpu["batch_read_total_s"] = g_cpu.value("batch_read_config_s", 0.0) +
                                  g_cpu.value("batch_read_clock_s", 0.0) +
                                  g_cpu.value("batch_read_stats_s", 0.0);
    out["cpu_s"] = g_cpu;

    const std::string text = out.dump(2);
    if (o.json_out.empty()) {
        std::puts(text.c_str());
    } else {
        std::ofstream f(o.json_out);
        f << text << "\n";
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "control_bench: %s\n", e.what());
    return 1;
}
