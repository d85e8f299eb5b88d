// What the tests of Piper streams on a device share: a fixture per device
// kind (lavapipe for Vulkan, PoCL for OpenCL; skipped where absent), the
// options of a stream whose every decoder chunk goes to the device, a
// bounded wait for pushes to meet in a paused joiner, and a stream of
// phoneme ids spoken to its end.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gpu/registry.h"
#include "support/emulation.h"
#include "support/model_parity.h"
#include "support/stream_output.h"
#include "support/wait_until.h"

namespace etude::test {

// A test over device kinds: device_ is the kind's first device (the
// registry's shared one, which the engine's streams use too), name_ its
// backend's name as StreamOptions::backend takes it.
class PiperOnDevice : public ::testing::TestWithParam<gpu::BackendKind> {
  protected:
    void SetUp() override {
        std::string why;
        device_ = backend_of(GetParam(), why);
        if (!device_) GTEST_SKIP() << why;
        name_ = gpu::to_string(GetParam());
    }
    std::shared_ptr<gpu::Backend> device_;
    std::string name_;
};

// A Piper stream of `voice` on `backend` (a device, or "cpu" for the
// reference) with `seed`, its native rate and 100 ms of latency. The
// device's own output is the subject: every decoder chunk is pinned there
// (ETUDE_FAULT's cpu-busy: on lavapipe the CPU tier would be quicker and
// rightly chosen). `faults`: more of that vocabulary.
inline engine::StreamOptions piper_on_device(const std::string& voice, const std::string& backend,
                                             std::uint64_t seed, const std::string& speaker = "",
                                             const std::string& faults = "") {
    engine::StreamOptions o;
    o.voice = engine::PiperVoiceOptions{.piper_voice = voice, .speaker = speaker, .seed = seed};
    o.sample_rate = 0;
    o.latency_ms = 100;
    o.backend = backend;
    o.faults = faults.empty() ? "cpu-busy" : "cpu-busy," + faults;
    return o;
}

// A stream's whole audio and its statistics once it ended.
struct SpokenIds {
    std::vector<float> audio;
    engine::StreamStats stats;
};

// Speaks each of `sentences` (Piper phoneme ids) on a new stream of
// `options`, reads it to its end and returns what it said.
inline SpokenIds speak(engine::Engine& engine, const engine::StreamOptions& options,
                       const std::vector<std::vector<std::int64_t>>& sentences) {
    auto stream = engine.create_stream(options);
    for (const auto& ids : sentences) stream->push_phoneme_ids(ids);
    stream->end_input();
    SpokenIds s;
    s.audio = read_all(*stream);
    s.stats = stream->stats();
    return s;
}

}  // namespace etude::test
