// Datapath cost per packet through BPF_PROG_TEST_RUN (bench/run.sh, part 1).
//
// Every row runs one packet `repeat` times inside the kernel (bpf_test_run's loop); the kernel
// reports the mean ns per run; a row's value is the median over `runs` such calls. The programs:
//   (a) bench/bpf/empty.bpf.c   return TC_ACT_OK: the harness's own cost, in every row
//   (b) bench/bpf/stamp.bpf.c   read the clock, write the departure time: the floor of any EDT
//                               shaper (helper variant = what shaperctl uses on this kernel)
//   (c..f) shaperctl's own program (loader's Program, unpinned) with classes written directly
//          into its maps (ShaperMaps + make_class_config) and rules through the loader's rules
//          API (write_rule + publish_rules), no device involved.
// The 100k-class row also has a cold-cache variant measured with repeat=1 calls: see
// bench/README.md ("cold entries").
//
// Adding a scenario: a block in main() like (c): set up a ShaperUnderTest, add() the measure()
// of it, check its counters. Rows whose product feature does not exist yet use not_yet(), which
// prints "n/a (not yet implemented)" (and says so when shaper.bpf.o grows a matching map).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/class_config.h"
#include "loader/libbpf_log.h"
#include "loader/maps.h"
#include "loader/program.h"
#include "loader/rules.h"
#include "shaper_abi.h"

using namespace shaperctl;
using json = nlohmann::ordered_json;

namespace {

constexpr int kTcActOk = 0;     // the reference programs' verdict
constexpr int kShaperPass = -1;  // shaperctl's: on to the next program (TC_ACT_UNSPEC, TCX_NEXT)
constexpr int kTcActShot = 2;

bool passed(uint32_t retval)
{
    return int(retval) == kTcActOk || int(retval) == kShaperPass;
}
constexpr uint64_t kSec = 1'000'000'000ull;

struct Options {
    uint32_t repeat = 1'000'000;
    int runs = 7;
    uint32_t cold_calls = 100'000;  // repeat=1 calls, one per class of the 100k
    uint32_t many_classes = 100'000;
    uint32_t max_classes = 131'072;
    uint32_t rules = 10'000;
    int cpu = -1;  // -1: the last CPU
    std::string bpf_dir = BENCH_BPF_DIR;
    std::string shaper_obj = SHAPER_BPF_OBJ;
    std::string json_out;
    std::string only;  // a row key prefix: measure the references and those rows alone
};

// Ethernet + IPv4 + UDP, 128 bytes on the wire, to 10.201.0.1: well formed, so that a
// classifier parsing headers for rules sees a real packet.
std::vector<uint8_t> udp_frame(uint32_t dst_ip_host_order = 0x0ac90001, uint16_t sport = 40000)
{
    std::vector<uint8_t> frame(128, 0);
    auto* eth = reinterpret_cast<ethhdr*>(frame.data());
    std::memset(eth->h_dest, 0x02, ETH_ALEN);
    std::memset(eth->h_source, 0x04, ETH_ALEN);
    eth->h_proto = htons(ETH_P_IP);
    auto* ip = reinterpret_cast<iphdr*>(frame.data() + sizeof(ethhdr));
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->tot_len = htons(uint16_t(frame.size() - sizeof(ethhdr)));
    ip->saddr = htonl(0x0ac80001);  // 10.200.0.1
    ip->daddr = htonl(dst_ip_host_order);
    auto* udp = reinterpret_cast<udphdr*>(frame.data() + sizeof(ethhdr) + sizeof(iphdr));
    udp->source = htons(sport);
    udp->dest = htons(9);
    udp->len = htons(uint16_t(frame.size() - sizeof(ethhdr) - sizeof(iphdr)));
    return frame;
}

struct RunResult {
    uint32_t duration_ns;  // kernel's mean per run
    uint32_t retval;
};

RunResult test_run(int prog_fd, const std::vector<uint8_t>& frame, uint32_t repeat)
{
    __sk_buff ctx{};
    ctx.wire_len = uint32_t(frame.size());
    ctx.gso_segs = 1;
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                .data_size_in = uint32_t(frame.size()), .ctx_in = &ctx,
                .ctx_size_in = sizeof ctx, .repeat = int(repeat));
    if (bpf_prog_test_run_opts(prog_fd, &opts))
        throw std::runtime_error(std::string("BPF_PROG_TEST_RUN failed: ") + strerror(errno));
    return {opts.duration, opts.retval};
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// `runs` calls of `repeat` runs each (after one warm-up call). The kernel returns the verdict
// of a call's last run: it must be a pass unless the row expects drops (counters tell the
// rest). `before_each` runs before every call, outside the timing.
std::vector<double> measure(int prog_fd, const Options& o, const std::vector<uint8_t>& frame,
                            bool allow_drop = false, const std::function<void()>& before_each = {})
{
    if (before_each)
        before_each();
    test_run(prog_fd, frame, std::max<uint32_t>(o.repeat / 10, 1));  // warm-up: JIT image, maps
    std::vector<double> ns;
    for (int i = 0; i < o.runs; i++) {
        if (before_each)
            before_each();
        RunResult r = test_run(prog_fd, frame, o.repeat);
        if (!passed(r.retval) && !(allow_drop && r.retval == kTcActShot))
            throw std::runtime_error("verdict " + std::to_string(int(r.retval)) + " instead of a pass");
        ns.push_back(r.duration_ns);
    }
    return ns;
}

uint64_t total_runs(const Options& o)
{
    return uint64_t(std::max<uint32_t>(o.repeat / 10, 1)) + uint64_t(o.runs) * o.repeat;
}

// A plain libbpf object (the reference programs): opened, loaded, program found by name.
struct RefObject {
    bpf_object* obj = nullptr;
    explicit RefObject(const std::string& path)
    {
        obj = bpf_object__open_file(path.c_str(), nullptr);
        if (!obj)
            throw std::runtime_error("cannot open " + path + ": " + strerror(errno));
        if (int err = bpf_object__load(obj))
            throw std::runtime_error("cannot load " + path + ": " + strerror(-err));
    }
    ~RefObject() { bpf_object__close(obj); }
    int prog_fd(const char* name) const
    {
        bpf_program* p = bpf_object__find_program_by_name(obj, name);
        if (!p)
            throw std::runtime_error(std::string("no program ") + name);
        return bpf_program__fd(p);
    }
};

// shaperctl's program with its own (unpinned) maps.
struct ShaperUnderTest {
    Program program;
    ShaperMaps maps;
    explicit ShaperUnderTest(uint32_t max_classes)
        : program(Program::load({.pin_dir = "", .max_classes = max_classes})),
          maps(ShaperMaps::of(program))
    {
    }
    void settings(uint32_t default_class, uint32_t mode) const
    {
        shaper_settings s = maps.settings();  // other fields (rules generation) kept
        s.default_class = default_class;
        s.mode = mode;
        s.abi_version = SHAPER_ABI_VERSION;
        maps.set_settings(s);
    }
    // 1 Gbit, no burst, 60 s horizon: a 128-byte packet advances the clock by 1024 ns, more than
    // a run takes, so the clock runs ahead of now and every packet takes the backlogged path
    // (fetch-and-add) of a class that is actually shaping; the backlog stays far below 60 s.
    // AQM (CoDel, being added to the product) is off in every row but (g): rows (c)..(f)
    // measure classification and the token bucket alone, whatever the product's default.
    void add_class(uint32_t id, uint32_t parent = 0, bool aqm = false) const
    {
        ClassSpec spec{.id = id, .rate_bps = 1'000'000'000ull, .parent = parent,
                       .horizon_ns = 60 * kSec};
        shaper_class_config config = make_class_config(spec, maps.max_classes(), 60 * kSec);
#ifdef SHAPER_CLASS_AQM
        config.flags = aqm ? config.flags | SHAPER_CLASS_AQM : config.flags & ~SHAPER_CLASS_AQM;
#else
        if (aqm)
            throw std::runtime_error("this build has no AQM");
#endif
        maps.write_class_config(id, config);
    }
    // One destination /32 rule per (address, class), in order.
    void install_dst_rules(const std::vector<std::pair<uint32_t, uint32_t>>& to_class) const;
    void expect_packets(uint32_t id, uint64_t packets) const
    {
        const ClassCounters c = maps.counters(id);
        if (c.packets != packets || c.drops_horizon != 0)
            throw std::runtime_error("class " + std::to_string(id) + " counted " +
                                     std::to_string(c.packets) + " packets, " +
                                     std::to_string(c.drops_horizon) + " drops; expected " +
                                     std::to_string(packets) + " and 0");
    }
};

// A rule sending IPv4 destination `addr`/`plen` (host order, host bits clear) to `class_id`.
shaper_rule dst_rule(uint32_t pref, uint32_t class_id, uint32_t addr, uint8_t plen)
{
    shaper_rule r{};
    r.pref = pref;
    r.class_id = class_id;
    r.fields = SHAPER_RULE_F_DST;
    r.family = 4;
    r.dst_plen = plen;
    const uint32_t be = htonl(addr);
    std::memcpy(r.dst, &be, 4);
    return r;
}

// Stores the rules slot by slot, then compiles and publishes them once (the bulk path; add_rule
// recompiles the whole set per rule).
void install_rules(const ShaperMaps& maps, const std::vector<shaper_rule>& rules)
{
    for (uint32_t slot = 0; slot < rules.size(); slot++)
        maps.write_rule(slot, rules[slot]);
    publish_rules(maps);
}

void ShaperUnderTest::install_dst_rules(const std::vector<std::pair<uint32_t, uint32_t>>& to_class) const
{
    std::vector<shaper_rule> rules;
    for (const auto& [addr, class_id] : to_class)
        rules.push_back(dst_rule(uint32_t(rules.size() + 1), class_id, addr, 32));
    install_rules(maps, rules);
}

// The destination of the veth part's i-th address: 10.201.(i/250).(i%250+1).
uint32_t veth_dst(uint32_t i)
{
    return 0x0ac90000u | ((i / 250) << 8) | (i % 250 + 1);
}

struct Row {
    std::string key, label, short_label;
    std::optional<double> ns;  // nullopt: n/a
    std::vector<double> runs_ns;
    std::string method, note;
};

json row_json(const Row& r)
{
    json j = {{"key", r.key}, {"label", r.label}, {"short", r.short_label}};
    j["ns_per_packet"] = r.ns ? json(*r.ns) : json(nullptr);
    j["runs_ns"] = r.runs_ns;
    j["method"] = r.method;
    if (!r.note.empty())
        j["note"] = r.note;
    return j;
}

// Whether shaper.bpf.o has a map whose name contains `word` (the hook for rows whose product
// feature is still being written: the bench notices when it lands).
bool shaper_has_map(const std::string& obj_path, const std::string& word)
{
    bpf_object* obj = bpf_object__open_file(obj_path.c_str(), nullptr);
    if (!obj)
        return false;
    bool found = false;
    bpf_map* map;
    bpf_object__for_each_map(map, obj)
        if (std::string(bpf_map__name(map)).find(word) != std::string::npos)
            found = true;
    bpf_object__close(obj);
    return found;
}

[[maybe_unused]] Row not_yet(const std::string& key, const std::string& label, const Options& o,
            const std::string& map_word)
{
    Row r{key, label, label.substr(0, 3), std::nullopt, {}, "", "n/a (not yet implemented)"};
    if (shaper_has_map(o.shaper_obj, map_word))
        r.note = "n/a: shaper.bpf.o now has a '" + map_word +
                 "' map; write this scenario in bench/datapath_bench.cpp";
    return r;
}

std::string read_file(const char* path)
{
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

void pin_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        throw std::runtime_error(std::string("sched_setaffinity: ") + strerror(errno));
}

// Cold against warm class entries, on one program: repeat=1 calls, each preceded by a write of
// the default class (settings) and a sweep of the next 1/1024 of a 64 MiB buffer (one load per
// line). Cold: the default class steps through a random permutation of all classes, so a class's
// entries were last touched `classes` calls ago; since then every other class's entries and the
// whole buffer (twice this host's 32 MiB L3) have been through the caches. Warm: the same calls,
// sweep and settings write included, on one class. Both take the same path (each packet finds
// its class clock idle), so the difference of the medians is what the class's cold entries cost.
struct ColdWarm {
    double cold_ns = 0, warm_ns = 0;
};

ColdWarm cold_vs_warm(const ShaperUnderTest& s, const std::vector<uint8_t>& frame, uint32_t classes,
                      uint32_t calls, uint32_t warm_class)
{
    constexpr size_t kEvict = size_t(64) << 20, kSlices = 1024, kLine = 64;
    std::vector<uint8_t> evict(kEvict, 1);
    volatile uint8_t sink = 0;
    size_t slice = 0;
    auto sweep = [&] {
        const size_t from = slice++ % kSlices * (kEvict / kSlices);
        uint8_t x = 0;
        for (size_t at = from; at < from + kEvict / kSlices; at += kLine)
            x ^= evict[at];
        sink = x;
    };
    std::vector<uint32_t> ids(classes);
    std::iota(ids.begin(), ids.end(), 1u);
    std::mt19937 rng(9);
    std::shuffle(ids.begin(), ids.end(), rng);
    auto one = [&](uint32_t id) {
        s.settings(id, SHAPER_MODE_EDT);
        sweep();
        RunResult r = test_run(s.program.prog_fd(), frame, 1);
        if (!passed(r.retval))
            throw std::runtime_error("cold/warm run: verdict " + std::to_string(int(r.retval)));
        return double(r.duration_ns);
    };
    std::vector<double> cold, warm;
    for (uint32_t i = 0; i < calls; i++) {  // interleaved in blocks: load changes hit both alike
        cold.push_back(one(ids[i % ids.size()]));
        warm.push_back(one(warm_class));
    }
    (void)sink;
    return {median(cold), median(warm)};
}

// ns/packet with one thread per frame, each pinned to its own CPU (the last ones), all started
// at once: per run, the mean over threads of the kernel's mean per packet; median over runs.
std::vector<double> measure_parallel(int prog_fd, const Options& o,
                                     const std::vector<std::vector<uint8_t>>& frames)
{
    const int ncpu = int(sysconf(_SC_NPROCESSORS_ONLN));
    if (int(frames.size()) > ncpu)
        throw std::runtime_error("more threads than CPUs");
    std::vector<double> ns;
    for (int run = -1; run < o.runs; run++) {  // run -1: warm-up
        std::vector<uint32_t> each(frames.size());
        std::atomic<size_t> ready{0};
        std::vector<std::thread> threads;
        for (size_t t = 0; t < frames.size(); t++)
            threads.emplace_back([&, t] {
                pin_cpu(ncpu - 1 - int(t));
                ready++;
                while (ready.load() < frames.size()) {
                }
                RunResult r = test_run(prog_fd, frames[t], run < 0 ? o.repeat / 10 : o.repeat);
                each[t] = passed(r.retval) ? r.duration_ns : 0;
            });
        for (auto& t : threads)
            t.join();
        if (std::count(each.begin(), each.end(), 0u))
            throw std::runtime_error("a parallel run did not pass");
        if (run >= 0)
            ns.push_back(std::accumulate(each.begin(), each.end(), 0.0) / double(each.size()));
    }
    return ns;
}

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
        if (a == "--repeat")
            o.repeat = uint32_t(std::stoul(next()));
        else if (a == "--runs")
            o.runs = std::stoi(next());
        else if (a == "--cold-calls")
            o.cold_calls = uint32_t(std::stoul(next()));
        else if (a == "--classes")
            o.many_classes = uint32_t(std::stoul(next()));
        else if (a == "--max-classes")
            o.max_classes = uint32_t(std::stoul(next()));
        else if (a == "--rules")
            o.rules = uint32_t(std::stoul(next()));
        else if (a == "--cpu")
            o.cpu = std::stoi(next());
        else if (a == "--bpf-dir")
            o.bpf_dir = next();
        else if (a == "--shaper-obj")
            o.shaper_obj = next();
        else if (a == "--json")
            o.json_out = next();
        else if (a == "--only")
            o.only = next();
        else
            throw std::runtime_error("unknown option " + a +
                                     " (--repeat N --runs N --cold-calls N --classes N "
                                     "--max-classes N --rules N --cpu N --bpf-dir D --shaper-obj F --json F --only KEY)");
    }
    if (o.rules < 2 || o.rules > SHAPER_MAX_RULES)
        throw std::runtime_error("--rules must be 2 to " + std::to_string(SHAPER_MAX_RULES));
    if (o.many_classes >= o.max_classes)
        throw std::runtime_error("--classes must be below --max-classes");
    return o;
}

}  // namespace

int main(int argc, char** argv)
try {
    const Options o = parse(argc, argv);
    quiet_libbpf();
    const int cpu = o.cpu >= 0 ? o.cpu : int(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
    pin_cpu(cpu);
    const auto frame = udp_frame();
    const uint64_t expected = total_runs(o);
    std::vector<Row> rows;
    auto add = [&](std::string key, std::string label, std::string short_label,
                   std::vector<double> runs, std::string method, std::string note = "") {
        Row r{std::move(key), std::move(label), std::move(short_label), median(runs),
              std::move(runs), std::move(method), std::move(note)};
        std::fprintf(stderr, "  %-44s %7.1f ns\n", r.label.c_str(), *r.ns);
        rows.push_back(std::move(r));
    };
    const std::string repeat_method = "BPF_PROG_TEST_RUN repeat=" + std::to_string(o.repeat) +
                                      ", median of " + std::to_string(o.runs) + " runs";

    auto wanted = [&](const std::string& key) { return key.rfind(o.only, 0) == 0; };
    auto row_of = [&](const char* key) {
        for (const Row& r : rows)
            if (r.key == key && r.ns)
                return *r.ns;
        return 0.0;
    };
    json scale_cold;

    // (a), (b): the references.
    RefObject empty(o.bpf_dir + "/empty.bpf.o");
    RefObject stamp(o.bpf_dir + "/stamp.bpf.o");
    add("empty", "(a) empty tc program", "(a) empty", measure(empty.prog_fd("bench_empty"), o, frame),
        repeat_method);

    bool uses_helper;
    {
        ShaperUnderTest probe(0);
        uses_helper = probe.program.uses_set_tstamp();
    }
    // The floor is the cheaper stamp, the plain store: sch_fq paces on skb->tstamp whatever its
    // clock type (bench/README.md, "floor"). The helper and the product's choice are beside it.
    add("floor", "(b) floor: clock + skb->tstamp store", "(b) floor",
        measure(stamp.prog_fd("bench_stamp_field"), o, frame), repeat_method,
        "the cheapest correct stamp for sch_fq on every kernel");
    if (uses_helper) {
        add("floor_helper", "(b') clock + bpf_skb_set_tstamp(MONO)", "(b') helper",
            measure(stamp.prog_fd("bench_stamp_helper"), o, frame), repeat_method,
            "marks the stamp a monotonic delivery time (5.18+)");
        add("floor_typed", "(b'') clock + store if marked MONO, else helper", "(b'') typed",
            measure(stamp.prog_fd("bench_stamp_typed"), o, frame), repeat_method,
            "what shaperctl does; a test-run packet is unmarked (like UDP), so this is the helper "
            "path; a TCP packet (marked by TCP since 5.18) takes the store");
    }

    // (c) one class, edt mode (stamps) and police mode (no stamp).
    if (wanted("one_class")) {
        ShaperUnderTest s(0);
        s.add_class(1);
        s.settings(1, SHAPER_MODE_EDT);
        add("one_class", "(c) shaperctl, 1 class (edt)", "(c) 1 class", measure(s.program.prog_fd(), o, frame),
            repeat_method, "class backlogged: clock ahead of now, verdict pass, counters checked");
        s.expect_packets(1, expected);
    }
    if (wanted("one_class_police")) {
        ShaperUnderTest s(0);
        s.add_class(1);
        s.settings(1, SHAPER_MODE_POLICE);
        add("one_class_police", "(c') shaperctl, 1 class (police: no stamp)", "(c') police",
            measure(s.program.prog_fd(), o, frame), repeat_method);
        s.expect_packets(1, expected);
    }

    // (d) 100k classes configured; the default class is one of them.
    std::vector<double> cold, hot1, empty1;
    if (wanted("many_classes")) {
        ShaperUnderTest s(o.max_classes);
        for (uint32_t id = 1; id <= o.many_classes; id++)
            s.add_class(id);
        const uint32_t chosen = o.many_classes * 7 / 10 + 1;
        s.settings(chosen, SHAPER_MODE_EDT);
        add("many_classes", "(d) shaperctl, 1 of " + std::to_string(o.many_classes) + " classes (edt)",
            "(d) 1 of " + std::to_string(o.many_classes / 1000) + "k",
            measure(s.program.prog_fd(), o, frame), repeat_method,
            "max_classes=" + std::to_string(o.max_classes) +
                "; one packet repeated: its class's entries stay hot in cache");
        s.expect_packets(chosen, expected);

        // Cold entries: repeat=1 per call, the default class changed before every call to the
        // next of a random permutation of all classes, so each call touches entries last used
        // ~many_classes calls ago (config 56 B + clock 64 B + per-CPU stats per class, ~18 MB
        // in all: beyond the caches). Compared with the same repeat=1 method on one hot class.
        std::vector<uint32_t> ids(o.many_classes);
        std::iota(ids.begin(), ids.end(), 1u);
        std::mt19937 rng(9);
        std::shuffle(ids.begin(), ids.end(), rng);
        for (uint32_t i = 0; i < o.cold_calls; i++) {
            s.settings(ids[i % ids.size()], SHAPER_MODE_EDT);
            RunResult r = test_run(s.program.prog_fd(), frame, 1);
            if (!passed(r.retval))
                throw std::runtime_error("cold run: verdict " + std::to_string(int(r.retval)));
            cold.push_back(r.duration_ns);
        }
        // The same calls, settings write included, on one class: its entries stay hot. Its
        // clock is reset before each call: every cold class above sees its first packet, on an
        // idle clock, so the hot reference must take the same (idle) path.
        for (uint32_t i = 0; i < o.cold_calls; i++) {
            s.maps.write_clock(chosen, ClassClock{});
            s.settings(chosen, SHAPER_MODE_EDT);
            hot1.push_back(test_run(s.program.prog_fd(), frame, 1).duration_ns);
        }
        for (uint32_t i = 0; i < o.cold_calls / 4; i++) {
            s.settings(chosen, SHAPER_MODE_EDT);
            empty1.push_back(test_run(empty.prog_fd("bench_empty"), frame, 1).duration_ns);
        }
    }
    auto row_ns = [&](const char* key) {
        for (const Row& r : rows)
            if (r.key == key && r.ns)
                return *r.ns;
        if (!o.only.empty())
            return 0.0;  // --only: that row was not measured
        throw std::runtime_error(std::string("no row ") + key);
    };
    const double c_ns = row_ns("one_class");
    const double cold_penalty = median(cold) - median(hot1);
    if (wanted("many_classes")) {
        Row r{"many_classes_cold",
              "(d') shaperctl, " + std::to_string(o.many_classes) + " classes, cold entry each packet",
              "(d') " + std::to_string(o.many_classes / 1000) + "k cold (est.)",
              c_ns + cold_penalty,
              {},
              "estimate: (c) + cold penalty; penalty = median repeat=1 duration over " +
                  std::to_string(o.cold_calls) + " calls cycling a random permutation of the classes (" +
                  std::to_string(median(cold)) + " ns) minus the same on one hot class (" +
                  std::to_string(median(hot1)) + " ns)",
              "repeat=1 durations include ~" + std::to_string(int(median(empty1))) +
                  " ns of harness (empty program, same method)"};
        std::fprintf(stderr, "  %-44s %7.1f ns (cold penalty %+.1f ns)\n", r.label.c_str(), *r.ns,
                     cold_penalty);
        rows.push_back(r);
    }

    // (e) a 4-level hierarchy: leaf 4 under 3 under 2 under 1; packets charged at every level.
    if (wanted("hierarchy4")) {
        ShaperUnderTest s(0);
        s.add_class(1);
        s.add_class(2, 1);
        s.add_class(3, 2);
        s.add_class(4, 3);
        s.settings(4, SHAPER_MODE_EDT);
        add("hierarchy4", "(e) shaperctl, 4-level hierarchy (edt)", "(e) 4 levels",
            measure(s.program.prog_fd(), o, frame), repeat_method, "charged at all 4 levels");
        for (uint32_t id = 1; id <= 4; id++)
            s.expect_packets(id, expected);
    }

    // (e') a class that borrows: rate 1gbit, ceil 10gbit under a 10gbit parent, its clock put 1 s
    // ahead so that every packet asks and is lent (its allotment, the parent's count, the lent
    // sum); beside it the same two levels without a ceil, the path every class had before.
    for (const bool ceil : {false, true}) {
        if (!wanted(ceil ? "borrow" : "two_levels"))
            continue;
        ShaperUnderTest s(0);
        const ClassSpec parent{.id = 1, .rate_bps = 10'000'000'000ull, .horizon_ns = 60 * kSec};
        const ClassSpec child{.id = 2, .rate_bps = 1'000'000'000ull, .ceil_bps = ceil ? 10'000'000'000ull : 0,
                              .parent = 1, .horizon_ns = 60 * kSec};
        for (const ClassSpec& c : {parent, child})
            s.maps.write_class_config(c.id, make_class_config(c, s.maps.max_classes(), 60 * kSec));
        ClassClock clock{};
        clock.tat_ns = monotonic_ns() + kSec;
        s.maps.write_clock(2, clock);
        s.settings(2, SHAPER_MODE_EDT);
        if (ceil)
            add("borrow", "(e') shaperctl, a class borrowing up to its ceil (edt)", "(e') borrowing",
                measure(s.program.prog_fd(), o, frame), repeat_method, "every packet lent, at 2 levels");
        else
            add("two_levels", "(e'') shaperctl, the same 2 levels, no ceil (edt)", "(e'') 2 levels",
                measure(s.program.prog_fd(), o, frame), repeat_method, "backlogged 1 s, charged at 2 levels");
        s.expect_packets(2, expected);
        if (ceil && s.maps.counters(2).borrowed_bytes == 0)
            throw std::runtime_error("the borrowing scenario lent nothing");
    }

    // (f) 10,000 rules of one shape (destination /32, the veth part's addresses over 40 /24s),
    // 1,000 classes; the packet matches rule 5001 (10.201.20.1). One hash lookup.
    if (wanted("rules")) {
        ShaperUnderTest s(0);
        for (uint32_t id = 1; id <= 1000; id++)
            s.add_class(id);
        std::vector<shaper_rule> rules;
        for (uint32_t i = 0; i < o.rules; i++)
            rules.push_back(dst_rule(i + 1, i % 1000 + 1, veth_dst(i), 32));
        install_rules(s.maps, rules);
        s.settings(0, SHAPER_MODE_EDT);  // no default class: only a rule can shape the packet
        const uint32_t match = std::min<uint32_t>(5000, o.rules - 1);
        add("rules", "(f) shaperctl, " + std::to_string(o.rules) + " rules, 1 shape (dst /32), match",
            "(f) rules 1 shape", measure(s.program.prog_fd(), o, udp_frame(veth_dst(match))),
            repeat_method, "1000 classes; the packet matches rule " + std::to_string(match + 1));
        s.expect_packets(match % 1000 + 1, expected);
    }
    // (f') 10,000 rules in 16 shapes (destination /17 to /32), none matching the packet: the
    // search visits every shape, then the default class. The worst case of the tuple search.
    if (wanted("rules_worst")) {
        ShaperUnderTest s(0);
        s.add_class(1);
        std::vector<shaper_rule> rules;
        for (uint32_t i = 0; i < o.rules; i++) {
            const uint8_t plen = uint8_t(17 + i % 16);
            rules.push_back(dst_rule(i + 1, 1, 0x0a000000u | ((i / 16) << (32 - plen)), plen));
        }
        install_rules(s.maps, rules);
        s.settings(1, SHAPER_MODE_EDT);
        add("rules_worst", "(f') shaperctl, " + std::to_string(o.rules) + " rules, 16 shapes, no match",
            "(f') rules 16 shapes", measure(s.program.prog_fd(), o, frame), repeat_method,
            "every shape searched, then the default class");
        s.expect_packets(1, expected);
    }

    // (h) The goal's configuration: 100k classes and 10k rules of mixed kinds in 6 shapes, the
    // packet's rule in the shape searched last. A flow's packets after its first are answered
    // by the classification cache; (h') estimates a flow's first packet (every shape searched).
    if (wanted("mixed")) {
        ShaperUnderTest s(o.max_classes);
        for (uint32_t id = 1; id <= o.many_classes; id++)
            s.add_class(id);
        const uint32_t n = o.rules / 6;  // per kind; the remainder goes to the dst /32 kind
        std::vector<shaper_rule> rules;
        auto next_class = [&] { return uint32_t(rules.size() * 7 % o.many_classes + 1); };
        auto add_rule = [&](shaper_rule r) {
            r.pref = uint32_t(rules.size() + 1);
            r.class_id = next_class();
            rules.push_back(r);
        };
        for (uint32_t i = 0; i < n; i++) {  // source /24s
            shaper_rule r = dst_rule(0, 0, 0, 0);
            r.fields = SHAPER_RULE_F_SRC;
            r.src_plen = 24;
            r.dst_plen = 0;
            const uint32_t be = htonl(0x0b000000u | (i << 8));
            std::memcpy(r.src, &be, 4);
            add_rule(r);
        }
        for (uint32_t i = 0; i < n; i++) {  // udp + one destination port
            shaper_rule r{};
            r.fields = SHAPER_RULE_F_PROTO | SHAPER_RULE_F_DPORT;
            r.proto = 17;
            r.dport_lo = r.dport_hi = uint16_t(10000 + i);
            add_rule(r);
        }
        for (uint32_t i = 0; i < n; i++) {  // tcp + a destination port range
            shaper_rule r{};
            r.fields = SHAPER_RULE_F_PROTO | SHAPER_RULE_F_DPORT;
            r.proto = 6;
            r.dport_lo = uint16_t(30000 + 3 * i);
            r.dport_hi = uint16_t(30000 + 3 * i + 2);
            add_rule(r);
        }
        for (uint32_t i = 0; i < n; i++) {  // fwmark
            shaper_rule r{};
            r.fields = SHAPER_RULE_F_MARK;
            r.mark = i + 1;
            r.mark_mask = 0xffffffffu;
            add_rule(r);
        }
        for (uint32_t i = 0; i < n; i++)  // destination /16s outside 10.201/16
            add_rule(dst_rule(0, 0, 0x0c000000u | (i << 16), 16));
        const uint32_t first_dst32 = uint32_t(rules.size());
        for (uint32_t i = 0; rules.size() < o.rules; i++)  // destination /32s, searched last
            add_rule(dst_rule(0, 0, veth_dst(i), 32));
        install_rules(s.maps, rules);
        s.settings(0, SHAPER_MODE_EDT);
        const uint32_t match_index = first_dst32 + (o.rules - first_dst32) / 2;
        const uint32_t match_dst = veth_dst(match_index - first_dst32);
        const uint32_t match_class = rules[match_index].class_id;
        add("mixed", "(h) shaperctl, " + std::to_string(o.many_classes / 1000) + "k classes + " +
                         std::to_string(o.rules) + " rules in 6 shapes, match",
            "(h) 100k+10k rules", measure(s.program.prog_fd(), o, udp_frame(match_dst)), repeat_method,
            "rules: src /24, udp dport, tcp dport range, mark, dst /16, dst /32 (" +
                std::to_string(rules.size()) + "); the packet matches a dst /32 rule, the last shape "
                "searched; a flow's packets after its first (classification cache)");
        s.expect_packets(match_class, expected);

        // A flow's first packet: repeat=1 calls cycling 16384 flows (source ports) through the
        // 4096-slot cache, against the same calls repeating one flow.
        std::vector<std::vector<uint8_t>> flows;
        for (uint32_t i = 0; i < 16384; i++)
            flows.push_back(udp_frame(match_dst, uint16_t(1024 + i)));
        std::vector<double> miss, hit;
        for (uint32_t i = 0; i < o.cold_calls; i++)
            miss.push_back(test_run(s.program.prog_fd(), flows[i % flows.size()], 1).duration_ns);
        for (uint32_t i = 0; i < o.cold_calls; i++)
            hit.push_back(test_run(s.program.prog_fd(), flows[0], 1).duration_ns);
        const double penalty = median(miss) - median(hit);
        Row r{"mixed_first_packet",
              "(h') the same, a flow's first packet (cache miss)", "(h') first packet (est.)",
              rows.back().ns.value_or(0) + penalty, {},
              "estimate: (h) + miss penalty; penalty = median repeat=1 duration cycling 16384 flows (" +
                  std::to_string(median(miss)) + " ns) minus the same repeating one flow (" +
                  std::to_string(median(hit)) + " ns)"};
        std::fprintf(stderr, "  %-44s %7.1f ns (miss penalty %+.1f ns)\n", r.label.c_str(), *r.ns,
                     penalty);
        rows.push_back(r);

        // (i) The same program, a class whose entries are cold: (h) + the cold penalty, measured
        // with a packet that matches no rule (its classification stays cached) on the default
        // class, set before each call (cold_vs_warm above).
        const ColdWarm cw = cold_vs_warm(s, udp_frame(0x0afa0001), o.many_classes, o.cold_calls,
                                         o.many_classes / 3 + 1);
        const double h_warm = rows[rows.size() - 2].ns.value_or(0);
        scale_cold = {{"cold_median_ns", cw.cold_ns}, {"warm_median_ns", cw.warm_ns},
                      {"penalty_ns", cw.cold_ns - cw.warm_ns}, {"warm_ns", h_warm},
                      {"cold_ns", h_warm + cw.cold_ns - cw.warm_ns},
                      {"ratio", (h_warm + cw.cold_ns - cw.warm_ns) / h_warm}};
        Row c{"mixed_cold_class", "(i) the same, the packet's class cold (evicted)", "(i) cold class (est.)",
              h_warm + cw.cold_ns - cw.warm_ns, {},
              "estimate: (h) + cold penalty; penalty = median repeat=1 duration cycling a random "
              "permutation of the classes with a 64 MiB eviction sweep (" + std::to_string(cw.cold_ns) +
                  " ns) minus the same calls on one class (" + std::to_string(cw.warm_ns) + " ns)"};
        std::fprintf(stderr, "  %-44s %7.1f ns (cold penalty %+.1f ns, x%.2f warm)\n", c.label.c_str(),
                     *c.ns, cw.cold_ns - cw.warm_ns, *c.ns / h_warm);
        rows.push_back(c);
    }

    // (j) Contention: one class charged from one CPU, then from two at once; (k) two classes
    // under one root, one per CPU (the root's clock is shared); (k') two top-level classes, one
    // per CPU (nothing shared: the reference for what two CPUs cost without sharing).
    json contention;
    if (wanted("contention")) {
        ShaperUnderTest s(0);
        s.add_class(1);
        s.add_class(2);
        s.add_class(3, 2);
        s.add_class(4, 2);
        s.add_class(5);
        s.install_dst_rules({{veth_dst(2), 2}, {veth_dst(3), 3}, {veth_dst(4), 4}, {veth_dst(5), 5}});
        s.settings(1, SHAPER_MODE_EDT);
        const auto f1 = udp_frame(veth_dst(1));  // no rule: the default class, 1
        const int fd = s.program.prog_fd();
        add("contention_1cpu", "(j) 1 class, 1 CPU", "(j) 1 CPU", measure_parallel(fd, o, {f1}), repeat_method);
        add("contention_2cpu", "(j') 1 class, 2 CPUs at once", "(j') 2 CPUs",
            measure_parallel(fd, o, {f1, f1}), repeat_method, "mean of the two threads");
        add("contention_2flows", "(j'') 1 class, 2 CPUs, a flow each", "(j'') 2 flows",
            measure_parallel(fd, o, {f1, udp_frame(veth_dst(1), 40001)}), repeat_method,
            "as (j'), each CPU its own flow: the class entry is shared, no flow record is");
        add("contention_root", "(k) 2 classes of 1 root, 2 CPUs", "(k) shared root",
            measure_parallel(fd, o, {udp_frame(veth_dst(3)), udp_frame(veth_dst(4))}), repeat_method,
            "each CPU its own leaf; the root charged by both");
        add("contention_none", "(k') 2 top-level classes, 2 CPUs", "(k') unshared",
            measure_parallel(fd, o, {udp_frame(veth_dst(2)), udp_frame(veth_dst(5))}), repeat_method,
            "nothing shared (class 2 is the root of (k), idle here)");
        contention = {{"one_cpu_ns", row_of("contention_1cpu")}, {"two_cpus_ns", row_of("contention_2cpu")},
                      {"two_flows_ns", row_of("contention_2flows")},
                      {"shared_root_ns", row_of("contention_root")}, {"unshared_ns", row_of("contention_none")},
                      {"ratio_same_class", row_of("contention_2cpu") / row_of("contention_1cpu")},
                      {"ratio_two_flows", row_of("contention_2flows") / row_of("contention_1cpu")},
                      {"ratio_shared_root", row_of("contention_root") / row_of("contention_none")}};
    }

    // (g) AQM on (CoDel on the class's virtual backlog; edt mode), where the product has it.
#ifdef SHAPER_CLASS_AQM
    if (wanted("aqm")) {
        // (g) below target: the (c) class with CoDel on and its target at the 1 s maximum, the
        // clock reset before every call so the backlog a call builds (~0.9 s) stays under it:
        // CoDel checks every packet and never acts (its lock-free path).
        ShaperUnderTest s(0);
        s.add_class(1, 0, true);
        shaper_class_config cfg = *s.maps.class_config(1);
        cfg.aqm_target_ns = kSec;
        s.maps.write_class_config(1, cfg);
        s.settings(1, SHAPER_MODE_EDT);
        add("aqm", "(g) shaperctl, 1 class, AQM on, below target", "(g) AQM idle",
            measure(s.program.prog_fd(), o, frame, false,
                    [&] { s.maps.write_clock(1, ClassClock{}); }),
            repeat_method, "CoDel target 1 s, clock reset before each call: CoDel checks, never acts");
        s.expect_packets(1, expected);
    }
    if (wanted("aqm_acting")) {
        // (g') the (c) class with CoDel's defaults: its backlog soon stands far above target, so
        // CoDel is in its dropping state (per-packet lock; a few packets dropped).
        ShaperUnderTest s(0);
        s.add_class(1, 0, true);
        s.settings(1, SHAPER_MODE_EDT);
        add("aqm_acting", "(g') shaperctl, 1 class, AQM on, standing queue", "(g') AQM acting",
            measure(s.program.prog_fd(), o, frame, true), repeat_method,
            "CoDel defaults; backlog far above target: dropping state");
        const ClassCounters c = s.maps.counters(1);
        if (c.packets + c.drops_aqm != expected)
            throw std::runtime_error("AQM row: " + std::to_string(c.packets) + " packets + " +
                                     std::to_string(c.drops_aqm) + " CoDel drops != " +
                                     std::to_string(expected));
        rows.back().note += "; " + std::to_string(c.drops_aqm) + " of " + std::to_string(expected) +
                            " dropped by CoDel";
    }
#else
    // Hooks: rows for features being written now. Replace not_yet() with a measurement when
    // the product has them (see bench/README.md, "Extending").
    rows.push_back(not_yet("aqm", "(g) shaperctl, AQM on", o, "aqm"));
#endif

    // The goal: the goal's configuration (h), 100k classes and 10k rules, at most 1.5x
    // the clock-and-stamp floor (b). The same bound for one class (c) is reported beside it.
    const double a = row_ns("empty"), b = row_ns("floor");
    auto goal_of = [&](const std::string& name, double measured) -> json {
        if (measured <= 0)
            return nullptr;  // --only: not measured
        return json{
            {"name", name},
            {"measured_ns", measured},
            {"floor_ns", b},
            {"ratio", measured / b},
            {"goal_ratio", 1.5},
            {"met", measured / b <= 1.5},
            {"ratio_net_of_harness", (measured - a) / (b - a)},
        };
    };
    const double h_ns = row_ns("mixed");
    const json goal = goal_of("datapath: " + std::to_string(o.many_classes / 1000) + "k classes + " +
                                  std::to_string(o.rules) + " rules <= 1.5x clock-and-stamp floor",
                              h_ns);
    const json goal_one_class = goal_of("datapath: 1 class <= 1.5x clock-and-stamp floor", c_ns);
    json out;
    utsname u{};
    uname(&u);
    out["env"] = {{"kernel", u.release},
                  {"cpu", cpu},
                  {"bpf_stats_enabled", read_file("/proc/sys/kernel/bpf_stats_enabled")},
                  {"bpf_jit_enable", read_file("/proc/sys/net/core/bpf_jit_enable")},
                  {"shaper_uses_set_tstamp", uses_helper},
                  {"frame_bytes", frame.size()},
                  {"repeat", o.repeat},
                  {"runs", o.runs}};
    out["rows"] = json::array();
    for (const Row& r : rows)
        out["rows"].push_back(row_json(r));
    out["cold"] = {{"calls", o.cold_calls},
                   {"cold_median_ns", median(cold)},
                   {"hot_median_ns", median(hot1)},
                   {"empty_median_ns", median(empty1)},
                   {"penalty_ns", cold_penalty}};
    out["goal"] = goal;
    out["cold_class"] = scale_cold;
    out["contention"] = contention;
    out["goal_one_class"] = goal_one_class;
    const std::string text = out.dump(2);
    if (o.json_out.empty()) {
        std::puts(text.c_str());
    } else {
        std::ofstream f(o.json_out);
        f << text << "\n";
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "datapath_bench: %s\n", e.what());
    return 1;
}
