// ShaperMaps' rule maps: the rules by slot, their counters, and the compiled generations the
// datapath classifies with.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <map>
#include <string>

#include "core/error.h"
#include "loader/map_batch.h"
#include "loader/map_io.h"
#include "loader/maps.h"
#include "loader/rules.h"

namespace shaperctl {
namespace {

// One rule's counters, summed over the CPUs' values (16 bytes each: no padding between them).
shaper_rule_stats sum_over_cpus(const shaper_rule_stats* per_cpu, uint32_t cpus)
{
    shaper_rule_stats sum{};
    for (uint32_t cpu = 0; cpu < cpus; cpu++) {
        sum.packets += per_cpu[cpu].packets;
        sum.bytes += per_cpu[cpu].bytes;
    }
    return sum;
}

// Every key of the rule index (both generations), a chunk of buckets per call: a walk by
// get_next_key costs a call per key, 20,000 at 10,000 rules, most of a one-rule change.
std::vector<shaper_rule_key> index_keys(int fd)
{
    std::vector<shaper_rule_key> keys, chunk(kMapChunk);
    std::vector<shaper_rule_match> values(kMapChunk);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    uint64_t in = 0, out = 0;  // the kernel's cursor over buckets
    for (bool first = true;; first = false) {
        uint32_t n = kMapChunk;
        const int err = bpf_map_lookup_batch(fd, first ? nullptr : &in, &out, chunk.data(), values.data(), &n, &opts);
        if (err && errno != ENOENT)
            throw Error(errno_message("cannot read the rule index", errno));
        keys.insert(keys.end(), chunk.begin(), chunk.begin() + n);
        if (err)
            return keys;  // ENOENT: the last bucket was read
        in = out;
    }
}

}  // namespace

std::vector<std::pair<uint32_t, shaper_rule>> ShaperMaps::rules() const
{
    std::vector<std::pair<uint32_t, shaper_rule>> rules;
    for_each_entry<shaper_rule>(rules_.get(), SHAPER_MAX_RULES, "the rules", [&](uint32_t slot, const shaper_rule& r) {
        if (r.pref != 0)
            rules.push_back({slot, r});
    });
    return rules;
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
    return sum_over_cpus(per_cpu.data(), uint32_t(per_cpu.size()));
}

std::vector<shaper_rule_stats> ShaperMaps::all_rule_counters() const
{
    const uint32_t cpus = uint32_t(libbpf_num_possible_cpus());
    std::vector<shaper_rule_stats> per_cpu(uint64_t(SHAPER_MAX_RULES) * cpus);  // 16 bytes: no padding
    const uint32_t n = read_map_range(rule_stats_.get(), 0, SHAPER_MAX_RULES, per_cpu_value_bytes(sizeof(shaper_rule_stats)),
                                      per_cpu.data(), "rule counters");
    std::vector<shaper_rule_stats> sums(SHAPER_MAX_RULES);
    for (uint32_t slot = 0; slot < n; slot++)
        sums[slot] = sum_over_cpus(per_cpu.data() + uint64_t(slot) * cpus, cpus);
    return sums;
}

void ShaperMaps::install_rules(const CompiledRules& compiled, uint32_t gen, const CompiledRules* held) const
{
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    using Bytes = std::string;  // a key's or a value's bytes, to compare and order them
    auto bytes = [](const auto& v) { return Bytes(reinterpret_cast<const char*>(&v), sizeof v); };

    // 1. Forget what this generation held and the new set has not (the datapath reads the other
    //    generation): where it is known, those entries; else every entry of the generation.
    std::vector<shaper_rule_key> stale;
    std::map<Bytes, Bytes> had;  // key -> value, where known
    if (held) {
        for (const auto& [k, v] : held->entries)
            had.emplace(bytes(k), bytes(v));
        std::map<Bytes, bool> kept;
        for (const auto& [k, v] : compiled.entries)
            kept.emplace(bytes(k), true);
        for (const auto& [k, v] : held->entries)
            if (!kept.count(bytes(k)))
                stale.push_back(k);
    } else {
        for (const shaper_rule_key& k : index_keys(rule_index_.get()))
            if (k.tuple / SHAPER_MAX_TUPLES == gen)
                stale.push_back(k);
    }
    uint32_t deleted = uint32_t(stale.size());
    if (!stale.empty() && bpf_map_delete_batch(rule_index_.get(), stale.data(), &deleted, &opts))
        for (size_t i = deleted; i < stale.size(); i++)  // the rest one by one
            bpf_map_delete_elem(rule_index_.get(), &stale[i]);

    // 2. The index entries, the port segments, then the tuples that make them reachable: those
    //    that differ from what the generation holds, where that is known.
    std::vector<shaper_rule_key> keys;
    std::vector<shaper_rule_match> values;
    for (const auto& [k, v] : compiled.entries) {
        const auto was = had.find(bytes(k));
        if (held && was != had.end() && was->second == bytes(v))
            continue;
        keys.push_back(k);
        values.push_back(v);
    }
    uint32_t count = uint32_t(keys.size());
    if (count && bpf_map_update_batch(rule_index_.get(), keys.data(), values.data(), &count, &opts))
        throw Error(errno_message("cannot write the rule index", errno));
    std::vector<uint32_t> seg_keys;
    std::vector<uint16_t> seg_values;
    for (uint32_t i = 0; i < SHAPER_PORT_SEGS_PER_GEN; i++) {
        const bool sport = i < 65536;
        const uint16_t seg = sport ? compiled.sport_segs[i] : compiled.dport_segs[i - 65536];
        if (held && seg == (sport ? held->sport_segs[i] : held->dport_segs[i - 65536]))
            continue;
        seg_keys.push_back(gen * SHAPER_PORT_SEGS_PER_GEN + i);
        seg_values.push_back(seg);
    }
    count = uint32_t(seg_keys.size());
    if (count && bpf_map_update_batch(port_segs_.get(), seg_keys.data(), seg_values.data(), &count, &opts))
        throw Error(errno_message("cannot write the port segments", errno));
    for (uint32_t t = 0; t < SHAPER_MAX_TUPLES; t++) {
        const shaper_tuple tuple = t < compiled.tuples.size() ? compiled.tuples[t] : shaper_tuple{};
        const shaper_tuple was = held && t < held->tuples.size() ? held->tuples[t] : shaper_tuple{};
        if (!held || bytes(tuple) != bytes(was))
            update(tuples_.get(), gen * SHAPER_MAX_TUPLES + t, &tuple, "rule tuple");
    }
}

}  // namespace shaperctl
