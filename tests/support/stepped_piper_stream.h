// A Piper stream's voice on the CPU with no stream and no producer thread
// behind it, stepped by whoever holds it (StreamVoice::begin(), step()):
// what tests/engine/piper_sentence_steps_test.cpp checks and
// bench/stepped_streams.cpp times. Its sink keeps the audio written and the
// words planned, notes each write in a log the streams may share, and
// grants every unit's turn at once (outside the deadline order, as an
// offline reader's is).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/scheduling/block_records.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/streams/playback_ring.h"
#include "engine/voices/piper_stream_voice.h"
#include "engine/voices/piper_voice.h"

namespace etude::test {

class CollectingSink final : public engine::VoiceSink {
  public:
    CollectingSink(char name, std::string& log) : name_(name), log_(log) {}
    std::vector<float> audio;
    int writes = 0;
    std::string unspeakable;
    std::vector<std::pair<std::string, double>> words;  // text, samples from the start

    bool wait_for_room(std::size_t, std::uint64_t) override { return true; }
    bool write(std::span<const float> samples, const engine::ItemOrigin&, bool) override {
        audio.insert(audio.end(), samples.begin(), samples.end());
        ++writes;
        log_ += name_;
        return true;
    }
    bool cancelled(std::uint64_t) const override { return false; }
    bool shutting_down() override { return false; }
    void plan_word(std::string_view text, std::uint64_t start, double offset,
                   std::uint64_t) override {
        words.emplace_back(std::string(text), double(start) + offset);
    }
    void note_unspeakable(std::string reason) override { unspeakable = std::move(reason); }
    void note_words_unpaired() override {}
    engine::DeadlineGate::Turn wait_turn(const engine::ItemOrigin&) override {
        return engine::DeadlineGate::Turn::outside_the_order();
    }
    bool read_offline() const override { return true; }

  private:
    const char name_;
    std::string& log_;
};

struct SteppedPiperStream {
    engine::PlaybackRing ring;
    std::string own_log;
    CollectingSink sink;
    engine::BlockRecorder records;
    std::unique_ptr<engine::PiperStreamVoice> voice;
    engine::WorkItem item;
    int steps = 0;
    bool more = false, complete = false;

    // `log`: where its writes are noted (by `name`), its own if none.
    SteppedPiperStream(const std::shared_ptr<const engine::PiperVoice>& piper,
                       const std::string& path, std::uint64_t seed, char name = 's',
                       std::string* log = nullptr)
        : ring(piper->sample_rate(), std::size_t(piper->sample_rate() / 10), 5.0),
          sink(name, log ? *log : own_log) {
        engine::StreamOptions options;
        options.backend = "cpu";
        options.sample_rate = piper->sample_rate();
        engine::PiperVoiceOptions p;
        p.piper_voice = path;
        p.seed = seed;
        options.voice = p;
        voice = std::make_unique<engine::PiperStreamVoice>(piper, options, engine::FaultSpec{},
                                                           ring, sink, records);
    }
    // Analyses `ids` (as an engine worker would) and begins speaking them,
    // with a word every 20 ids, whose marks are wanted. Throws
    // std::runtime_error for a sentence the voice refuses.
    void begin(const std::vector<std::int64_t>& ids) {
        engine::Sentence s;
        s.phoneme_ids = ids;
        s.origin.generation = ring.generation();
        s.words_wanted = true;
        for (std::size_t i = 0; i < ids.size(); i += 20) s.words.push_back({std::to_string(i), i});
        std::string refusal;
        auto analysed = voice->analyse(s, refusal);
        if (!analysed) throw std::runtime_error("the sentence was refused: " + refusal);
        item = std::move(*analysed);
        voice->begin(item);
        more = true;
    }
    // One step of the sentence begun (call only while `more`).
    void step() {
        const engine::Spoken spoken = voice->step();
        ++steps;
        more = spoken.more;
        complete = spoken.complete;
    }
    void speak_alone(const std::vector<std::int64_t>& ids) {
        begin(ids);
        while (more) step();
    }
};

}  // namespace etude::test
