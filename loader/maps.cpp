#include "loader/maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "loader/error.h"
#include "loader/program.h"
#include "loader/rules.h"

namespace shaperctl {
namespace {

constexpr uint32_t kSettingsKey = 0;

Fd open_pin(const std::string& path)
{
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0)
        throw Error(errno_message("cannot open pinned map " + path, errno));
    return Fd(fd);
}

bpf_map_info map_info(int fd)
{
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len))
        throw Error(errno_message("cannot read map info", errno));
    return info;
}

uint32_t max_entries(int fd)
{
    return map_info(fd).max_entries;
}

void lookup(int fd, uint32_t key, void* value, const char* what)
{
    if (bpf_map_lookup_elem(fd, &key, value))
        throw Error(errno_message(std::string("cannot read ") + what + " " + std::to_string(key),
                                  errno));
}

void update(int fd, uint32_t key, const void* value, const char* what)
{
    if (bpf_map_update_elem(fd, &key, value, BPF_ANY))
        throw Error(errno_message(std::string("cannot write ") + what + " " + std::to_string(key),
                                  errno));
}

// A whole array map in one batched read instead of a syscall per entry; the entries `keep` wants.
template <typename Value, typename Keep>
std::vector<std::pair<uint32_t, Value>> read_array(int fd, uint32_t entries, const char* what,
                                                   Keep keep)
{
    std::vector<uint32_t> keys(entries);
    std::vector<Value> values(entries);
    uint32_t count = entries, out_batch = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_lookup_batch(fd, nullptr, &out_batch, keys.data(), values.data(), &count, &opts) &&
        errno != ENOENT)
        throw Error(errno_message(std::string("cannot read ") + what, errno));
    std::vector<std::pair<uint32_t, Value>> kept;
    for (uint32_t i = 0; i < count; i++)
        if (keep(keys[i], values[i]))
            kept.push_back({keys[i], values[i]});
    return kept;
}

// The page of an mmapable array that holds one entry, mapped shared: atomics on it meet the
// datapath's atomics on the same memory.
class MappedEntry {
public:
    MappedEntry(int fd, uint64_t offset, const char* what)
    {
        const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
        page_ = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset / page * page));
        if (page_ == MAP_FAILED)
            throw Error(errno_message(std::string("cannot map ") + what, errno));
        size_ = page;
        entry_ = static_cast<char*>(page_) + offset % page;
    }
    MappedEntry(const MappedEntry&) = delete;
    MappedEntry& operator=(const MappedEntry&) = delete;
    ~MappedEntry() { munmap(page_, size_); }

    template <typename T>
    T* as() const { return reinterpret_cast<T*>(entry_); }

private:
    void* page_ = nullptr;
    uint64_t size_ = 0;
    char* entry_ = nullptr;
};

// Moves a clock value ahead of now to now + (value - now) * old_rate / new_rate, by
// compare-and-swap against the datapath's atomic adds: none is lost.
void rescale_ahead(__u64* value, uint64_t old_rate, uint64_t new_rate)
{
    std::atomic_ref<__u64> word(*value);
    __u64 seen = word.load();
    for (;;) {
        const uint64_t now = monotonic_ns();
        if (seen <= now)
            return;
        const uint64_t ahead = uint64_t((unsigned __int128)(seen - now) * old_rate / new_rate);
        if (word.compare_exchange_weak(seen, now + ahead))
            return;
    }
}

}  // namespace

uint64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

ShaperMaps ShaperMaps::open_pinned(const std::string& pin_dir)
{
    ShaperMaps maps;
    maps.settings_ = open_pin(pin_dir + "/shaper_settings");
    maps.config_ = open_pin(pin_dir + "/shaper_class_config");
    maps.clock_ = open_pin(pin_dir + "/shaper_class_clock");
    maps.stats_ = open_pin(pin_dir + "/shaper_class_stats");
    maps.aqm_ = open_pin(pin_dir + "/shaper_class_aqm");
    maps.rules_ = open_pin(pin_dir + "/shaper_rules");
    maps.rule_stats_ = open_pin(pin_dir + "/shaper_rule_stats");
    maps.tuples_ = open_pin(pin_dir + "/shaper_tuples");
    maps.rule_index_ = open_pin(pin_dir + "/shaper_rule_index");
    maps.port_segs_ = open_pin(pin_dir + "/shaper_port_segs");
    maps.max_classes_ = max_entries(maps.config_.get());
    return maps;
}

ShaperMaps ShaperMaps::of(const Program& program)
{
    ShaperMaps maps;
    maps.settings_ = Fd(dup(program.settings_fd()));
    maps.config_ = Fd(dup(program.class_config_fd()));
    maps.clock_ = Fd(dup(program.class_clock_fd()));
    maps.stats_ = Fd(dup(program.class_stats_fd()));
    maps.aqm_ = Fd(dup(program.map_fd("shaper_class_aqm")));
    maps.rules_ = Fd(dup(program.map_fd("shaper_rules")));
    maps.rule_stats_ = Fd(dup(program.map_fd("shaper_rule_stats")));
    maps.tuples_ = Fd(dup(program.map_fd("shaper_tuples")));
    maps.rule_index_ = Fd(dup(program.map_fd("shaper_rule_index")));
    maps.port_segs_ = Fd(dup(program.map_fd("shaper_port_segs")));
    maps.max_classes_ = max_entries(maps.config_.get());
    return maps;
}

shaper_settings ShaperMaps::settings() const
{
    shaper_settings settings{};
    lookup(settings_.get(), kSettingsKey, &settings, "settings");
    return settings;
}

void ShaperMaps::set_settings(const shaper_settings& settings) const
{
    update(settings_.get(), kSettingsKey, &settings, "settings");
}

std::optional<shaper_class_config> ShaperMaps::class_config(uint32_t id) const
{
    if (id == 0 || id >= max_classes_)
        return std::nullopt;
    shaper_class_config config{};
    lookup(config_.get(), id, &config, "class");
    if (!(config.flags & SHAPER_CLASS_PRESENT))
        return std::nullopt;
    return config;
}

void ShaperMaps::write_class_config(uint32_t id, const shaper_class_config& config) const
{
    update(config_.get(), id, &config, "class");
}

void ShaperMaps::change_class(uint32_t id, const shaper_class_config& config) const
{
    const std::optional<shaper_class_config> old = class_config(id);
    // Before the new rate is written: packets charged in between pay the old rate on the
    // rescaled clock, more than the new one asks, never less.
    if (old && config.rate_bps > old->rate_bps) {
        if (!(map_info(clock_.get()).map_flags & BPF_F_MMAPABLE))
            throw Error("the device was attached by a shaperctl with an older map format: save it "
                        "with `shaperctl dump`, detach it, then attach (or apply) again");
        MappedEntry entry(clock_.get(), uint64_t(id) * sizeof(shaper_class_clock), "the class clocks");
        auto* clock = entry.as<shaper_class_clock>();
        rescale_ahead(&clock->tat_ns, old->rate_bps, config.rate_bps);
        // The fair-share epoch counts class time from this mark: it moves with the clock.
        rescale_ahead(&clock->fair_epoch_tat_ns, old->rate_bps, config.rate_bps);
    }
    write_class_config(id, config);
}

void ShaperMaps::erase_class(uint32_t id) const
{
    // Config first: the datapath stops using the class before its clock is cleared.
    const shaper_class_config no_config{};
    update(config_.get(), id, &no_config, "class");
    reset_class_state(id);
}

void ShaperMaps::reset_class_state(uint32_t id) const
{
    write_clock(id, shaper_class_clock{});
    const shaper_class_aqm idle{};
    update(aqm_.get(), id, &idle, "class aqm state");
    std::vector<shaper_class_stats> zero(libbpf_num_possible_cpus());
    update(stats_.get(), id, zero.data(), "class counters");
}

namespace {

// Writes `values` (per_key values per key, in key order) under `keys` in batches.
template <typename Value>
void update_in_batches(int fd, const std::vector<uint32_t>& keys, const std::vector<Value>& values,
                       size_t per_key, const char* what)
{
    constexpr size_t kBatch = 4096;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    for (size_t at = 0; at < keys.size(); at += kBatch) {
        uint32_t count = uint32_t(std::min(kBatch, keys.size() - at));
        if (bpf_map_update_batch(fd, keys.data() + at, values.data() + at * per_key, &count, &opts))
            throw Error(errno_message(std::string("cannot write ") + what, errno));
    }
}

}  // namespace

void ShaperMaps::add_classes(const std::vector<std::pair<uint32_t, shaper_class_config>>& classes) const
{
    std::vector<uint32_t> ids;
    std::vector<shaper_class_config> configs;
    for (const auto& [id, config] : classes) {
        ids.push_back(id);
        configs.push_back(config);
    }
    // State before config, as reset_class_state then write_class_config: a class the datapath
    // can see is idle with zero counters.
    update_in_batches(clock_.get(), ids, std::vector<shaper_class_clock>(ids.size()), 1, "class clocks");
    update_in_batches(aqm_.get(), ids, std::vector<shaper_class_aqm>(ids.size()), 1, "class aqm state");
    const size_t cpus = size_t(libbpf_num_possible_cpus());
    for (size_t at = 0; at < ids.size(); at += 4096) {  // per-CPU values: bounded buffers
        const std::vector<uint32_t> chunk(ids.begin() + at, ids.begin() + std::min(ids.size(), at + 4096));
        update_in_batches(stats_.get(), chunk, std::vector<shaper_class_stats>(chunk.size() * cpus), cpus,
                          "class counters");
    }
    update_in_batches(config_.get(), ids, configs, 1, "classes");
}

std::vector<uint32_t> ShaperMaps::class_ids() const
{
    std::vector<uint32_t> ids;
    for (const auto& [id, config] : class_configs())
        ids.push_back(id);
    return ids;
}

std::vector<std::pair<uint32_t, shaper_class_config>> ShaperMaps::class_configs() const
{
    return read_array<shaper_class_config>(config_.get(), max_classes_, "the class map",
                                           [](uint32_t id, const shaper_class_config& c) {
                                               return id != 0 && (c.flags & SHAPER_CLASS_PRESENT);
                                           });
}

shaper_class_clock ShaperMaps::clock(uint32_t id) const
{
    shaper_class_clock clock{};
    lookup(clock_.get(), id, &clock, "class clock");
    return clock;
}

void ShaperMaps::write_clock(uint32_t id, const shaper_class_clock& clock) const
{
    update(clock_.get(), id, &clock, "class clock");
}

ClassCounters ShaperMaps::counters(uint32_t id) const
{
    std::vector<shaper_class_stats> per_cpu(libbpf_num_possible_cpus());
    lookup(stats_.get(), id, per_cpu.data(), "class counters");
    ClassCounters sum;
    for (const auto& s : per_cpu) {
        sum.packets += s.packets;
        sum.segments += s.segments;
        sum.bytes += s.bytes;
        sum.drops_horizon += s.drops_horizon;
        sum.drops_aqm += s.drops_aqm;
        sum.ecn_marks += s.ecn_marks;
        sum.sparse += s.sparse;
        sum.fair_marks += s.fair_marks;
        sum.drops_fair += s.drops_fair;
        sum.clock_carry += s.clock_carry;
    }
    return sum;
}

std::vector<std::pair<uint32_t, shaper_rule>> ShaperMaps::rules() const
{
    return read_array<shaper_rule>(rules_.get(), SHAPER_MAX_RULES, "the rules",
                                   [](uint32_t, const shaper_rule& r) { return r.pref != 0; });
}

void ShaperMaps::write_rule(uint32_t slot, const shaper_rule& rule) const
{
    std::vector<shaper_rule_stats> zero(libbpf_num_possible_cpus());
    update(rule_stats_.get(), slot, zero.data(), "rule counters");
    update(rules_.get(), slot, &rule, "rule slot");
}

shaper_rule_stats ShaperMaps::rule_counters(uint32_t slot) const
{
    std::vector<shaper_rule_stats> per_cpu(libbpf_num_possible_cpus());
    lookup(rule_stats_.get(), slot, per_cpu.data(), "rule counters");
    shaper_rule_stats sum{};
    for (const auto& s : per_cpu) {
        sum.packets += s.packets;
        sum.bytes += s.bytes;
    }
    return sum;
}

void ShaperMaps::install_rules(const CompiledRules& compiled, uint32_t gen) const
{
    // 1. Forget what this generation held before (the datapath reads the other one).
    std::vector<shaper_rule_key> stale;
    shaper_rule_key key{}, next{};
    const shaper_rule_key* prev = nullptr;
    while (bpf_map_get_next_key(rule_index_.get(), prev, &next) == 0) {
        if (next.tuple / SHAPER_MAX_TUPLES == gen)
            stale.push_back(next);
        key = next;
        prev = &key;
    }
    for (const auto& k : stale)
        bpf_map_delete_elem(rule_index_.get(), &k);

    // 2. The index entries, the port segments, then the tuples that make them reachable.
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (!compiled.entries.empty()) {
        std::vector<shaper_rule_key> keys;
        std::vector<shaper_rule_match> values;
        for (const auto& [k, v] : compiled.entries) {
            keys.push_back(k);
            values.push_back(v);
        }
        uint32_t count = uint32_t(keys.size());
        if (bpf_map_update_batch(rule_index_.get(), keys.data(), values.data(), &count, &opts))
            throw Error(errno_message("cannot write the rule index", errno));
    }
    std::vector<uint32_t> seg_keys(SHAPER_PORT_SEGS_PER_GEN);
    std::vector<uint16_t> seg_values(SHAPER_PORT_SEGS_PER_GEN);
    for (uint32_t i = 0; i < SHAPER_PORT_SEGS_PER_GEN; i++) {
        seg_keys[i] = gen * SHAPER_PORT_SEGS_PER_GEN + i;
        seg_values[i] = i < 65536 ? compiled.sport_segs[i] : compiled.dport_segs[i - 65536];
    }
    uint32_t count = SHAPER_PORT_SEGS_PER_GEN;
    if (bpf_map_update_batch(port_segs_.get(), seg_keys.data(), seg_values.data(), &count, &opts))
        throw Error(errno_message("cannot write the port segments", errno));
    for (uint32_t t = 0; t < SHAPER_MAX_TUPLES; t++) {
        shaper_tuple tuple = t < compiled.tuples.size() ? compiled.tuples[t] : shaper_tuple{};
        update(tuples_.get(), gen * SHAPER_MAX_TUPLES + t, &tuple, "rule tuple");
    }
}

}  // namespace shaperctl
