#include "loader/rule_record.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace shaperctl {
namespace {

constexpr char kMagic[8] = {'S', 'H', 'R', 'U', 'L', 'E', 'S', '1'};

struct Header {
    char magic[8];
    uint32_t gen, serial;
    uint32_t tuple_bytes, entry_bytes;  // the layout's sizes: another build's record is not read
    uint32_t tuples, entries;
};

std::string path_of(const std::string& dir, uint32_t gen)
{
    return dir + "/rules-gen" + std::to_string(gen);
}

template <typename T>
void append(std::string& out, const T* items, size_t n)
{
    out.append(reinterpret_cast<const char*>(items), n * sizeof(T));
}

}  // namespace

std::optional<CompiledRules> load_generation_record(const std::string& dir, uint32_t gen, uint32_t serial)
{
    std::ifstream in(path_of(dir, gen), std::ios::binary);
    if (!in)
        return std::nullopt;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Header h{};
    if (bytes.size() < sizeof h)
        return std::nullopt;
    std::memcpy(&h, bytes.data(), sizeof h);
    using Entry = std::pair<shaper_rule_key, shaper_rule_match>;
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) || h.gen != gen || h.serial != serial ||
        h.tuple_bytes != sizeof(shaper_tuple) || h.entry_bytes != sizeof(Entry) || h.tuples > SHAPER_MAX_TUPLES ||
        bytes.size() != sizeof h + h.tuples * sizeof(shaper_tuple) + uint64_t(h.entries) * sizeof(Entry) +
                            2 * 65536 * sizeof(uint16_t))
        return std::nullopt;
    CompiledRules set;
    const char* at = bytes.data() + sizeof h;
    set.tuples.resize(h.tuples);
    std::memcpy(set.tuples.data(), at, h.tuples * sizeof(shaper_tuple));
    at += h.tuples * sizeof(shaper_tuple);
    set.entries.resize(h.entries);
    std::memcpy(static_cast<void*>(set.entries.data()), at, h.entries * sizeof(Entry));
    at += h.entries * sizeof(Entry);
    set.sport_segs.resize(65536);
    set.dport_segs.resize(65536);
    std::memcpy(set.sport_segs.data(), at, 65536 * sizeof(uint16_t));
    std::memcpy(set.dport_segs.data(), at + 65536 * sizeof(uint16_t), 65536 * sizeof(uint16_t));
    return set;
}

void remove_generation_record(const std::string& dir, uint32_t gen)
{
    unlink(path_of(dir, gen).c_str());
}

void save_generation_record(const std::string& dir, uint32_t gen, uint32_t serial, const CompiledRules& set)
{
    using Entry = std::pair<shaper_rule_key, shaper_rule_match>;
    if (set.sport_segs.size() != 65536 || set.dport_segs.size() != 65536)
        return;
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.gen = gen;
    h.serial = serial;
    h.tuple_bytes = sizeof(shaper_tuple);
    h.entry_bytes = sizeof(Entry);
    h.tuples = uint32_t(set.tuples.size());
    h.entries = uint32_t(set.entries.size());
    std::string out;
    append(out, &h, 1);
    append(out, set.tuples.data(), set.tuples.size());
    append(out, set.entries.data(), set.entries.size());
    append(out, set.sport_segs.data(), set.sport_segs.size());
    append(out, set.dport_segs.data(), set.dport_segs.size());
    const std::string path = path_of(dir, gen), tmp = path + ".tmp";
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file.write(out.data(), std::streamsize(out.size()));
    file.close();
    if (!file || std::rename(tmp.c_str(), path.c_str()))
        unlink(tmp.c_str());  // no record: the next publish into this generation writes it whole
}

}  // namespace shaperctl
