// Reading a BPF array map a chunk of entries per system call (bpf_map_lookup_batch), so a reader
// of a big map holds one chunk at a time, not the whole map, and pays one call per chunk, not
// one per entry: for the maps that cannot be mapped (class configs, rules, per-CPU rule hits).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shaperctl {

// The values of keys [first, first + count) of the array map `fd` into `values` (count values of
// `value_bytes` each; a per-CPU map's value is every possible CPU's, see per_cpu_value_bytes);
// fewer at the map's end. Returns how many were read. Error naming `what` when the kernel refuses.
uint32_t read_map_range(int fd, uint32_t first, uint32_t count, size_t value_bytes, void* values, const char* what);

// The size of one key's value in a per-CPU map whose per-CPU value is `bytes`.
size_t per_cpu_value_bytes(size_t bytes);

constexpr uint32_t kMapChunk = 4096;  // keys per read: 768 KiB of 192-byte values

// each(key, value) for every entry of the array map `fd` of `entries` entries, in key order.
template <typename Value, typename Each>
void for_each_entry(int fd, uint32_t entries, const char* what, Each&& each)
{
    std::vector<Value> values(kMapChunk);
    for (uint32_t first = 0; first < entries; first += kMapChunk) {
        const uint32_t n = read_map_range(fd, first, std::min(kMapChunk, entries - first), sizeof(Value),
                                          values.data(), what);
        for (uint32_t i = 0; i < n; i++)
            each(first + i, values[i]);
    }
}

}  // namespace shaperctl
