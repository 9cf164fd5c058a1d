// ShaperMaps' rule maps: the rules by slot, their counters, and the compiled generations the
// datapath classifies with.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
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
    rules.reserve(SHAPER_MAX_RULES);  // address space only: pages are touched as rules fill them
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
    auto same = [](const auto& a, const auto& b) { return std::memcmp(&a, &b, sizeof a) == 0; };
    auto key_order = [](const auto& a, const auto& b) { return std::memcmp(&a.first, &b.first, sizeof a.first) < 0; };
    // Both sets' entries are in key order (compile_rules sorts them; a record keeps that order):
    // what differs is found in one walk through both. A record out of order is not trusted.
    if (held && !(std::is_sorted(held->entries.begin(), held->entries.end(), key_order) &&
                  std::is_sorted(compiled.entries.begin(), compiled.entries.end(), key_order)))
        held = nullptr;

    // 1. Forget what this generation held and the new set has not (the datapath reads the other
    //    generation), and gather what the new set has that differs: where the generation's
    //    contents are known, only those entries; else every entry of the generation.
    std::vector<shaper_rule_key> stale, keys;
    std::vector<shaper_rule_match> values;
    if (held) {
        auto was = held->entries.begin();
        for (const auto& [k, v] : compiled.entries) {
            for (; was != held->entries.end() && std::memcmp(&was->first, &k, sizeof k) < 0; ++was)
                stale.push_back(was->first);
            if (was != held->entries.end() && same(was->first, k)) {
                const bool kept = same(was->second, v);
                ++was;
                if (kept)
                    continue;
            }
            keys.push_back(k);
            values.push_back(v);
        }
        for (; was != held->entries.end(); ++was)
            stale.push_back(was->first);
    } else {
        for (const shaper_rule_key& k : index_keys(rule_index_.get()))
            if (k.tuple / SHAPER_MAX_TUPLES == gen)
                stale.push_back(k);
        for (const auto& [k, v] : compiled.entries) {
            keys.push_back(k);
            values.push_back(v);
        }
    }
    uint32_t deleted = uint32_t(stale.size());
    if (!stale.empty() && bpf_map_delete_batch(rule_index_.get(), stale.data(), &deleted, &opts))
        for (size_t i = deleted; i < stale.size(); i++)  // the rest one by one
            bpf_map_delete_elem(rule_index_.get(), &stale[i]);

    // 2. The index entries, the port segments, then the tuples that make them reachable.
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
        if (!held || !same(tuple, was))
            update(tuples_.get(), gen * SHAPER_MAX_TUPLES + t, &tuple, "rule tuple");
    }
}

}  // namespace shaperctl
