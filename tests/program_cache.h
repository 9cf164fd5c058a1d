// Test helper: the datapath loaded once per set of load options for the whole test binary, and
// emptied for each test. A load is the verifier's whole run over the program: a fraction of a
// second on the host, about 4 s in the stock-kernel VM under TCG, where some 150 tests load it.
// Emptied means every map the program writes back to zeros (arrays, per-CPU arrays) or to no
// keys (hashes): what a fresh load holds, so no test sees another's classes, clocks, flows,
// rules or records.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "loader/program.h"

namespace shaperctl::test {

inline void clear_map(int fd)
{
    bpf_map_info info{};
    uint32_t len = sizeof info;
    ASSERT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0) << strerror(errno);
    if (info.type == BPF_MAP_TYPE_HASH) {
        std::vector<uint8_t> key(info.key_size), next(info.key_size);
        while (bpf_map_get_next_key(fd, nullptr, next.data()) == 0)
            ASSERT_EQ(bpf_map_delete_elem(fd, next.data()), 0) << info.name << ": " << strerror(errno);
        return;
    }
    ASSERT_TRUE(info.type == BPF_MAP_TYPE_ARRAY || info.type == BPF_MAP_TYPE_PERCPU_ARRAY)
        << info.name << ": a map type the tests' reset does not know (" << info.type << ")";
    // A per-CPU value is one 8-byte-aligned copy per possible CPU.
    const size_t value = info.type == BPF_MAP_TYPE_PERCPU_ARRAY
                             ? (info.value_size + 7) / 8 * 8 * size_t(libbpf_num_possible_cpus())
                             : info.value_size;
    std::vector<uint32_t> keys(info.max_entries);
    for (uint32_t i = 0; i < info.max_entries; i++)
        keys[i] = i;
    const std::vector<uint8_t> zeros(value * info.max_entries);
    uint32_t count = info.max_entries;
    ASSERT_EQ(bpf_map_update_batch(fd, keys.data(), zeros.data(), &count, nullptr), 0)
        << info.name << ": " << strerror(errno);
    ASSERT_EQ(count, info.max_entries) << info.name;
}

// The program for `options`, loaded on first use and kept for the binary's life, its maps
// emptied now.
inline Program& fresh_program(const ProgramOptions& options)
{
    EXPECT_EQ(options.pin_dir, "") << "a pinned program is the test's own to load";
    using Key = std::tuple<std::string, uint32_t, uint32_t, bool, std::string, int, bool, bool, bool>;
    static std::map<Key, std::unique_ptr<Program>> loaded;
    const Key key{options.pin_dir, options.max_classes, options.l2_header_len, options.ingress,
                  options.ack_pace_pin, options.ack_pace_fd, options.every_packet_local,
                  options.every_packet_forwarded, options.every_packet_kept};
    auto& program = loaded[key];
    if (!program)
        program = std::make_unique<Program>(Program::load(options));
    program->for_each_writable_map([](int fd) { clear_map(fd); });
    return *program;
}

}  // namespace shaperctl::test
