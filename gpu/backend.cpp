#include "gpu/backend.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <utility>

namespace etude::gpu {

const char* to_string(BackendKind kind) {
    switch (kind) {
        case BackendKind::Cpu:
            return "cpu";
        case BackendKind::OpenCl:
            return "opencl";
        case BackendKind::Cuda:
            return "cuda";
        case BackendKind::Vulkan:
            return "vulkan";
    }
    return "?";
}

const char* to_string(Activation a) {
    switch (a) {
        case Activation::LeakyRelu:
            return "leaky_relu";
        case Activation::Gelu:
            return "gelu";
        case Activation::Tanh:
            return "tanh";
        case Activation::Exp:
            return "exp";
        case Activation::Sin:
            return "sin";
        case Activation::Cos:
            return "cos";
    }
    return "?";
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
        if (owner_ && handle_) owner_->release(handle_, bytes_, tag_);
        owner_ = std::exchange(o.owner_, nullptr);
        handle_ = std::exchange(o.handle_, nullptr);
        bytes_ = std::exchange(o.bytes_, 0);
        tag_ = o.tag_;
    }
    return *this;
}

DeviceBuffer::~DeviceBuffer() {
    if (owner_ && handle_) owner_->release(handle_, bytes_, tag_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
        if (owner_ && data_) owner_->free_pinned(data_);
        owner_ = std::exchange(o.owner_, nullptr);
        data_ = std::exchange(o.data_, nullptr);
        floats_ = std::exchange(o.floats_, 0);
    }
    return *this;
}

PinnedBuffer::~PinnedBuffer() {
    if (owner_ && data_) owner_->free_pinned(data_);
}

DeviceBuffer Backend::allocate(std::size_t floats, const char* tag) {
    const std::size_t bytes = std::max<std::size_t>(floats, 1) * sizeof(float);
    return DeviceBuffer(this, raw_allocate(bytes), bytes, tag);
}

std::optional<GpuFault> parse_gpu_fault(const std::string& text) {
    GpuFault f;
    char kind[16] = {};
    double delay = 0;
    int count = 0, after = 0;
    const int n = std::sscanf(text.c_str(), "%15[a-z]:%d:%lf:%d", kind, &count, &delay, &after);
    if (n < 2 || count <= 0) return std::nullopt;
    const std::string k = kind;
    if (k == "kernel")
        f.kind = GpuFault::KernelFailure;
    else if (k == "oom")
        f.kind = GpuFault::OutOfMemory;
    else if (k == "late")
        f.kind = GpuFault::Late;
    else
        return std::nullopt;
    f.count = count;
    f.delay_ms = n >= 3 ? delay : 0;
    f.after = n >= 4 ? after : 0;
    return f;
}

double Backend::consume_fault(const char* op) {
    if (!fault_armed_.load(std::memory_order_acquire)) return 0.0;
    std::unique_lock lock(state_mu_);
    if (fault_.kind == GpuFault::None || fault_.count <= 0) return 0.0;
    if (fault_.after > 0) {
        --fault_.after;
        return 0.0;
    }
    --fault_.count;
    const auto kind = fault_.kind;
    if (fault_.count == 0) {
        fault_.kind = GpuFault::None;
        fault_armed_.store(false, std::memory_order_release);
    }
    switch (kind) {
        case GpuFault::KernelFailure:
            health_ = Health::Failed;  // mark_failed(), with the lock already held
            last_error_ = std::string("injected failure in ") + op;
            throw DeviceError(std::string("injected kernel failure in ") + op);
        case GpuFault::OutOfMemory:
            throw OutOfMemory(std::string("injected out-of-memory in ") + op);
        case GpuFault::Late:
            return fault_.delay_ms;
        case GpuFault::None:
            break;
    }
    return 0.0;
}

}  // namespace etude::gpu
