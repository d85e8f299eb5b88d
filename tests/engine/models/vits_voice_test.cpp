// A Piper voice speaking a sentence in chunks (the flow streamed, the
// decoder chunk by chunk): the stream's seeded noise
// reproduces the sentence, and the streamed audio equals the offline render
// (whole-sentence flow and decoder) with the same seed, noise on.
#include "engine/models/vits/vits_voice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

using etude::test::max_abs_diff;

const std::string kData = etude::test::test_data_dir() + "/piper/";

std::vector<std::int64_t> reference_ids() {
    std::ifstream in(kData + "reference.json");
    return nlohmann::json::parse(in)["phoneme_ids"].get<std::vector<std::int64_t>>();
}

// Streams a sentence in chunks of `chunk` frames; `frames_to_first_audio`
// gets how many frames had gone in when the first samples came out.
std::vector<float> stream_all(const std::shared_ptr<const VitsVoice>& voice, std::uint64_t seed,
                              const std::vector<std::int64_t>& ids, int speaker, int chunk,
                              int* frames_to_first_audio = nullptr) {
    VitsSentenceStream stream(voice, seed);
    stream.start(ids, speaker, {});
    std::vector<float> got;
    int pushed = 0;
    while (!stream.done()) {
        const auto part = stream.next(chunk);
        pushed += chunk;
        if (got.empty() && !part.empty() && frames_to_first_audio) *frames_to_first_audio = pushed;
        got.insert(got.end(), part.begin(), part.end());
    }
    return got;
}

}  // namespace

TEST(VitsVoice, streamed_sentence_equals_the_offline_render_with_the_same_seed) {
    auto voice =
        VitsVoice::open(kData + "test_medium_multi.onnx", 22050, etude::gpu::shared_cpu_backend());
    EXPECT_EQ(voice->num_speakers(), 4);
    EXPECT_EQ(voice->hop(), 256);
    const auto ids = reference_ids();
    const auto offline = voice->render(ids, 1, {}, 42);
    ASSERT_FALSE(offline.empty());
    EXPECT_EQ(offline.size() % 256, 0u);
    for (int chunk : {1, 5, 32}) {
        SCOPED_TRACE(chunk);
        int first = 0;
        const auto streamed = stream_all(voice, 42, ids, 1, chunk, &first);
        ASSERT_EQ(streamed.size(), offline.size());
        const double diff = max_abs_diff(streamed, offline);
        std::printf(
            "[ cpu      ] chunks of %2d frames (flow streamed): max |streamed - "
            "offline| = %.3g, first audio after %d of %zu frames\n",
            chunk, diff, first, offline.size() / 256);
        EXPECT_LE(diff, 1e-5);
        // First audio as soon as a chunk has its right context, not after
        // the sentence.
        const int right = voice->decoder(1)->right_context();
        EXPECT_GT(first, 0);
        EXPECT_LE(first, right + chunk);
    }
    // The same seed reproduces the sentence exactly; another seed does not.
    EXPECT_EQ(voice->render(ids, 1, {}, 42), offline);
    EXPECT_GT(max_abs_diff(voice->render(ids, 1, {}, 43), offline), 1e-3);
    // Another speaker is another voice.
    EXPECT_GT(max_abs_diff(voice->render(ids, 2, {}, 42), offline), 1e-3);
}

TEST(VitsVoice, bad_speakers_and_files_are_refused) {
    auto voice =
        VitsVoice::open(kData + "test_medium_multi.onnx", 22050, etude::gpu::shared_cpu_backend());
    const auto ids = reference_ids();
    EXPECT_THROW(voice->render(ids, 4, {}, 1), etude::Error);
    EXPECT_THROW(voice->decoder(-1), etude::Error);
    EXPECT_THROW(VitsVoice::open(kData + "test_x_low.onnx", 0, etude::gpu::shared_cpu_backend()),
                 etude::Error);
    EXPECT_THROW(VitsVoice::open(kData + "not_vits.onnx", 16000, etude::gpu::shared_cpu_backend()),
                 etude::Error);
    EXPECT_THROW(VitsVoice::open(kData + "test_x_low.onnx", 16000, nullptr), etude::Error);
}
