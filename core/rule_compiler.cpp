#include "core/rule_compiler.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "core/error.h"

namespace shaperctl {
namespace {

// What makes two rules share a tuple.
auto shape_of(const shaper_rule& r)
{
    return std::make_tuple(r.fields, r.family, r.src_plen, r.dst_plen,
                           (r.fields & SHAPER_RULE_F_MARK) ? r.mark_mask : 0u,
                           (r.fields & SHAPER_RULE_F_CGROUP) ? r.cgroup_level : 0u);
}

bool key_less(const shaper_rule_key& a, const shaper_rule_key& b)
{
    return std::memcmp(&a, &b, sizeof a) < 0;
}

// Port space cut at every range's ends: a port's segment id is the piece it falls in.
struct PortSegments {
    std::vector<uint32_t> cuts;  // sorted starts of pieces, cuts[0] == 0

    explicit PortSegments(const std::vector<std::pair<uint16_t, uint16_t>>& ranges)
    {
        cuts.push_back(0);
        for (auto [lo, hi] : ranges) {
            cuts.push_back(lo);
            cuts.push_back(uint32_t(hi) + 1);
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        while (!cuts.empty() && cuts.back() > 65535)
            cuts.pop_back();
    }
    uint16_t segment(uint32_t port) const
    {
        return uint16_t(std::upper_bound(cuts.begin(), cuts.end(), port) - cuts.begin());
    }
    std::vector<uint16_t> table() const  // segment(p) for every port, in one sweep
    {
        std::vector<uint16_t> t(65536);
        for (size_t i = 0; i < cuts.size(); i++) {
            const uint32_t end = i + 1 < cuts.size() ? cuts[i + 1] : 65536;
            std::fill(t.begin() + cuts[i], t.begin() + end, uint16_t(i + 1));
        }
        return t;
    }
};

// What bpf/classify.h does to a packet's key for this tuple.
void mask_key(shaper_rule_key& key, const shaper_tuple& tuple, uint32_t gen, uint32_t index)
{
    const uint64_t cgroup = key.cgroup;
    auto* k = reinterpret_cast<uint8_t*>(&key);
    const auto* m = reinterpret_cast<const uint8_t*>(&tuple.mask);
    for (size_t i = 0; i < sizeof key; i++)
        k[i] &= m[i];
    key.tuple = uint8_t(gen * SHAPER_MAX_TUPLES + index);
    key.cgroup = (tuple.fields & SHAPER_RULE_F_CGROUP) ? cgroup : 0;
}

}  // namespace

std::array<uint8_t, 16> prefix_mask(unsigned plen)
{
    std::array<uint8_t, 16> mask{};
    for (unsigned i = 0; i < 16 && plen; i++) {
        unsigned bits = std::min(plen, 8u);
        mask[i] = uint8_t(0xff << (8 - bits));
        plen -= bits;
    }
    return mask;
}

void validate_rule(const shaper_rule& r)
{
    const std::string who = "rule " + std::to_string(r.pref) + ": ";
    if (r.pref == 0 || r.pref == SHAPER_PREF_NONE)
        throw Error(who + "pref must be 1 to 4294967294");
    if (r.fields == 0)
        throw Error(who + "matches on nothing (use set-default for a device-wide class)");
    if (r.class_id == 0)
        throw Error(who + "has no class");
    const unsigned max_plen = r.family == 4 ? 32 : 128;
    if ((r.fields & (SHAPER_RULE_F_SRC | SHAPER_RULE_F_DST)) && r.family != 4 && r.family != 6)
        throw Error(who + "addresses need a family");
    if (r.src_plen > max_plen || r.dst_plen > max_plen)
        throw Error(who + "prefix length beyond the address");
    if ((r.fields & SHAPER_RULE_F_SPORT) && r.sport_lo > r.sport_hi)
        throw Error(who + "source port range is reversed");
    if ((r.fields & SHAPER_RULE_F_DPORT) && r.dport_lo > r.dport_hi)
        throw Error(who + "destination port range is reversed");
    if ((r.fields & SHAPER_RULE_F_MARK) && (r.mark & ~r.mark_mask))
        throw Error(who + "mark value has bits outside its mask");
    if ((r.fields & SHAPER_RULE_F_DSCP) && r.dscp > 63)
        throw Error(who + "dscp is 0 to 63");
    if ((r.fields & SHAPER_RULE_F_VLAN) && (r.vlan == 0 || r.vlan > 4094))
        throw Error(who + "vlan is 1 to 4094");
}

CompiledRules compile_rules(const std::vector<shaper_rule>& rules,
                            const std::vector<uint32_t>& slots, uint32_t gen)
{
    CompiledRules out;
    std::vector<std::pair<uint16_t, uint16_t>> sranges, dranges;
    for (const auto& r : rules) {
        if (r.fields & SHAPER_RULE_F_SPORT)
            sranges.push_back({r.sport_lo, r.sport_hi});
        if (r.fields & SHAPER_RULE_F_DPORT)
            dranges.push_back({r.dport_lo, r.dport_hi});
    }
    const PortSegments ssegs(sranges), dsegs(dranges);
    out.sport_segs = ssegs.table();
    out.dport_segs = dsegs.table();

    // Tuples: one per shape, ordered by the best pref among their rules.
    std::map<decltype(shape_of(rules[0])), uint32_t> best_pref;
    for (const auto& r : rules) {
        auto [it, fresh] = best_pref.emplace(shape_of(r), r.pref);
        if (!fresh)
            it->second = std::min(it->second, r.pref);
    }
    if (best_pref.size() > SHAPER_MAX_TUPLES)
        throw Error("the rules have " + std::to_string(best_pref.size()) +
                    " different shapes (fields, prefix lengths, mark masks, cgroup levels); at most " +
                    std::to_string(SHAPER_MAX_TUPLES) + " are supported");
    std::vector<std::pair<uint32_t, decltype(shape_of(rules[0]))>> order;
    for (const auto& [shape, pref] : best_pref)
        order.push_back({pref, shape});
    std::sort(order.begin(), order.end());

    std::map<decltype(shape_of(rules[0])), uint32_t> tuple_index;
    for (size_t i = 0; i < order.size(); i++) {
        const auto& [pref, shape] = order[i];
        const auto& [fields, family, src_plen, dst_plen, mark_mask, cgroup_level] = shape;
        shaper_tuple t{};
        t.present = 1;
        t.fields = fields;
        t.min_pref = pref;
        t.cgroup_level = cgroup_level;
        shaper_rule_key& m = t.mask;
        if (fields & (SHAPER_RULE_F_SRC | SHAPER_RULE_F_DST))
            m.family = 0xff;
        auto sm = prefix_mask((fields & SHAPER_RULE_F_SRC) ? src_plen : 0);
        auto dm = prefix_mask((fields & SHAPER_RULE_F_DST) ? dst_plen : 0);
        std::memcpy(m.src, sm.data(), 16);
        std::memcpy(m.dst, dm.data(), 16);
        m.proto = (fields & SHAPER_RULE_F_PROTO) ? 0xff : 0;
        m.sport_seg = (fields & SHAPER_RULE_F_SPORT) ? 0xffff : 0;
        m.dport_seg = (fields & SHAPER_RULE_F_DPORT) ? 0xffff : 0;
        m.mark = mark_mask;
        m.priority = (fields & SHAPER_RULE_F_PRIORITY) ? 0xffffffffu : 0;
        m.dscp = (fields & SHAPER_RULE_F_DSCP) ? 0xff : 0;
        m.vlan = (fields & SHAPER_RULE_F_VLAN) ? 0xffff : 0;
        out.tuples.push_back(t);
        tuple_index[shape] = uint32_t(i);
    }

    // Index entries: each rule under every port segment its ranges cover. Where two rules of a
    // tuple share a key, only the lower pref can ever win: keep it. Gathered in a vector, then
    // sorted by key with the lowest pref first and the rest of each key dropped (a tree of
    // 10,000 nodes compared by memcmp was most of a one-rule change); compacted whenever it
    // outgrows twice the map, so the count refused is the distinct keys' as before.
    std::vector<std::pair<shaper_rule_key, shaper_rule_match>> index;
    const size_t max_entries = SHAPER_MAX_RULE_ENTRIES / 2;
    auto compact = [&index] {
        std::sort(index.begin(), index.end(), [](const auto& a, const auto& b) {
            const int c = std::memcmp(&a.first, &b.first, sizeof a.first);
            return c < 0 || (c == 0 && a.second.pref < b.second.pref);
        });
        index.erase(std::unique(index.begin(), index.end(),
                                [](const auto& a, const auto& b) { return !key_less(a.first, b.first); }),
                    index.end());
    };
    auto too_many = [&] {
        return Error("the rules' port ranges expand to more than " + std::to_string(max_entries) + " index entries");
    };
    index.reserve(rules.size());
    for (size_t n = 0; n < rules.size(); n++) {
        const shaper_rule& r = rules[n];
        const uint32_t t = tuple_index[shape_of(r)];
        const shaper_tuple& tuple = out.tuples[t];
        // The rule's values in a packet's key, masked as the datapath masks packets.
        shaper_rule_key key{};
        key.family = r.family;
        std::memcpy(key.src, r.src, 16);
        std::memcpy(key.dst, r.dst, 16);
        key.proto = r.proto;
        key.mark = r.mark;
        key.priority = r.priority;
        key.dscp = r.dscp;
        key.vlan = r.vlan;
        key.cgroup = (r.fields & SHAPER_RULE_F_CGROUP) ? r.cgroup_id : 0;
        const bool sp = r.fields & SHAPER_RULE_F_SPORT, dp = r.fields & SHAPER_RULE_F_DPORT;
        const uint16_t s_first = sp ? ssegs.segment(r.sport_lo) : 0, s_last = sp ? ssegs.segment(r.sport_hi) : 0;
        const uint16_t d_first = dp ? dsegs.segment(r.dport_lo) : 0, d_last = dp ? dsegs.segment(r.dport_hi) : 0;
        for (uint32_t s = s_first; s <= s_last; s++) {
            for (uint32_t d = d_first; d <= d_last; d++) {
                key.sport_seg = uint16_t(s);
                key.dport_seg = uint16_t(d);
                mask_key(key, tuple, gen, t);
                index.push_back({key, shaper_rule_match{r.pref, r.class_id, slots[n], 0}});
                if (index.size() > 2 * max_entries) {
                    compact();
                    if (index.size() > max_entries)
                        throw too_many();
                }
            }
        }
    }
    compact();
    if (index.size() > max_entries)
        throw too_many();
    out.entries = std::move(index);
    return out;
}

CompiledRules place_rules(CompiledRules set, uint32_t gen, const std::map<uint32_t, uint32_t>& slot_of)
{
    // Placeholder slot n is the set's n-th pref: where `slot_of` has the set's prefs, its n-th
    // entry, found without a search (checked against the pref all the same).
    const std::vector<std::pair<uint32_t, uint32_t>> nth(slot_of.begin(), slot_of.end());
    for (auto& [key, match] : set.entries) {
        key.tuple = uint8_t(gen * SHAPER_MAX_TUPLES + key.tuple);
        const bool placed = match.slot < nth.size() && nth[match.slot].first == match.pref;
        match.slot = placed ? nth[match.slot].second : slot_of.at(match.pref);
    }
    return set;
}

}  // namespace shaperctl
