// An mmapable BPF array mapped shared into this process: the control plane's atomics on it meet
// the datapath's on the same memory, and reading it takes no system call.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"

namespace shaperctl {

template <typename T>
class MappedArray {
public:
    MappedArray() = default;
    MappedArray(int fd, uint64_t entries, const char* what) : MappedArray(fd, 0, entries, what, PROT_READ | PROT_WRITE) {}
    // Entries [first, first + entries) only, for reading: a window onto a big map, whose pages
    // count as this process's memory for as long as they are mapped.
    MappedArray(int fd, uint64_t first, uint64_t entries, const char* what, int prot = PROT_READ) : first_(first)
    {
        const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
        const uint64_t start = first * sizeof(T) / page * page;
        skew_ = first * sizeof(T) - start;
        bytes_ = skew_ + entries * sizeof(T);
        void* map = mmap(nullptr, bytes_, prot, MAP_SHARED, fd, off_t(start));
        if (map == MAP_FAILED)
            throw Error(errno_message(std::string("cannot map ") + what, errno));
        map_ = map;
    }
    MappedArray(MappedArray&& other) noexcept { *this = std::move(other); }
    MappedArray& operator=(MappedArray&& other) noexcept
    {
        if (this != &other) {
            unmap();
            map_ = std::exchange(other.map_, nullptr);
            bytes_ = std::exchange(other.bytes_, 0);
            skew_ = std::exchange(other.skew_, 0);
            first_ = std::exchange(other.first_, 0);
        }
        return *this;
    }
    MappedArray(const MappedArray&) = delete;
    MappedArray& operator=(const MappedArray&) = delete;
    ~MappedArray() { unmap(); }

    // Entry i of the map (first <= i < first + entries).
    T& operator[](uint64_t i) const
    {
        return reinterpret_cast<T*>(static_cast<char*>(map_) + skew_)[i - first_];
    }
    bool mapped() const { return map_ != nullptr; }

private:
    void unmap()
    {
        if (map_)
            munmap(map_, bytes_);
    }
    void* map_ = nullptr;
    size_t bytes_ = 0, skew_ = 0;
    uint64_t first_ = 0;
};

// One field of a mapped entry, read or written whole while the datapath may write it.
template <typename T>
T mapped_load(const T& field)
{
    return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

template <typename T, typename V>
void mapped_store(T& field, V value, std::memory_order order = std::memory_order_relaxed)
{
    std::atomic_ref<T>(field).store(T(value), order);
}

}  // namespace shaperctl
