// The parity suite's shared part: every device the registry opens as a
// test parameter, the tolerances per device kind, and the fixture that puts
// the same data on the device under test and on a CPU reference. Included by
// backend_parity_test.cpp (the operations) and backend_faults_test.cpp
// (bad arguments, frees, timings and injected faults); the top of
// backend_parity_test.cpp says how the tolerances were chosen.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/opencl/opencl_devices.h"
#include "gpu/registry.h"
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {
namespace {

using T3 = std::tuple<int, int, int>;
using P2 = std::pair<int, int>;

// A device of the registry, by kind and index among that kind.
struct Target {
    BackendKind kind;
    int index;
};

// Every device the registry lists, plus one placeholder for a kind it found
// none of, so that the absence shows up as a skip with its reason.
std::vector<Target> targets() {
    std::vector<Target> out;
    const auto& devices = DeviceRegistry::instance().devices();
    for (BackendKind kind :
         {BackendKind::Cpu, BackendKind::OpenCl, BackendKind::Cuda, BackendKind::Vulkan}) {
        bool any = false;
        for (const auto& d : devices)
            if (d.kind == kind) {
                out.push_back({kind, d.index});
                any = true;
            }
        if (!any) out.push_back({kind, 0});
    }
    return out;
}

void PrintTo(const Target& t, std::ostream* os) {
    *os << to_string(t.kind) << " device " << t.index;
}

// Opens `t`'s device for a test into `dev`, in a fresh state (healthy, no
// injected fault): a skip when the registry cannot give that device here,
// a failure when it lists it but cannot open it (`dev` then stays empty).
// Called from a fixture's SetUp(), which returns when `dev` is empty.
void open_target(const Target& t, std::shared_ptr<Backend>& dev) {
    const BackendRequest request{to_string(t.kind), t.index};
    try {
        DeviceRegistry::instance().resolve(request);
    } catch (const std::exception& e) {
        GTEST_SKIP() << e.what();
    }
    try {
        dev = DeviceRegistry::instance().open(request);
    } catch (const std::exception& e) {
        // Listed but unusable: a failure, not a skip.
        FAIL() << "opening " << request.kind << " device " << t.index << ": " << e.what();
    }
    dev->reset_health();
    dev->inject_fault({});
}

std::string target_name(const ::testing::TestParamInfo<Target>& info) {
    return std::string(to_string(info.param.kind)) + std::to_string(info.param.index);
}

struct Tolerances {
    double elementwise, reduction, round_trip;
};
Tolerances tolerances(BackendKind kind) {
    if (kind == BackendKind::Cuda) return {1e-5, 1e-4, 1e-5};
    return {1e-6, 1e-5, 1e-5};
}

std::vector<float> random_vector(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// max |got - want| / max |want| (absolute when want is all zeros); NaN counts as infinite.
double relative_error(const std::vector<float>& want, const std::vector<float>& got) {
    double max_ref = 0, max_err = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(want[i])));
        const double e = std::fabs(static_cast<double>(want[i]) - got[i]);
        max_err = std::max(max_err, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    }
    return max_ref > 0 ? max_err / max_ref : max_err;
}

[[maybe_unused]] std::string describe(const char* op, const Conv1dShape& s, bool bias) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s b=%d %d->%d len=%d k=%d s=%d d=%d p=%d g=%d%s", op, s.batch,
                  s.in_channels, s.out_channels, s.in_length, s.kernel, s.stride, s.dilation,
                  s.padding, s.groups, bias ? " +bias" : "");
    return buf;
}

[[maybe_unused]] Conv1dShape shape(int batch, int in_ch, int out_ch, int len, int taps, int stride,
                                   int dilation, int padding, int groups) {
    Conv1dShape s;
    s.batch = batch;
    s.in_channels = in_ch;
    s.out_channels = out_ch;
    s.in_length = len;
    s.kernel = taps;
    s.stride = stride;
    s.dilation = dilation;
    s.padding = padding;
    s.groups = groups;
    return s;
}

class BackendParity : public ::testing::TestWithParam<Target> {
  protected:
    // The same data on the reference and on the device.
    struct Pair {
        DeviceBuffer ref, dev;
        std::size_t n = 0;
    };

    void SetUp() override {
        open_target(GetParam(), dev_);
        if (!dev_) return;
        kind_ = GetParam().kind;
        tol_ = tolerances(kind_);
        rq_ = ref_.create_queue();
        dq_ = dev_->create_queue();
    }
    void TearDown() override {
        if (dev_) {
            dev_->inject_fault({});
            EXPECT_EQ(dev_->health(), Health::Ok) << dev_->last_error();
        }
    }

    bool is_reference() const { return kind_ == BackendKind::Cpu; }
    const char* label() const { return to_string(kind_); }

    Pair upload(const std::vector<float>& v) {
        Pair p{ref_.allocate(v.size(), "test"), dev_->allocate(v.size(), "test"), v.size()};
        ref_.copy_to_device(*rq_, p.ref, 0, v.data(), v.size());
        dev_->copy_to_device(*dq_, p.dev, 0, v.data(), v.size());
        dev_->synchronize(*dq_);
        return p;
    }
    // Outputs start as a sentinel, so an element never written shows up as a huge error.
    Pair output(std::size_t n) { return upload(std::vector<float>(n, 12345.0f)); }

    std::vector<float> ref_data(const Pair& p) {
        std::vector<float> v(p.n);
        ref_.copy_to_host(*rq_, v.data(), p.ref, 0, p.n);
        return v;
    }
    std::vector<float> dev_data(const Pair& p) {
        std::vector<float> v(p.n);
        dev_->copy_to_host(*dq_, v.data(), p.dev, 0, p.n);
        dev_->synchronize(*dq_);
        return v;
    }

    // The device against the CPU reference (nothing to compare on the CPU itself).
    void expect_close(const std::string& what, const Pair& p, double tol) {
        if (is_reference()) return;
        const double err = relative_error(ref_data(p), dev_data(p));
        std::printf("[ parity ] %-6s %-58s max rel err %.2e (tol %.0e)\n", label(), what.c_str(),
                    err, tol);
        EXPECT_LE(err, tol) << what;
    }
    // The device (and the reference) against values from the definition.
    void expect_equal_to(const std::string& what, const Pair& p, const std::vector<float>& want,
                         double tol) {
        const double dev_err = relative_error(want, dev_data(p));
        const double ref_err = relative_error(want, ref_data(p));
        std::printf("[ parity ] %-6s %-58s vs definition %.2e, cpu %.2e (tol %.0e)\n", label(),
                    what.c_str(), dev_err, ref_err, tol);
        EXPECT_LE(dev_err, tol) << what << " (" << label() << ")";
        EXPECT_LE(ref_err, tol) << what << " (cpu reference)";
    }

    // Declared first: destroyed after the queues and buffers that use them.
    std::shared_ptr<Backend> dev_;
    CpuBackend ref_;
    std::unique_ptr<Queue> rq_, dq_;
    BackendKind kind_ = BackendKind::Cpu;
    Tolerances tol_{};
};

}  // namespace
}  // namespace etude::gpu
