// Streams of a flow that joins, each beside a twin of a flow that does not:
// the flow tests' way to push blocks together and compare each stream with
// its flow alone (piper_flow_first_push_test.cpp, piper_flow_replay_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/models/vits/flow_stream.h"
#include "gpu/backend.h"
#include "support/model_parity.h"
#include "support/random_prior.h"

namespace etude::test {

// Streams of a joining flow, each with a twin of a flow that does not join
// (whose pushes all go alone): push() gives each stream of `who` its next
// block and pushes it together, each twin alone, and keeps both outputs.
class FlowTwins {
  public:
    FlowTwins(std::shared_ptr<const engine::VitsFlowNetwork> joint,
              std::shared_ptr<const engine::VitsFlowNetwork> solo, int streams, int frames)
        : joint_(std::move(joint)), solo_(std::move(solo)), frames_of_(frames) {
        for (int i = 0; i < streams; ++i) add(400 + std::uint32_t(i));
    }
    // A stream whose sentence has `frames` frames (the twins' own, by default).
    int add(std::uint32_t seed, int frames = 0) {
        joint_streams_.push_back(std::make_unique<engine::VitsFlowStream>(joint_, 1));
        solo_streams_.push_back(std::make_unique<engine::VitsFlowStream>(solo_, 1));
        frames_.push_back(frames > 0 ? frames : frames_of_);
        priors_.push_back(random_prior(joint_->channels(), frames_.back(), seed));
        fed_.push_back(0);
        joint_out_.emplace_back();
        solo_out_.emplace_back();
        return int(fed_.size()) - 1;
    }
    // The operations the joint push issued (while `device` profiles).
    std::uint64_t push(gpu::Backend& device, const std::vector<int>& who, int block, bool flush) {
        return push_each(device, who, std::vector<int>(who.size(), block),
                         std::vector<bool>(who.size(), flush));
    }
    // The same with a block length and a flush of its own for each stream,
    // run by stream `leader` (who[0] where -1; a stream that need not be
    // one of them, as a joiner's leader).
    std::uint64_t push_each(gpu::Backend& device, const std::vector<int>& who,
                            const std::vector<int>& lengths, const std::vector<bool>& flushes,
                            int leader = -1) {
        const int channels = joint_->channels();
        std::vector<std::vector<float>> blocks;
        std::vector<engine::VitsFlowStream*> streams;
        for (std::size_t k = 0; k < who.size(); ++k) {
            const std::size_t i = std::size_t(who[k]);
            const int block = lengths[k];
            std::vector<float> b(std::size_t(channels) * std::size_t(block));
            for (int c = 0; c < channels; ++c)
                std::copy_n(priors_[i].begin() + std::ptrdiff_t(c) * frames_[i] + fed_[i], block,
                            b.begin() + std::ptrdiff_t(c) * block);
            fed_[i] += block;
            engine::VitsFlowStream* twin = solo_streams_[i].get();
            const std::span<const float> one[] = {b};
            const auto alone =
                engine::VitsFlowStream::push_blocks_together({&twin, 1}, one, block, flushes[k]);
            append(solo_out_[i], alone[0]);
            blocks.push_back(std::move(b));
            streams.push_back(joint_streams_[i].get());
        }
        std::vector<engine::VitsFlowStream::Block> each;
        for (std::size_t k = 0; k < who.size(); ++k)
            each.push_back({blocks[k], lengths[k], flushes[k]});
        const std::uint64_t before = operations(device);
        const auto got = engine::VitsFlowStream::push_blocks_together(
            streams, each, leader < 0 ? nullptr : joint_streams_[std::size_t(leader)].get());
        const std::uint64_t issued = operations(device) - before;
        for (std::size_t k = 0; k < who.size(); ++k)
            append(joint_out_[std::size_t(who[k])], got[k]);
        return issued;
    }
    // Every stream (and twin) reset() for a next sentence of `frames`
    // frames, of new priors; the outputs so far dropped.
    void next_sentence(int frames) {
        frames_of_ = frames;
        for (std::size_t i = 0; i < fed_.size(); ++i) {
            frames_[i] = frames;
            joint_streams_[i]->reset();
            solo_streams_[i]->reset();
            priors_[i] = random_prior(joint_->channels(), frames, 700 + std::uint32_t(i));
            fed_[i] = 0;
            joint_out_[i].clear();
            solo_out_[i].clear();
        }
    }
    int fed(int i) const { return fed_[std::size_t(i)]; }
    engine::VitsFlowStream& joint(int i) { return *joint_streams_[std::size_t(i)]; }
    const std::vector<float>& joint_out(int i) const { return joint_out_[std::size_t(i)]; }
    int frames() const { return frames_of_; }
    // Stream i's flow together against its twin's alone.
    double diff(int i) const {
        const auto& got = joint_out_[std::size_t(i)];
        const auto& want = solo_out_[std::size_t(i)];
        EXPECT_EQ(got.size(), want.size());
        EXPECT_EQ(want.size(),
                  std::size_t(joint_->channels()) * std::size_t(frames_[std::size_t(i)]))
            << "the flow did not reach the sentence's end";
        return max_abs_diff(got, want);
    }

  private:
    static void append(std::vector<float>& to, const std::vector<float>& from) {
        to.insert(to.end(), from.begin(), from.end());
    }
    std::shared_ptr<const engine::VitsFlowNetwork> joint_, solo_;
    int frames_of_;
    std::vector<int> frames_;
    std::vector<std::unique_ptr<engine::VitsFlowStream>> joint_streams_, solo_streams_;
    std::vector<std::vector<float>> priors_, joint_out_, solo_out_;
    std::vector<int> fed_;
};

}  // namespace etude::test
