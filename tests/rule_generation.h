// Test helper: one generation of the datapath's rule set (bpf/classify.h) as text to compare:
// its tuples, its index entries in order (each key's generation taken out, so that a set in
// one generation reads as the same set in the other) and, where given, its port segments.
#pragma once

#include <bpf/bpf.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "loader/map_batch.h"
#include "shaper_abi.h"

namespace shaperctl::test {

inline std::string hex_bytes(const void* p, size_t n)
{
    std::string out;
    char b[3];
    for (size_t i = 0; i < n; i++) {
        snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(p)[i]);
        out += b;
    }
    return out;
}

// The maps' descriptors: shaper_tuples, shaper_rule_index and shaper_port_segs (-1: left out).
inline std::string rule_generation_text(int tuples, int index, int port_segs, uint32_t gen)
{
    std::string out;
    for (uint32_t t = 0; t < SHAPER_MAX_TUPLES; t++) {
        const uint32_t key = gen * SHAPER_MAX_TUPLES + t;
        shaper_tuple tuple{};
        if (bpf_map_lookup_elem(tuples, &key, &tuple))
            return "cannot read tuple " + std::to_string(key);
        out += "tuple " + std::to_string(t) + " " + hex_bytes(&tuple, sizeof tuple) + "\n";
    }
    std::set<std::string> entries;
    shaper_rule_key key{}, next{};
    const shaper_rule_key* prev = nullptr;
    while (bpf_map_get_next_key(index, prev, &next) == 0) {
        shaper_rule_match match{};
        if (next.tuple / SHAPER_MAX_TUPLES == gen && bpf_map_lookup_elem(index, &next, &match) == 0) {
            shaper_rule_key k = next;
            k.tuple %= SHAPER_MAX_TUPLES;
            entries.insert(hex_bytes(&k, sizeof k) + " -> " + hex_bytes(&match, sizeof match));
        }
        key = next;
        prev = &key;
    }
    for (const std::string& e : entries)
        out += "entry " + e + "\n";
    if (port_segs >= 0) {
        std::vector<uint16_t> segs(SHAPER_PORT_SEGS_PER_GEN);
        read_map_range(port_segs, gen * SHAPER_PORT_SEGS_PER_GEN, SHAPER_PORT_SEGS_PER_GEN, sizeof(uint16_t),
                       segs.data(), "port segments");
        out += "segs " + hex_bytes(segs.data(), segs.size() * sizeof(uint16_t)) + "\n";
    }
    return out;
}

}  // namespace shaperctl::test
