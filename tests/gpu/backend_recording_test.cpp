// Backend::record() and replay() on every device the registry opens: a small
// network of several operations (conv1d, leaky ReLU, conv_transpose1d, the
// WaveNet gate, GEMM, a running axpby state, rfft and irfft) recorded once
// and replayed equals, bit for bit, the same operations called one by one
// on the same backend, on a second set of buffers. The replays run the work
// again (a new input gives a new output), keep state across replays, mix
// with other recordings, and bad use is refused with a clear error.
#include <cstring>

#include "backend_parity.h"

namespace etude::gpu {
namespace {

constexpr int kChannels = 6, kHidden = 8, kLength = 32;
constexpr int kUp = 2 * kLength;      // conv_transpose1d's output length (stride 2)
constexpr int kGate = kChannels / 2;  // the gate's items, of one channel each

// One copy of the network's buffers. Weights are the same in every copy.
struct Net {
    DeviceBuffer x, w1, b1, h1, w2, b2, h2, g, mix, m, acc, spectrum, out;
};

Conv1dShape first_conv() {
    return shape(1, kChannels, kHidden, kLength, 3, 1, 1, 1, 1);
}
Conv1dShape second_conv() {
    return shape(1, kHidden, kChannels, kLength, 4, 2, 1, 1, 1);
}

// The step: every operation reads what the one before wrote, and `acc`
// carries state from one run to the next (acc = m + 0.5 acc).
void run_step(Backend& b, Queue& q, Net& n) {
    b.conv1d(q, first_conv(), n.x, n.w1, n.b1, n.h1);
    b.activation(q, Activation::LeakyRelu, n.h1, n.h1, n.h1.floats(), 0.1f);
    b.conv_transpose1d(q, second_conv(), n.h1, n.w2, n.b2, n.h2);
    b.gated_tanh(q, kGate, 1, kUp, n.h2, n.g);  // a batch of 3
    b.gemm(q, false, false, kGate, kUp, kGate, 1.0f, n.mix, kGate, n.g, kUp, 0.0f, n.m, kUp);
    b.axpby(q, n.m.floats(), 1.0f, n.m, 0.5f, n.acc);
    b.rfft(q, kUp, kGate, n.acc, n.spectrum);
    b.irfft(q, kUp, kGate, n.spectrum, n.out);
}

class BackendRecording : public ::testing::TestWithParam<Target> {
  protected:
    void SetUp() override {
        open_target(GetParam(), dev_);
        if (!dev_) return;
        kind_ = GetParam().kind;
        q_ = dev_->create_queue();
    }
    void TearDown() override {
        if (dev_) {
            dev_->inject_fault({});
            EXPECT_EQ(dev_->health(), Health::Ok) << dev_->last_error();
        }
    }

    DeviceBuffer put(const std::vector<float>& v) {
        DeviceBuffer b = dev_->allocate(v.size(), "test");
        dev_->copy_to_device(*q_, b, 0, v.data(), v.size());
        dev_->synchronize(*q_);  // `v` may die after the call; the copy is asynchronous
        return b;
    }
    // Outputs start as a sentinel, so a run that writes nothing shows.
    DeviceBuffer blank(std::size_t n) { return put(std::vector<float>(n, 12345.0f)); }

    Net make_net(unsigned input_seed) {
        Net n;
        n.x = put(random_vector(std::size_t(kChannels) * kLength, input_seed));
        n.w1 = put(random_vector(std::size_t(kHidden) * kChannels * 3, 11));
        n.b1 = put(random_vector(kHidden, 12));
        n.h1 = blank(std::size_t(kHidden) * kLength);
        n.w2 = put(random_vector(std::size_t(kHidden) * kChannels * 4, 13));
        n.b2 = put(random_vector(kChannels, 14));
        n.h2 = blank(std::size_t(kChannels) * kUp);
        n.g = blank(std::size_t(kGate) * kUp);
        n.mix = put(random_vector(std::size_t(kGate) * kGate, 15));
        n.m = blank(std::size_t(kGate) * kUp);
        n.acc = put(std::vector<float>(std::size_t(kGate) * kUp, 0.25f));
        n.spectrum = blank(std::size_t(kGate) * (kUp / 2 + 1) * 2);
        n.out = blank(std::size_t(kGate) * kUp);
        return n;
    }

    std::vector<float> read(const DeviceBuffer& b) {
        std::vector<float> v(b.floats());
        dev_->copy_to_host(*q_, v.data(), b, 0, v.size());
        dev_->synchronize(*q_);
        return v;
    }
    // Asynchronous: `v` must live until the queue synchronises.
    void write(DeviceBuffer& b, const std::vector<float>& v) {
        dev_->copy_to_device(*q_, b, 0, v.data(), v.size());
    }

    // What a step leaves behind: the running state, the spectrum and the output.
    std::vector<float> results(const Net& n) {
        std::vector<float> all = read(n.acc);
        for (const DeviceBuffer* b : {&n.spectrum, &n.out}) {
            const std::vector<float> v = read(*b);
            all.insert(all.end(), v.begin(), v.end());
        }
        return all;
    }

    // Bit for bit (a NaN would not compare equal to itself, so compare bytes).
    static void expect_identical(const std::vector<float>& want, const std::vector<float>& got,
                                 const std::string& what) {
        ASSERT_EQ(want.size(), got.size()) << what;
        std::size_t differ = 0, first = want.size();
        for (std::size_t i = 0; i < want.size(); ++i)
            if (std::memcmp(&want[i], &got[i], sizeof(float)) != 0) {
                if (first == want.size()) first = i;
                ++differ;
            }
        EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << want.size()
                              << " values differ, the first at " << first << " (want "
                              << want[first < want.size() ? first : 0] << ", got "
                              << got[first < got.size() ? first : 0] << ")";
    }

    Recording record_step(Net& n) {
        return dev_->record(*q_, [&](Queue& q) { run_step(*dev_, q, n); });
    }

    bool native() const { return kind_ == BackendKind::Vulkan || kind_ == BackendKind::Cuda; }

    std::shared_ptr<Backend> dev_;  // declared first: outlives the queue and buffers
    std::unique_ptr<Queue> q_;
    BackendKind kind_ = BackendKind::Cpu;
};

TEST_P(BackendRecording, replay_equals_the_operations_called_one_by_one) {
    Net recorded = make_net(1), called = make_net(1);
    const Recording step = record_step(recorded);
    SCOPED_TRACE(describe("a step starting with", first_conv(), true));
    EXPECT_EQ(step.operations(), 8u);
    EXPECT_EQ(step.replays_natively(), native()) << to_string(kind_);
    // Recording runs nothing: the output is still the sentinel.
    dev_->synchronize(*q_);
    expect_identical(std::vector<float>(recorded.out.floats(), 12345.0f), read(recorded.out),
                     "the output after record() alone");

    dev_->replay(*q_, step);
    run_step(*dev_, *q_, called);
    dev_->synchronize(*q_);
    expect_identical(results(called), results(recorded), "one replay");
}

TEST_P(BackendRecording, replay_runs_again_on_what_the_buffers_hold_now) {
    Net recorded = make_net(1), called = make_net(1);
    const Recording step = record_step(recorded);
    dev_->replay(*q_, step);
    run_step(*dev_, *q_, called);
    const std::vector<float> before = results(recorded);

    // A new input, copied in on the same queue just before the replay and
    // read back just after it, with no synchronize between.
    const std::vector<float> input = random_vector(recorded.x.floats(), 99, -2.0f, 2.0f);
    write(recorded.x, input);
    write(called.x, input);
    dev_->replay(*q_, step);
    std::vector<float> out(recorded.out.floats());
    dev_->copy_to_host(*q_, out.data(), recorded.out, 0, out.size());
    run_step(*dev_, *q_, called);
    dev_->synchronize(*q_);

    expect_identical(read(called.out), out, "the output of a replay on a new input");
    expect_identical(results(called), results(recorded), "a replay on a new input");
    const std::vector<float> after = results(recorded);
    EXPECT_NE(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)))
        << "the replay on a new input left the results as they were";
}

TEST_P(BackendRecording, many_replays_and_two_interleaved_recordings_stay_right) {
    Net a = make_net(1), b = make_net(2), a_called = make_net(1), b_called = make_net(2);
    const Recording step_a = record_step(a);
    const Recording step_b = record_step(b);
    // Queued back to back, several in one submission where the backend
    // batches (Vulkan), in an order that mixes the two; `acc` carries state
    // through all of them.
    const char order[] = "aababbbaab";
    for (const char* c = order; *c; ++c) {
        dev_->replay(*q_, *c == 'a' ? step_a : step_b);
        run_step(*dev_, *q_, *c == 'a' ? a_called : b_called);
        if (c - order == 4) dev_->synchronize(*q_);
    }
    dev_->synchronize(*q_);
    expect_identical(results(a_called), results(a), "recording a after its 5 replays");
    expect_identical(results(b_called), results(b), "recording b after its 5 replays");
}

TEST_P(BackendRecording, a_moved_recording_replays_and_its_queue_keeps_what_it_needs) {
    Net recorded = make_net(3), called = make_net(3);
    Recording first = record_step(recorded);
    Recording moved = std::move(first);
    EXPECT_TRUE(first.empty());
    dev_->replay(*q_, moved);
    run_step(*dev_, *q_, called);
    moved = Recording();  // dies with its replay still queued
    dev_->synchronize(*q_);
    expect_identical(results(called), results(recorded), "a replay whose recording died");
}

TEST_P(BackendRecording, bad_use_is_refused_with_a_clear_error) {
    Net n = make_net(1);
    const auto refused = [](auto&& call, const char* what) {
        try {
            call();
            ADD_FAILURE() << what << ": no error";
        } catch (const std::invalid_argument& e) {
            std::printf("[ refused ] %s: %s\n", what, e.what());
        }
    };
    refused([&] { dev_->replay(*q_, Recording()); }, "replaying an empty recording");
    refused([&] { dev_->record(*q_, [](Queue&) {}); }, "a body with no operation");
    refused([&] { dev_->record(*q_, nullptr); }, "no body");
    refused(
        [&] {
            dev_->record(*q_, [&](Queue& q) {
                run_step(*dev_, q, n);
                std::vector<float> host(n.out.floats());
                dev_->copy_to_host(q, host.data(), n.out, 0, host.size());
            });
        },
        "a copy to the host inside a recording");
    refused(
        [&] {
            dev_->record(*q_, [&](Queue& q) {
                const std::vector<float> host(n.x.floats(), 1.0f);
                dev_->copy_to_device(q, n.x, 0, host.data(), host.size());
            });
        },
        "a copy from the host inside a recording");
    refused(
        [&] {
            dev_->record(*q_, [&](Queue& q) {
                run_step(*dev_, q, n);
                dev_->synchronize(q);
            });
        },
        "synchronize inside a recording");
    refused([&] { dev_->record(*q_, [&](Queue&) { record_step(n); }); }, "a nested recording");

    const Recording step = record_step(n);
    refused([&] { dev_->record(*q_, [&](Queue& q) { dev_->replay(q, step); }); },
            "a replay inside a recording");
    auto other_queue = dev_->create_queue();
    refused([&] { dev_->replay(*other_queue, step); }, "a replay on another queue");
    CpuBackend cpu;
    auto cpu_queue = cpu.create_queue();
    refused([&] { cpu.replay(*cpu_queue, step); }, "a replay on another backend");

    // None of it left the queue recording or the backend failed: the
    // recording still replays, and equals the operations called one by one.
    EXPECT_FALSE(q_->recording());
    Net recorded = make_net(5), called = make_net(5);
    const Recording good = record_step(recorded);
    dev_->replay(*q_, good);
    run_step(*dev_, *q_, called);
    dev_->synchronize(*q_);
    expect_identical(results(called), results(recorded), "a replay after refused misuse");
}

TEST_P(BackendRecording, a_device_failure_at_replay_throws_and_marks_the_backend_failed) {
    Net recorded = make_net(1), called = make_net(1);
    const Recording step = record_step(recorded);
    dev_->inject_fault({GpuFault::KernelFailure, 1});
    EXPECT_THROW(dev_->replay(*q_, step), DeviceError);
    EXPECT_EQ(dev_->health(), Health::Failed);
    // Once the device is healthy again, the same recording still replays.
    dev_->reset_health();
    dev_->replay(*q_, step);
    run_step(*dev_, *q_, called);
    dev_->synchronize(*q_);
    expect_identical(results(called), results(recorded), "a replay after a failed one");
}

TEST_P(BackendRecording, a_native_replay_is_timed_as_one_entry_while_profiling) {
    if (!native()) GTEST_SKIP() << to_string(kind_) << " replays the recorded calls one by one";
    Net n = make_net(1);
    const Recording step = record_step(n);
    dev_->reset_timings();
    dev_->set_profiling(true);
    dev_->replay(*q_, step);
    dev_->synchronize(*q_);
    dev_->set_profiling(false);
    std::uint64_t replays = 0, others = 0;
    for (const KernelTiming& t : dev_->kernel_timings())
        (t.name == "replay" ? replays : others) += t.calls;
    EXPECT_EQ(replays, 1u);
    EXPECT_EQ(others, 0u) << "the recorded commands are not timed one by one";
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, BackendRecording, ::testing::ValuesIn(targets()),
                         target_name);

}  // namespace
}  // namespace etude::gpu
