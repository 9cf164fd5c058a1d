// The pinned maps of one device: settings, class records and entries (config + clocks), counters.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/class_counters.h"
#include "loader/fd.h"
#include "loader/mapped_array.h"
#include "shaper_abi.h"

namespace shaperctl {

class Program;
struct CompiledRules;

// The datapath's clock: CLOCK_MONOTONIC, which bpf_ktime_get_ns reads.
uint64_t monotonic_ns();

// A class's clocks as the control plane reads and writes them (in struct shaper_class, the
// entry the datapath reads: tat_ns on its first cache line, the rest on its second).
struct ClassClock {
    uint64_t tat_ns = 0, sparse_tat_ns = 0;
    uint64_t fair_epoch_ns = 0, fair_epoch_tat_ns = 0, fair_flows = 0, fair_share_ns = 0;
    uint32_t fair_epoch = 0;
    uint64_t fair_epoch_len_ns = 0, fair_held_ns = 0;
    uint32_t fair_share_flows = 0;
    // Lending (bpf/borrow.h): a lender's epoch and figures, and as a child its last count.
    uint64_t lend_epoch_ns = 0, lend_epoch_tat_ns = 0, lend_taken_fp = 0, lend_count0 = 0, lend_last = 0,
             lend_lent_ns = 0;
    uint32_t lend_serial = 0, lend_counted = 0;
    uint64_t borrowing_until_ns = 0;
    uint64_t lend_count1 = 0, lend_count2 = 0, lend_count3 = 0, lend_idle_ns = 0;
    // As a sharing child, its use of the parent; as a lender, the sharers that want more.
    uint64_t lend_used_ns = 0, lend_used_since_ns = 0;
    uint32_t lend_use_avg_fp = 0, lend_wanting = 0, lend_wanting_last = 0;
};

// Adds one CPU's counters of a class to `sum`.
void add_counters(ClassCounters& sum, const shaper_class_stats& one);

// A configured class as status reads it.
struct ClassState {
    uint32_t id = 0;
    shaper_class_config config{};
    ClassCounters counters;  // summed over CPUs
    uint64_t tat_ns = 0;     // the class clock
    uint64_t read_ns = 0;    // CLOCK_MONOTONIC when its chunk was read (a reader's rates and
                             // backlogs count from it, not from when the reading began)
    uint64_t lend_epoch_ns = 0, lend_taken_fp = 0;  // as a lender (bpf/borrow.h)
};

class ShaperMaps {
public:
    static ShaperMaps open_pinned(const std::string& pin_dir);  // Error when missing
    static ShaperMaps of(const Program& program);

    uint32_t max_classes() const { return max_classes_; }

    shaper_settings settings() const;
    void set_settings(const shaper_settings& settings) const;

    std::optional<shaper_class_config> class_config(uint32_t id) const;  // nullopt: no class
    void write_class_config(uint32_t id, const shaper_class_config& config) const;
    // An existing class's new config. A higher rate first rescales the class's backlog to it
    // (tat' = now + (tat - now) * old / new), so the bytes already charged leave at the new rate;
    // a lower one leaves the clock as it is.
    void change_class(uint32_t id, const shaper_class_config& config) const;
    void erase_class(uint32_t id) const;  // config, clock and counters zeroed
    void reset_class_state(uint32_t id) const;  // clock idle, CoDel at rest, counters zero
    // New classes in the order given: each one's state reset, then its config, in batched
    // writes (a few syscalls per 4,096 classes instead of four per class).
    void add_classes(const std::vector<std::pair<uint32_t, shaper_class_config>>& classes) const;
    std::vector<uint32_t> class_ids() const;  // configured classes, ascending
    // Which ids are classes and their parents, as the datapath's entries hold them: read
    // through the entries' mapping, no syscall (a one-item change's checks; every write path
    // writes the record and the entry together). class_parents() is every (id, parent),
    // ascending, from one pass over the mapping (a few ms at 100,000 classes).
    bool has_class(uint32_t id) const;
    uint32_t class_parent(uint32_t id) const;  // 0 for a top-level class or none
    std::vector<std::pair<uint32_t, uint32_t>> class_parents() const;
    std::vector<std::pair<uint32_t, shaper_class_config>> class_configs() const;  // batched reads

    ClassClock clock(uint32_t id) const;
    void write_clock(uint32_t id, const ClassClock& clock) const;

    // Summed over CPUs. Id 0 holds the unclassified packets.
    ClassCounters counters(uint32_t id) const;

    // Every configured class with its counters and clock, in id order, copied by batched reads
    // a chunk of ids at a time, without mapping the maps (map_batch.h): what status reads.
    void for_each_class_state(const std::function<void(const ClassState&)>& each) const;
    ClassCounters unclassified() const;  // counters(0), read the same way

    // Rules as stored, by slot (free slots, pref 0, left out).
    std::vector<std::pair<uint32_t, shaper_rule>> rules() const;
    void write_rule(uint32_t slot, const shaper_rule& rule) const;  // counters zeroed first
    shaper_rule_stats rule_counters(uint32_t slot) const;
    std::vector<shaper_rule_stats> all_rule_counters() const;  // by slot, in batched reads
    // Replaces generation `gen` of the compiled rule maps (the datapath reads the other one).
    // `held`: what that generation holds (loader/rule_record.h), so only the difference is
    // written; null: it is written whole.
    void install_rules(const CompiledRules& compiled, uint32_t gen, const CompiledRules* held = nullptr) const;

private:
    ShaperMaps() = default;
    // The datapath's copy of a config in the class's entry (flags last, or first when it goes).
    void write_entry_config(uint32_t id, const shaper_class_config& config) const;
    void read_dimensions();  // max_classes_, cpus_
    std::pair<uint32_t, uint32_t> flags_and_parent(uint32_t id) const;
    // The class entries and counters, mapped whole on first use (not from two threads at once):
    // status, which maps a chunk at a time, never maps them whole, so their pages (all mapped
    // at mmap(), 12 MB per CPU at 131,072 classes) never count as its memory.
    const MappedArray<shaper_class>& entries() const;
    const MappedArray<shaper_class_stats>& counter_slots() const;
    // fn(one CPU's counters of class id) for each CPU: through the whole mapping once it is made
    // (a change of many classes, kWindowedClasses and more), else through a window of a page
    // per CPU, so that a one-item change costs a few calls per CPU, not a mapping of every
    // CPU's counters of every class (cpus * max_classes * 256 bytes: 2 GB at 64 CPUs).
    void each_cpu_slot(uint32_t id, const std::function<void(shaper_class_stats&)>& fn) const;
    static constexpr size_t kWindowedClasses = 16;
    void clear_slices(uint32_t id) const;  // every CPU's slice of the class clock (bpf/slice.h)
    void zero_counters(uint32_t id) const;

    Fd settings_, config_, classes_, stats_, aqm_;
    Fd rules_, rule_stats_, tuples_, rule_index_, port_segs_;
    uint32_t max_classes_ = 0, cpus_ = 0;
    mutable MappedArray<shaper_class> entries_;
    mutable MappedArray<shaper_class_stats> counters_;  // cpu * max_classes_ + id
};

}  // namespace shaperctl
