// Streams of several speakers of one Piper voice in one decoder batch: the
// speakers' decoders share every weight but the first layer's bias
// (share_vits_decoder), and so their lanes, held slots and recordings
// (HifiGanNetwork's SharedBatching); a batch side by side adds each item's
// own bias after the first layer's call (BatchMajor::push), and a joint
// call over streams in different states takes only layers of one bias
// (JointPush). Before, each speaker's streams batched apart, and a voice
// of many speakers under many streams made batches of one.
//
// Each stream's audio in the batches equals its speaker's stream pushed
// alone within the bound a batch holds against its streams alone, 1e-5
// (joint_push_test.cpp: the same arithmetic, the bias added after the sum
// rather than before it), on the CPU backend, PoCL and lavapipe (CUDA on a
// GPU machine). The test voice's speakers differ only in those biases: a
// batch that gave every item the first one's would miss by far more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/neural_model.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/random_prior.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kVoice = test::test_data_dir() + "/piper/test_medium_multi.onnx";
constexpr int kSampleRate = 22050;
constexpr int kLatentFrames = 200;

// That the streams of `first`'s speaker and `other`'s went in calls
// together since `calls_before`, through one lane (the counts are the
// lanes'), replaying where the backend replays batches.
template <class Network>
void expect_one_lane(const Network& first, const Network& other, std::uint64_t calls_before,
                     const gpu::Backend& backend) {
    EXPECT_GT(first.batched_layer_calls(), calls_before)
        << "the speakers' streams never went in one call";
    EXPECT_EQ(first.batched_layer_calls(), other.batched_layer_calls())
        << "each speaker's lanes of its own";
    const gpu::BackendKind kind = backend.info().kind;
    if (kind == gpu::BackendKind::Vulkan || kind == gpu::BackendKind::Cuda) {
        EXPECT_GT(other.batch_replay_stats().replayed, 0u);
    }
}

// A stream, the speaker's decoder it runs on, what it has read of the
// latent, and its audio.
struct Member {
    std::shared_ptr<const NeuralModel> model;
    std::unique_ptr<NetworkStream> stream;
    int fed = 0;
    std::vector<float> audio, mel;
};

// A backend of the test's parameter (skipped where absent) and the
// four-speaker voice's weights.
class OnVoiceWeights : public test::OnBackend {
  protected:
    void SetUp() override {
        OnBackend::SetUp();
        if (IsSkipped()) return;
        weights_ = std::make_shared<VitsWeights>(read_vits_weights(kVoice));
    }
    std::shared_ptr<const VitsWeights> weights_;
};

class SpeakersBatch : public OnVoiceWeights {
  protected:
    void SetUp() override {
        OnVoiceWeights::SetUp();
        if (IsSkipped()) return;
        // Speaker 0's decoder whole, its streams batching (as on a GPU);
        // the others' sharing its weights, as a voice makes them.
        base_ = load_vits_decoder(*weights_, kSampleRate, 0, "base", backend_);
        base_->set_join_streams(true);
        for (int s = 0; s < 3; ++s)
            decoders_.push_back(s == 0 ? base_ : share_vits_decoder(base_, *weights_, s));
        n_mels_ = base_->audio().n_mels;
        latent_ = test::random_prior(n_mels_, kLatentFrames, 21);
    }
    // A stream of `speaker`'s decoder: in the speakers' lane, or on a
    // decoder of its own that never batches.
    Member open(int speaker, bool batched) {
        Member m;
        if (batched) {
            m.model = decoders_[static_cast<std::size_t>(speaker)];
        } else {
            auto own = load_vits_decoder(*weights_, kSampleRate, speaker, "solo", backend_);
            own->set_join_streams(false);
            m.model = std::move(own);
        }
        m.stream = m.model->open_stream();
        return m;
    }
    // One push of `frames` frames by each of `members`, together.
    void push(std::vector<Member*> members, int frames, bool flush = false) {
        std::vector<StreamPush> pushes;
        for (Member* m : members) {
            copy_mel_frames(latent_, n_mels_, kLatentFrames, m->fed, frames, m->mel);
            pushes.push_back({m->stream.get(), m->mel.data(), frames, flush, &m->audio});
            m->fed += frames;
        }
        pushes[0].stream->push_together(pushes);
    }
    // The next `frames` frames of each stream of `batched`, together, and
    // of each of `solo`, alone.
    void push_both(std::vector<Member>& batched, std::vector<Member>& solo, int frames) {
        std::vector<Member*> all;
        for (Member& m : batched) all.push_back(&m);
        push(all, frames);
        for (Member& m : solo) push({&m}, frames);
    }
    // Stream i of both sets gone, a stream of `speaker` in its place (and
    // in its slot, the one let go), pushed alone until its layers settle.
    void replace(std::vector<Member>& batched, std::vector<Member>& solo, std::size_t i,
                 int speaker) {
        // (Its stream before its model: the stream reads the model's network.)
        batched[i].stream.reset();
        batched[i] = open(speaker, true);
        solo[i].stream.reset();
        solo[i] = open(speaker, false);
        for (int k = 0; k < 3; ++k) {
            push({&batched[i]}, 4);
            push({&solo[i]}, 4);
        }
    }
    std::shared_ptr<NeuralModel> base_;
    std::vector<std::shared_ptr<const NeuralModel>> decoders_;
    int n_mels_ = 0;
    std::vector<float> latent_;
};

// Speakers 0 and 2 (twice each), every push of the four in one batch. The
// first two pushes' pairs are in two states (the second pair starts a push
// later): one pair goes side by side and the other through joint calls;
// then all four, settled, side by side (and replayed from a recording, on
// a backend that replays), and a flush.
TEST_P(SpeakersBatch, streams_of_several_speakers_batch_together_each_with_its_own_audio) {
    const std::vector<int> speakers{0, 2, 0, 2};
    std::vector<Member> batched, solo;
    for (int s : speakers) {
        batched.push_back(open(s, true));
        solo.push_back(open(s, false));
    }
    ASSERT_TRUE(decoders_[2]->shares_weights());
    const auto all = [&](std::vector<Member>& m) {
        return std::vector<Member*>{&m[0], &m[1], &m[2], &m[3]};
    };
    const std::uint64_t calls_before = decoders_[0]->batched_layer_calls();
    push({&batched[0], &batched[1]}, 4);  // the first pair starts
    for (int s : {0, 1}) push({&solo[s]}, 4);
    for (int i = 0; i < 2; ++i) {  // two pairs, two states
        push(all(batched), 4);
        for (Member& m : solo) push({&m}, 4);
    }
    for (int i = 0; i < 12; ++i) {
        push(all(batched), 8);
        for (Member& m : solo) push({&m}, 8);
    }
    push(all(batched), 5, true);
    for (Member& m : solo) push({&m}, 5, true);

    expect_one_lane(*decoders_[0], *decoders_[2], calls_before, *backend_);
    for (std::size_t i = 0; i < speakers.size(); ++i) {
        SCOPED_TRACE("stream " + std::to_string(i) + ", speaker " + std::to_string(speakers[i]));
        ASSERT_EQ(batched[i].audio.size(), solo[i].audio.size());
        ASSERT_FALSE(batched[i].audio.empty());
        EXPECT_LE(test::max_abs_diff(batched[i].audio, solo[i].audio), 1e-5);
        EXPECT_GT(test::rms(batched[i].audio), 0.01);
    }
    // The same latent, another speaker: far apart, so the bound above says
    // each item had its own speaker's bias.
    const std::size_t n = std::min(solo[0].audio.size(), solo[1].audio.size());
    EXPECT_GT(
        test::max_abs_diff(std::vector<float>(solo[0].audio.begin(), solo[0].audio.begin() + n),
                           std::vector<float>(solo[1].audio.begin(), solo[1].audio.begin() + n)),
        1e-3);
}

// A settled batch of one speaker's streams has that speaker's bias in its
// recording, and its key names the network: the same slots with another
// speaker's stream in one of them are another batch, never the first
// one's replayed (which would give that stream the other speaker's bias). Where batches replay
// (lavapipe here, CUDA); elsewhere the same pushes run op by op and must agree all the same.
TEST_P(SpeakersBatch, a_slot_taken_by_another_speaker_is_not_replayed_from_the_old_recording) {
    std::vector<Member> batched, solo;
    for (int i = 0; i < 2; ++i) {
        batched.push_back(open(0, true));
        solo.push_back(open(0, false));
    }
    for (int i = 0; i < 3; ++i) push_both(batched, solo, 4);
    for (int i = 0; i < 4; ++i) push_both(batched, solo, 8);
    replace(batched, solo, 1, 2);  // the second stream goes; speaker 2's takes its slot
    for (int i = 0; i < 4; ++i) push_both(batched, solo, 8);
    for (std::size_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(batched[i].audio.size(), solo[i].audio.size());
        EXPECT_LE(test::max_abs_diff(batched[i].audio, solo[i].audio), 1e-5);
    }
}

// A batch of several speakers reads the items' first-layer biases from
// the streams' slots, so its recording serves any speakers in those slots:
// a stream of speaker 1 taking speaker 2's slot replays the recording made
// for speakers 0 and 2 (on a backend that replays batches), with its own
// bias. A batch of one speaker's streams names that network in its key.
TEST_P(SpeakersBatch, a_batch_of_several_speakers_replays_for_other_speakers_in_its_slots) {
    std::vector<Member> batched, solo;
    for (int s : {0, 2}) {
        batched.push_back(open(s, true));
        solo.push_back(open(s, false));
    }
    for (int i = 0; i < 3; ++i) push_both(batched, solo, 4);
    for (int i = 0; i < 3; ++i) push_both(batched, solo, 8);  // sized, recorded, replayed
    const ReplayStats first = decoders_[0]->batch_replay_stats();
    replace(batched, solo, 1, 1);  // speaker 1's stream in speaker 2's slot
    for (int i = 0; i < 3; ++i) push_both(batched, solo, 8);
    const ReplayStats then = decoders_[0]->batch_replay_stats();
    const gpu::BackendKind kind = backend_->info().kind;
    if (kind == gpu::BackendKind::Vulkan || kind == gpu::BackendKind::Cuda) {
        EXPECT_EQ(first.recordings, 1u);
        EXPECT_EQ(then.recordings, first.recordings) << "speakers 0 and 1 recorded anew";
        EXPECT_EQ(then.replayed, first.replayed + 3);
    }
    for (std::size_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(batched[i].audio.size(), solo[i].audio.size());
        EXPECT_LE(test::max_abs_diff(batched[i].audio, solo[i].audio), 1e-5);
    }
}

// The items' biases side by side are a joint buffer of each key's own set
// (RecordedBatches): a larger batch of other speakers grows them, and a
// recording of the smaller batch, replayed after, still reads its own, not
// the buffer the larger one let go (which the device's pool hands out
// again: here, to junk).
TEST_P(SpeakersBatch, a_recording_keeps_its_own_items_biases_when_a_larger_batch_comes_between) {
    const std::vector<int> speakers{0, 2, 1};
    std::vector<Member> batched, solo;
    for (int s : speakers) {
        batched.push_back(open(s, true));
        solo.push_back(open(s, false));
    }
    const auto both = [&](const std::vector<std::size_t>& who, int frames) {
        std::vector<Member*> b;
        for (std::size_t i : who) {
            b.push_back(&batched[i]);
            push({&solo[i]}, frames);
        }
        push(b, frames);
    };
    for (int i = 0; i < 3; ++i) {  // settled, no batch of three yet
        both({0, 1}, 4);
        both({2}, 4);
    }
    for (int i = 0; i < 3; ++i) both({0, 1}, 8);  // sized, recorded, replayed
    for (int i = 0; i < 3; ++i) both({0, 1, 2}, 8);
    // Whatever the device's pool holds let go since, taken and filled with
    // junk: a recording that still read a buffer let go would read this.
    std::vector<gpu::DeviceBuffer> junk;
    {
        auto q = backend_->create_queue();
        for (std::size_t floats = 1; floats <= (std::size_t(1) << 16); floats *= 2) {
            junk.push_back(backend_->allocate(floats, "test junk"));
            backend_->fill(*q, junk.back(), 1e3f, floats);
        }
        backend_->synchronize(*q);
    }
    for (int i = 0; i < 3; ++i) both({0, 1}, 8);  // the first recording again
    for (std::size_t i = 0; i < speakers.size(); ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(batched[i].audio.size(), solo[i].audio.size());
        EXPECT_LE(test::max_abs_diff(batched[i].audio, solo[i].audio), 1e-5);
    }
}

// ---- the flow ---------------------------------------------------------------

// A stream of a speaker's flow and what it has made; its prior is drawn
// from its seed.
struct FlowMember {
    std::shared_ptr<const VitsFlowNetwork> flow;
    std::unique_ptr<VitsFlowStream> stream;
    std::vector<float> prior, out;
    int fed = 0;
};

class SpeakersFlowBatch : public OnVoiceWeights {
  protected:
    static constexpr int kFrames = 200;  // a sentence's
    void SetUp() override {
        OnVoiceWeights::SetUp();
        if (IsSkipped()) return;
        // Speaker 0's flow whole, its streams batching (as on a GPU); the
        // others' sharing its weights, as a voice makes them.
        auto base = std::make_shared<const VitsFlowNetwork>(*weights_, 0, backend_);
        base->set_join_streams(true);
        for (int s = 0; s < 3; ++s)
            flows_.push_back(s == 0 ? base
                                    : std::make_shared<const VitsFlowNetwork>(
                                          base, VitsFlowNetwork::speaker_biases(*weights_, s)));
    }
    // A stream of `speaker`'s flow: in the speakers' lane, or on a flow of
    // its own that never batches.
    FlowMember open(int speaker, bool batched, std::uint32_t seed) {
        FlowMember m;
        if (batched) {
            m.flow = flows_[static_cast<std::size_t>(speaker)];
        } else {
            auto own = std::make_shared<const VitsFlowNetwork>(*weights_, speaker, backend_);
            own->set_join_streams(false);
            m.flow = std::move(own);
        }
        m.stream = std::make_unique<VitsFlowStream>(m.flow, 1);
        m.prior = test::random_prior(m.flow->channels(), kFrames, seed);
        return m;
    }
    // The next `frames` frames of each of `members`, pushed together.
    static void push(std::vector<FlowMember*> members, int frames, bool flush = false) {
        std::vector<std::vector<float>> blocks;
        std::vector<VitsFlowStream*> streams;
        for (FlowMember* m : members) {
            const int channels = m->flow->channels();
            std::vector<float> b(std::size_t(channels) * std::size_t(frames));
            for (int c = 0; c < channels; ++c)
                std::copy_n(m->prior.begin() + std::ptrdiff_t(c) * kFrames + m->fed, frames,
                            b.begin() + std::ptrdiff_t(c) * frames);
            m->fed += frames;
            blocks.push_back(std::move(b));
            streams.push_back(m->stream.get());
        }
        std::vector<VitsFlowStream::Block> each;
        for (const auto& b : blocks) each.push_back({b, frames, flush});
        const auto got = VitsFlowStream::push_blocks_together(streams, each);
        for (std::size_t i = 0; i < members.size(); ++i)
            members[i]->out.insert(members[i]->out.end(), got[i].begin(), got[i].end());
    }
    // Each pair's push, together for the batched and alone for each solo.
    static void push_both(std::vector<FlowMember*> batched, std::vector<FlowMember*> solo,
                          int frames, bool flush = false) {
        push(batched, frames, flush);
        for (FlowMember* m : solo) push({m}, frames, flush);
    }
    std::vector<std::shared_ptr<const VitsFlowNetwork>> flows_;
};

// The flow's version of the decoder's test above: speakers 0 and 2 twice,
// the first pair together, the third stream a push behind and the fourth
// two (so three states: the pair side by side, the other two, of two
// speakers, through joint calls, whose windows line up in the first
// layers), then all four settled side by side (replayed where batches
// replay), to the sentence's end. Each
// stream's flow equals its speaker's flow alone within the bound a batch
// holds against its streams alone (piper_flow_batch_test.cpp's 1e-5).
TEST_P(SpeakersFlowBatch, streams_of_several_speakers_batch_together_each_with_its_own_flow) {
    const std::vector<int> speakers{0, 2, 0, 2};
    std::vector<FlowMember> batched, solo;
    for (std::size_t i = 0; i < speakers.size(); ++i) {
        batched.push_back(open(speakers[i], true, 90 + std::uint32_t(i)));
        solo.push_back(open(speakers[i], false, 90 + std::uint32_t(i)));
    }
    std::vector<FlowMember*> all_batched, all_solo;
    for (std::size_t i = 0; i < speakers.size(); ++i) {
        all_batched.push_back(&batched[i]);
        all_solo.push_back(&solo[i]);
    }
    const std::uint64_t calls_before = flows_[0]->batched_layer_calls();
    push_both({&batched[0], &batched[1]}, {&solo[0], &solo[1]}, 8);
    push_both({&batched[0], &batched[1], &batched[2]}, {&solo[0], &solo[1], &solo[2]}, 8);
    for (int i = 0; i < 20; ++i) push_both(all_batched, all_solo, 8);
    push_both({&batched[0], &batched[1]}, {&solo[0], &solo[1]}, 24, true);
    push_both({&batched[2]}, {&solo[2]}, 32, true);
    push_both({&batched[3]}, {&solo[3]}, 40, true);

    expect_one_lane(*flows_[0], *flows_[2], calls_before, *backend_);
    for (std::size_t i = 0; i < speakers.size(); ++i) {
        SCOPED_TRACE("stream " + std::to_string(i) + ", speaker " + std::to_string(speakers[i]));
        ASSERT_EQ(batched[i].out.size(), solo[i].out.size());
        ASSERT_EQ(solo[i].out.size(), std::size_t(flows_[0]->channels()) * kFrames);
        EXPECT_LE(test::max_abs_diff(batched[i].out, solo[i].out), 1e-5);
    }
    // One prior, two speakers: far apart, so the bound above says each
    // item had its own speaker's biases.
    FlowMember other = open(0, false, 91);  // stream 1's prior, speaker 0
    push({&other}, kFrames, true);
    EXPECT_GT(test::max_abs_diff(other.out, solo[1].out), 1e-3);
}

// A settled batch's recording names its members' flows: a slot taken by
// another speaker's stream is another batch (see the decoder's test).
TEST_P(SpeakersFlowBatch, a_slot_taken_by_another_speaker_is_not_replayed_from_the_old_recording) {
    std::vector<FlowMember> batched, solo;
    for (std::uint32_t i = 0; i < 2; ++i) {
        batched.push_back(open(0, true, 60 + i));
        solo.push_back(open(0, false, 60 + i));
    }
    for (int i = 0; i < 10; ++i) push_both({&batched[0], &batched[1]}, {&solo[0], &solo[1]}, 8);
    // (Its stream before its flow: the stream reads the flow.)
    batched[1].stream.reset();
    batched[1] = open(2, true, 62);
    solo[1].stream.reset();
    solo[1] = open(2, false, 62);
    for (int i = 0; i < 10; ++i) push_both({&batched[1]}, {&solo[1]}, 8);
    for (int i = 0; i < 8; ++i) push_both({&batched[0], &batched[1]}, {&solo[0], &solo[1]}, 8);
    for (std::size_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        ASSERT_EQ(batched[i].out.size(), solo[i].out.size());
        EXPECT_LE(test::max_abs_diff(batched[i].out, solo[i].out), 1e-5);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, SpeakersFlowBatch,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return gpu::to_string(info.param); });

INSTANTIATE_TEST_SUITE_P(Backends, SpeakersBatch,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return gpu::to_string(info.param); });

}  // namespace
}  // namespace etude::engine
