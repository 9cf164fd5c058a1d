#include "loader/maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <utility>
#include <cerrno>

#include "core/error.h"
#include "loader/map_batch.h"
#include "loader/map_io.h"
#include "loader/program.h"

namespace shaperctl {
namespace {

constexpr uint32_t kSettingsKey = 0;

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
    maps.classes_ = open_pin(pin_dir + "/shaper_classes");
    maps.stats_ = open_pin(pin_dir + "/shaper_class_stats");
    maps.aqm_ = open_pin(pin_dir + "/shaper_class_aqm");
    maps.rules_ = open_pin(pin_dir + "/shaper_rules");
    maps.rule_stats_ = open_pin(pin_dir + "/shaper_rule_stats");
    maps.tuples_ = open_pin(pin_dir + "/shaper_tuples");
    maps.rule_index_ = open_pin(pin_dir + "/shaper_rule_index");
    maps.port_segs_ = open_pin(pin_dir + "/shaper_port_segs");
    maps.read_dimensions();
    return maps;
}

ShaperMaps ShaperMaps::of(const Program& program)
{
    ShaperMaps maps;
    maps.settings_ = Fd(dup(program.settings_fd()));
    maps.config_ = Fd(dup(program.class_config_fd()));
    maps.classes_ = Fd(dup(program.class_entries_fd()));
    maps.stats_ = Fd(dup(program.class_stats_fd()));
    maps.aqm_ = Fd(dup(program.map_fd("shaper_class_aqm")));
    maps.rules_ = Fd(dup(program.map_fd("shaper_rules")));
    maps.rule_stats_ = Fd(dup(program.map_fd("shaper_rule_stats")));
    maps.tuples_ = Fd(dup(program.map_fd("shaper_tuples")));
    maps.rule_index_ = Fd(dup(program.map_fd("shaper_rule_index")));
    maps.port_segs_ = Fd(dup(program.map_fd("shaper_port_segs")));
    maps.read_dimensions();
    return maps;
}

void ShaperMaps::read_dimensions()
{
    max_classes_ = max_entries(config_.get());
    cpus_ = max_classes_ ? max_entries(stats_.get()) / max_classes_ : 0;
}

const MappedArray<shaper_class>& ShaperMaps::entries() const
{
    if (!entries_.mapped())
        entries_ = MappedArray<shaper_class>(classes_.get(), max_classes_, "the class entries");
    return entries_;
}

const MappedArray<shaper_class_stats>& ShaperMaps::counter_slots() const
{
    if (!counters_.mapped())
        counters_ = MappedArray<shaper_class_stats>(stats_.get(), uint64_t(cpus_) * max_classes_,
                                                    "the class counters");
    return counters_;
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
    write_entry_config(id, config);
}

void ShaperMaps::write_entry_config(uint32_t id, const shaper_class_config& config) const
{
    if (id >= max_classes_)
        throw Error("class id " + std::to_string(id) + " is beyond the map's " +
                    std::to_string(max_classes_) + " entries");
    shaper_class& e = entries()[id];
    // A class going away stops being used before anything else changes; one appearing is used
    // only once all of it is written.
    if (!(config.flags & SHAPER_CLASS_PRESENT))
        mapped_store(e.flags, 0u, std::memory_order_release);
    mapped_store(e.ns_per_byte_fp, config.ns_per_byte_fp);
    mapped_store(e.burst_ns, config.burst_ns);
    mapped_store(e.horizon_ns, config.horizon_ns);
    mapped_store(e.aqm_target_ns, config.aqm_target_ns);
    mapped_store(e.aqm_floor_ns, config.aqm_floor_ns);
    mapped_store(e.overhead, config.overhead);
    mapped_store(e.mpu, config.mpu);
    mapped_store(e.parent_id, config.parent_id);
    mapped_store(e.sparse_allowance_ns, config.sparse_allowance_ns);
    mapped_store(e.aqm_interval_ns, config.aqm_interval_ns);
    mapped_store(e.fair_tolerance_pm, config.fair_tolerance_pm);
    mapped_store(e.ceil_ns_per_byte_fp, config.ceil_ns_per_byte_fp);
    mapped_store(e.rate_kbit, uint32_t(std::min<uint64_t>(config.rate_bps / 1000, UINT32_MAX)));
    mapped_store(e.prio, config.prio);
    mapped_store(e.flags, config.flags, std::memory_order_release);
}

void ShaperMaps::change_class(uint32_t id, const shaper_class_config& config) const
{
    const std::optional<shaper_class_config> old = class_config(id);
    // Before the new rate is written: packets charged in between pay the old rate on the
    // rescaled clock, more than the new one asks, never less.
    if (old && config.rate_bps > old->rate_bps) {
        shaper_class& e = entries()[id];
        rescale_ahead(&e.tat_ns, old->rate_bps, config.rate_bps);
        // The fair-share epoch counts class time from this mark: it moves with the clock.
        rescale_ahead(&e.fair_epoch_tat_ns, old->rate_bps, config.rate_bps);
        // Slices taken before hold clock time the rescale moved, and the datapath does not
        // check a slice against the clock per packet (bpf/slice.h): they go here.
        clear_slices(id);
    }
    write_class_config(id, config);
}

void ShaperMaps::erase_class(uint32_t id) const
{
    // Config first: the datapath stops using the class before its clock is cleared.
    write_class_config(id, shaper_class_config{});
    reset_class_state(id);
}

void ShaperMaps::reset_class_state(uint32_t id) const
{
    write_clock(id, ClassClock{});
    const shaper_class_aqm idle{};
    update(aqm_.get(), id, &idle, "class aqm state");
    zero_counters(id);
}

namespace {

// Writes `values` (one per key, in key order) under `keys` in batches.
template <typename Value>
void update_in_batches(int fd, const std::vector<uint32_t>& keys, const std::vector<Value>& values,
                       const char* what)
{
    constexpr size_t kBatch = 4096;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    for (size_t at = 0; at < keys.size(); at += kBatch) {
        uint32_t count = uint32_t(std::min(kBatch, keys.size() - at));
        if (bpf_map_update_batch(fd, keys.data() + at, values.data() + at, &count, &opts))
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
    // can see is idle with zero counters. Many classes: every CPU's counters mapped once.
    if (classes.size() > kWindowedClasses)
        counter_slots();
    for (uint32_t id : ids)
        write_clock(id, ClassClock{});
    update_in_batches(aqm_.get(), ids, std::vector<shaper_class_aqm>(ids.size()), "class aqm state");
    for (uint32_t id : ids)
        zero_counters(id);
    update_in_batches(config_.get(), ids, configs, "classes");
    for (const auto& [id, config] : classes)
        write_entry_config(id, config);
}

std::vector<uint32_t> ShaperMaps::class_ids() const
{
    std::vector<uint32_t> ids;
    for (const auto& [id, config] : class_configs())
        ids.push_back(id);
    return ids;
}

// One class's flags and parent: through the mapping of the entries where a caller made it, else
// by one lookup. Mapping every entry (max_classes of them) and unmapping them again costs a
// command that asks about a class or two (a rule's class, a parent's chain) ~2 ms at 131,072.
std::pair<uint32_t, uint32_t> ShaperMaps::flags_and_parent(uint32_t id) const
{
    if (id == 0 || id >= max_classes_)
        return {0, 0};
    if (entries_.mapped())
        return {mapped_load(entries_[id].flags), mapped_load(entries_[id].parent_id)};
    shaper_class entry;
    lookup(classes_.get(), id, &entry, "the class entry");
    return {entry.flags, entry.parent_id};
}

bool ShaperMaps::has_class(uint32_t id) const
{
    return flags_and_parent(id).first & SHAPER_CLASS_PRESENT;
}

uint32_t ShaperMaps::class_parent(uint32_t id) const
{
    const auto [flags, parent] = flags_and_parent(id);
    return (flags & SHAPER_CLASS_PRESENT) ? parent : 0;
}

std::vector<std::pair<uint32_t, uint32_t>> ShaperMaps::class_parents() const
{
    const MappedArray<shaper_class>& all = entries();
    std::vector<std::pair<uint32_t, uint32_t>> pairs;
    for (uint32_t id = 1; id < max_classes_; id++)
        if (mapped_load(all[id].flags) & SHAPER_CLASS_PRESENT)
            pairs.push_back({id, mapped_load(all[id].parent_id)});
    return pairs;
}

std::vector<std::pair<uint32_t, shaper_class_config>> ShaperMaps::class_configs() const
{
    std::vector<std::pair<uint32_t, shaper_class_config>> configs;
    configs.reserve(max_classes_);  // address space only: pages are touched as classes fill them
    for_each_entry<shaper_class_config>(config_.get(), max_classes_, "the class map",
                                        [&](uint32_t id, const shaper_class_config& c) {
                                            if (id != 0 && (c.flags & SHAPER_CLASS_PRESENT))
                                                configs.push_back({id, c});
                                        });
    return configs;
}

namespace {

// The fields ClassClock and ClassCounters share by name with the class entry and with one CPU's
// counters (bpf/shaper_abi.h): fn(the map's field, ours) for each.
#define SHAPER_CLOCK_FIELDS(f) \
    f(tat_ns) f(sparse_tat_ns) f(fair_epoch_ns) f(fair_epoch_tat_ns) f(fair_flows) f(fair_share_ns) \
    f(fair_epoch) f(fair_epoch_len_ns) f(fair_held_ns) f(fair_share_flows) f(lend_epoch_ns) \
    f(lend_epoch_tat_ns) f(lend_taken_fp) f(lend_count0) f(lend_last) f(lend_lent_ns) f(lend_serial) f(lend_counted) \
    f(borrowing_until_ns) f(lend_count1) f(lend_count2) f(lend_count3) f(lend_idle_ns) \
    f(lend_used_ns) f(lend_used_since_ns) f(lend_use_avg_fp) f(lend_wanting) \
    f(lend_wanting_last)
#define SHAPER_COUNTER_FIELDS(f) \
    f(packets) f(segments) f(bytes) f(clock_carry) f(drops_horizon) f(drops_aqm) f(ecn_marks) \
    f(sparse) f(fair_marks) f(drops_fair) f(fair_holds) f(borrowed_bytes) f(ceil_held)
#define SHAPER_FIELD_PAIR(name) fn(map.name, ours.name);

template <typename Entry, typename Clock, typename F>
void for_each_clock_field(Entry& map, Clock& ours, F fn)
{
    SHAPER_CLOCK_FIELDS(SHAPER_FIELD_PAIR)
}

template <typename Stats, typename F>
void for_each_counter(Stats& map, ClassCounters& ours, F fn)
{
    SHAPER_COUNTER_FIELDS(SHAPER_FIELD_PAIR)
}

}  // namespace

void add_counters(ClassCounters& sum, const shaper_class_stats& one)
{
    for_each_counter(one, sum, [](const auto& counter, uint64_t& total) { total += mapped_load(counter); });
    for (size_t b = 0; b < SHAPER_DELAY_BUCKETS; b++)
        sum.delay.buckets[b] += mapped_load(one.delay_buckets[b]);
    sum.delay.sum_ns += mapped_load(one.delay_sum_ns);
}

ClassClock ShaperMaps::clock(uint32_t id) const
{
    if (id >= max_classes_)
        throw Error("cannot read class clock " + std::to_string(id) + ": beyond the map");
    ClassClock c;
    for_each_clock_field(entries()[id], c, [](const auto& field, auto& out) { out = mapped_load(field); });
    return c;
}

void ShaperMaps::write_clock(uint32_t id, const ClassClock& clock) const
{
    if (id >= max_classes_)
        throw Error("cannot write class clock " + std::to_string(id) + ": beyond the map");
    ClassClock c = clock;
    for_each_clock_field(entries()[id], c, [](auto& field, auto value) { mapped_store(field, value); });
    clear_slices(id);  // taken on the clock as it was (bpf/slice.h)
}

void ShaperMaps::each_cpu_slot(uint32_t id, const std::function<void(shaper_class_stats&)>& fn) const
{
    for (uint32_t cpu = 0; cpu < cpus_; cpu++) {
        const uint64_t at = uint64_t(cpu) * max_classes_ + id;
        if (counters_.mapped()) {
            fn(counters_[at]);
        } else {
            const MappedArray<shaper_class_stats> window(stats_.get(), at, 1, "the class counters",
                                                         PROT_READ | PROT_WRITE);
            fn(window[at]);
        }
    }
}

ClassCounters ShaperMaps::counters(uint32_t id) const
{
    if (id >= max_classes_)
        throw Error("cannot read class counters " + std::to_string(id) + ": beyond the map");
    ClassCounters sum;  // a reader of many classes: every CPU's counters mapped once
    for (uint32_t cpu = 0; cpu < cpus_; cpu++)
        add_counters(sum, counter_slots()[uint64_t(cpu) * max_classes_ + id]);
    return sum;
}

void ShaperMaps::zero_counters(uint32_t id) const
{
    ClassCounters unused;
    each_cpu_slot(id, [&](shaper_class_stats& slot) {
        for_each_counter(slot, unused, [](auto& counter, uint64_t&) { mapped_store(counter, 0); });
        for (auto& bucket : slot.delay_buckets)
            mapped_store(bucket, 0);
        mapped_store(slot.delay_sum_ns, 0);
    });
    clear_slices(id);
}

void ShaperMaps::clear_slices(uint32_t id) const
{
    each_cpu_slot(id, [](shaper_class_stats& slot) {
        mapped_store(slot.slice_end, 0);
        mapped_store(slot.slice_pos, 0);
    });
}

}  // namespace shaperctl
