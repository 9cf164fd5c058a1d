#include "loader/rule_record.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
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
bool read_items(std::istream& in, std::vector<T>& items)
{
    return bool(in.read(reinterpret_cast<char*>(items.data()), std::streamsize(items.size() * sizeof(T))));
}

template <typename T>
void write_items(std::ostream& out, const T* items, size_t n)
{
    out.write(reinterpret_cast<const char*>(items), std::streamsize(n * sizeof(T)));
}

}  // namespace

std::optional<CompiledRules> load_generation_record(const std::string& dir, uint32_t gen, uint32_t serial)
{
    // Read straight into the set's parts (a megabyte at 10,000 rules), checked against the size.
    std::ifstream in(path_of(dir, gen), std::ios::binary | std::ios::ate);
    if (!in)
        return std::nullopt;
    const std::streamoff size = in.tellg();
    in.seekg(0);
    Header h{};
    using Entry = std::pair<shaper_rule_key, shaper_rule_match>;
    if (!in.read(reinterpret_cast<char*>(&h), sizeof h) || std::memcmp(h.magic, kMagic, sizeof kMagic) ||
        h.gen != gen || h.serial != serial || h.tuple_bytes != sizeof(shaper_tuple) || h.entry_bytes != sizeof(Entry) ||
        h.tuples > SHAPER_MAX_TUPLES ||
        uint64_t(size) != sizeof h + h.tuples * sizeof(shaper_tuple) + uint64_t(h.entries) * sizeof(Entry) +
                              2 * 65536 * sizeof(uint16_t))
        return std::nullopt;
    CompiledRules set;
    set.tuples.resize(h.tuples);
    set.entries.resize(h.entries);
    set.sport_segs.resize(65536);
    set.dport_segs.resize(65536);
    if (!read_items(in, set.tuples) || !read_items(in, set.entries) || !read_items(in, set.sport_segs) ||
        !read_items(in, set.dport_segs))
        return std::nullopt;
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
    const std::string path = path_of(dir, gen), tmp = path + ".tmp";
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    write_items(file, &h, 1);
    write_items(file, set.tuples.data(), set.tuples.size());
    write_items(file, set.entries.data(), set.entries.size());
    write_items(file, set.sport_segs.data(), set.sport_segs.size());
    write_items(file, set.dport_segs.data(), set.dport_segs.size());
    file.close();
    if (!file || std::rename(tmp.c_str(), path.c_str()))
        unlink(tmp.c_str());  // no record: the next publish into this generation writes it whole
}

}  // namespace shaperctl
