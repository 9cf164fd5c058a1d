// An mmapable BPF array mapped shared into this process: the control plane's atomics on it meet
// the datapath's on the same memory, and reading it takes no system call.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "loader/error.h"

namespace shaperctl {

template <typename T>
class MappedArray {
public:
    MappedArray() = default;
    MappedArray(int fd, uint64_t entries, const char* what) : bytes_(entries * sizeof(T))
    {
        void* map = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED)
            throw Error(errno_message(std::string("cannot map ") + what, errno));
        base_ = static_cast<T*>(map);
    }
    MappedArray(MappedArray&& other) noexcept
        : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0))
    {
    }
    MappedArray& operator=(MappedArray&& other) noexcept
    {
        if (this != &other) {
            unmap();
            base_ = std::exchange(other.base_, nullptr);
            bytes_ = std::exchange(other.bytes_, 0);
        }
        return *this;
    }
    MappedArray(const MappedArray&) = delete;
    MappedArray& operator=(const MappedArray&) = delete;
    ~MappedArray() { unmap(); }

    T& operator[](uint64_t i) const { return base_[i]; }
    bool mapped() const { return base_ != nullptr; }

private:
    void unmap()
    {
        if (base_)
            munmap(base_, bytes_);
    }
    T* base_ = nullptr;
    size_t bytes_ = 0;
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
