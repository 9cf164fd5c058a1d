#include "loader/map_batch.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <string>

#include "core/error.h"

namespace shaperctl {

uint32_t read_map_range(int fd, uint32_t first, uint32_t count, size_t value_bytes, void* values, const char* what)
{
    std::vector<uint32_t> keys(count);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    uint32_t done = 0;
    while (done < count) {
        // The kernel reads from the key after `in` (from the first key without one) and hands
        // back the last key it read.
        uint32_t in = first + done - 1, out = 0, n = count - done;
        const int err = bpf_map_lookup_batch(fd, first + done ? &in : nullptr, &out, keys.data() + done,
                                             static_cast<char*>(values) + done * value_bytes, &n, &opts);
        if (err && errno != ENOENT)
            throw Error(errno_message(std::string("cannot read ") + what, errno));
        done += n;
        if (err || n == 0)
            break;  // the map's end
    }
    return done;
}

size_t per_cpu_value_bytes(size_t bytes)
{
    return (bytes + 7) / 8 * 8 * size_t(libbpf_num_possible_cpus());
}

}  // namespace shaperctl
