#include "engine/scheduling/kernel_registry.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>

namespace etude::engine {

using namespace etude::gpu;
namespace {

bool has_capability(const DeviceInfo& d, const std::string& cap) {
    return cap.empty() ||
           std::find(d.capabilities.begin(), d.capabilities.end(), cap) != d.capabilities.end();
}

std::string label(const Backend& b) {
    return std::string(to_string(b.info().kind)) + ":" + std::to_string(b.info().index);
}

// One operation at one size: allocates its buffers, then runs the op.
struct Workload {
    std::string op, size, capability;
    std::function<std::function<void(Queue&)>(Backend&)> prepare;
};

DeviceBuffer random_buffer(Backend& b, Queue& q, std::size_t n, const char* tag) {
    static std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> host(n);
    for (auto& v : host) v = u(rng);
    DeviceBuffer buf = b.allocate(n, tag);
    b.copy_to_device(q, buf, 0, host.data(), n);
    b.synchronize(q);
    return buf;
}

std::vector<Workload> workloads() {
    std::vector<Workload> w;
    w.push_back(
        {"gemm", "256x256x256", "gemm", [](Backend& b) {
             auto q = b.create_queue();
             auto a = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 256 * 256, "cal"));
             auto c = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 256 * 256, "cal"));
             return std::function<void(Queue&)>([&b, a, c](Queue& qq) {
                 b.gemm(qq, false, false, 256, 256, 256, 1.0f, *a, 256, *a, 256, 0.0f, *c, 256);
             });
         }});
    w.push_back({"conv1d", "1x64->64ch k7 len 512", "", [](Backend& b) {
                     auto q = b.create_queue();
                     Conv1dShape s{1, 64, 64, 512, 7, 1, 1, 3, 1};
                     auto x = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
                     auto wt =
                         std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 64 * 7, "cal"));
                     auto y = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
                     auto none = std::make_shared<DeviceBuffer>();
                     return std::function<void(Queue&)>([&b, s, x, wt, y, none](Queue& qq) {
                         b.conv1d(qq, s, *x, *wt, *none, *y);
                     });
                 }});
    w.push_back({"rfft", "64 x 512", "fft", [](Backend& b) {
                     auto q = b.create_queue();
                     auto x = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
                     auto y = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 514, "cal"));
                     return std::function<void(Queue&)>(
                         [&b, x, y](Queue& qq) { b.rfft(qq, 512, 64, *x, *y); });
                 }});
    w.push_back({"activation", "gelu, 65536", "", [](Backend& b) {
                     auto q = b.create_queue();
                     auto x = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 65536, "cal"));
                     return std::function<void(Queue&)>(
                         [&b, x](Queue& qq) { b.activation(qq, Activation::Gelu, *x, *x, 65536); });
                 }});
    w.push_back({"layer_norm", "64 x 512", "", [](Backend& b) {
                     auto q = b.create_queue();
                     auto x = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
                     auto g = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 512, "cal"));
                     auto y = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
                     return std::function<void(Queue&)>([&b, x, g, y](Queue& qq) {
                         b.layer_norm(qq, 64, 512, 1e-6f, *x, *g, *g, *y);
                     });
                 }});
    w.push_back(
        {"overlap_add", "64 frames of 512, hop 128", "", [](Backend& b) {
             auto q = b.create_queue();
             auto fr = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 64 * 512, "cal"));
             auto win = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 512, "cal"));
             auto out = std::make_shared<DeviceBuffer>(random_buffer(b, *q, 63 * 128 + 512, "cal"));
             return std::function<void(Queue&)>([&b, fr, win, out](Queue& qq) {
                 b.overlap_add(qq, *fr, 512, 128, 64, *win, *out);
             });
         }});
    return w;
}

}  // namespace

KernelRegistry::KernelRegistry(std::vector<std::shared_ptr<Backend>> backends)
    : backends_(std::move(backends)) {
    for (const auto& w : workloads()) table_.push_back({w.op, w.size, 0, {}});
}

void KernelRegistry::calibrate(int repeats) {
    const auto ws = workloads();
    for (std::size_t i = 0; i < ws.size(); ++i) {
        KernelChoice& choice = table_[i];
        choice.measured.clear();
        double best = -1;
        for (std::size_t bi = 0; bi < backends_.size(); ++bi) {
            Backend& b = *backends_[bi];
            KernelMeasurement m{label(b), -1.0};
            if (has_capability(b.info(), ws[i].capability)) {
                try {
                    auto run = ws[i].prepare(b);
                    auto q = b.create_queue();
                    run(*q);  // first call: plans, compilation, caches
                    b.synchronize(*q);
                    std::vector<double> t;
                    for (int r = 0; r < repeats; ++r) {
                        const auto t0 = std::chrono::steady_clock::now();
                        run(*q);
                        b.synchronize(*q);
                        t.push_back(std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
                    }
                    std::sort(t.begin(), t.end());
                    m.ms = t[t.size() / 2];
                } catch (const std::exception&) {
                    m.ms = -1.0;  // cannot run it: never chosen
                }
            }
            if (m.ms >= 0 && (best < 0 || m.ms < best)) {
                best = m.ms;
                choice.chosen = bi;
            }
            choice.measured.push_back(m);
        }
    }
}

std::shared_ptr<Backend> KernelRegistry::backend_for(std::string_view op) const {
    for (const auto& c : table_)
        if (c.op == op) return backends_[c.chosen];
    return backends_.front();
}

}  // namespace etude::engine
