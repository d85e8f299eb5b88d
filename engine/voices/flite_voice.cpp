#include "engine/voices/flite_voice.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "engine/error.h"

extern "C" {
#include <flite/cst_cg.h>
#include <flite/cst_error.h>
#include <flite/cst_track.h>
#include <flite/cst_utt_utils.h>
#include <flite/flite.h>

cst_voice* register_cmu_us_slt(const char* voxdir);
cst_voice* register_cmu_us_rms(const char* voxdir);
cst_voice* register_cmu_us_awb(const char* voxdir);
}

namespace etude::engine {
namespace {

// Recursive: loading a voice runs a probe analysis while holding it.
std::recursive_mutex& flite_mutex() {
    static std::recursive_mutex m;
    return m;
}

// Flite reports errors by longjmp to cst_errjmp, or exit()s when it is unset.
// We set it around each call; no C++ object with a destructor lives in the
// frames a longjmp crosses (the caller holds only plain pointers there).
extern "C" int stop_waveform(const cst_wave*, int, int, int, cst_audio_streaming_info*) {
    return CST_AUDIO_STREAM_STOP;
}

struct Tracks {
    cst_utterance* utt = nullptr;
    cst_track* smoothed = nullptr;  // owned: result of mlpg()
    const cst_track* params = nullptr;
    const cst_track* strengths = nullptr;
    cst_cg_db* db = nullptr;
};

// Plain C-style function: safe to be the target of Flite's longjmp.
bool run_front_end(cst_voice* voice, const char* text, Tracks* out, float duration_stretch = 1.0f) {
    jmp_buf here;
    jmp_buf* previous = cst_errjmp;
    cst_errjmp = &here;
    if (setjmp(here) != 0) {
        cst_errjmp = previous;
        return false;
    }
    out->utt = new_utterance();
    cst_audio_streaming_info* asi = new_audio_streaming_info();
    asi->min_buffsize = 0;
    asi->asc = stop_waveform;
    feat_set(out->utt->features, "streaming_info", audio_streaming_info_val(asi));
    // Read by clustergen's duration prediction from the utterance, before
    // the voice's own setting: this utterance's pace alone.
    if (duration_stretch != 1.0f)
        feat_set_float(out->utt->features, "duration_stretch", duration_stretch);
    utt_set_input_text(out->utt, text);
    flite_do_synth(out->utt, voice, utt_synth);
    out->db = val_cg_db(utt_feat_val(out->utt, "cg_db"));
    const cst_val* p = feat_val(out->utt->features, "param_track");
    const cst_val* s = feat_val(out->utt->features, "str_track");
    if (p) {
        const cst_track* raw = val_track(p);
        if (out->db->do_mlpg && raw->num_frames > 0) {
            out->smoothed = mlpg(raw, out->db);
            out->params = out->smoothed;
        } else {
            out->params = raw;
        }
    }
    if (s) out->strengths = val_track(s);
    cst_errjmp = previous;
    return true;
}

void release(Tracks& t) {
    if (t.smoothed) delete_track(t.smoothed);
    if (t.utt) delete_utterance(t.utt);
    t = Tracks{};
}

cst_voice* register_voice(std::string_view name) {
    if (name == "slt") return register_cmu_us_slt(nullptr);
    if (name == "rms") return register_cmu_us_rms(nullptr);
    if (name == "awb") return register_cmu_us_awb(nullptr);
    return nullptr;
}

}  // namespace

const std::vector<std::string>& FliteVoice::names() {
    static const std::vector<std::string> n{"slt", "rms", "awb"};
    return n;
}

const FliteVoice& FliteVoice::load(std::string_view name) {
    static std::map<std::string, std::unique_ptr<FliteVoice>, std::less<>> loaded;
    std::lock_guard lock(flite_mutex());
    if (auto it = loaded.find(name); it != loaded.end()) return *it->second;
    static std::once_flag init;
    std::call_once(init, [] { flite_init(); });
    cst_voice* v = register_voice(name);
    if (!v) {
        std::string choices;
        for (const auto& n : names()) choices += (choices.empty() ? "" : ", ") + n;
        throw Error("unknown voice '" + std::string(name) + "' (choose one of: " + choices + ")");
    }
    auto voice = std::unique_ptr<FliteVoice>(new FliteVoice(std::string(name), v));
    return *loaded.emplace(std::string(name), std::move(voice)).first->second;
}

FliteVoice::FliteVoice(std::string name, void* voice) : name_(std::move(name)), voice_(voice) {
    auto* v = static_cast<cst_voice*>(voice_);
    const cst_val* dbv = feat_val(v->features, "cg_db");
    if (!dbv) throw Error("voice '" + name_ + "' is not a clustergen voice");
    const cst_cg_db* db = val_cg_db(dbv);
    vocoder_.sample_rate = db->sample_rate;
    vocoder_.frame_period =
        static_cast<std::size_t>(0.5 + db->frame_advance * static_cast<double>(db->sample_rate));
    vocoder_.alpha = db->mlsa_alpha;
    vocoder_.beta = db->mlsa_beta;
    vocoder_.gain = db->gain != 0.0f ? db->gain : 1.0;
    if (db->mixed_excitation) {
        for (int b = 0; b < db->ME_num; ++b)
            vocoder_.band_filters.emplace_back(db->me_h[b], db->me_h[b] + db->ME_order);
    }
    // The order comes from the parameter tracks: find it from a tiny utterance.
    AcousticFrames probe = analyse("a");
    if (probe.mcep_order == 0) throw Error("voice '" + name_ + "' produced no parameters");
    vocoder_.order = probe.mcep_order;
}

namespace {

AcousticFrames to_frames(const Tracks& t) {
    AcousticFrames out;
    if (!t.params || t.params->num_frames <= 1 || t.params->num_channels <= 2) return out;
    const auto frames = static_cast<std::size_t>(t.params->num_frames);
    out.frames = frames;
    out.mcep_order = static_cast<std::size_t>(t.params->num_channels - 1);
    out.bands = t.strengths ? static_cast<std::size_t>(t.strengths->num_channels) : 0;
    out.f0.resize(frames);
    out.mcep.resize(frames * out.mcep_order);
    out.strengths.assign(frames * out.bands, 0.0f);
    for (std::size_t f = 0; f < frames; ++f) {
        const float* row = t.params->frames[f];
        out.f0[f] = row[0];
        std::copy(row + 1, row + 1 + out.mcep_order, out.mcep.begin() + f * out.mcep_order);
        if (out.bands && static_cast<int>(f) < t.strengths->num_frames)
            std::copy(t.strengths->frames[f], t.strengths->frames[f] + out.bands,
                      out.strengths.begin() + f * out.bands);
    }
    return out;
}

// Each token's first word, at the start of its first segment: Flite's
// tokens are the written words (punctuation kept aside as features), its
// words what is said ("42" is two). Only lookups that cannot fail are used
// (a missing feature would longjmp out of Flite, past C++ frames).
std::vector<WordStart> find_word_starts(cst_utterance* utt, float frame_advance) {
    std::vector<WordStart> words;
    cst_relation* rel = utt_relation(utt, "Word");
    if (!rel || frame_advance <= 0) return words;
    for (cst_item* w = relation_head(rel); w; w = item_next(w)) {
        cst_item* in_token = item_as(w, "Token");
        if (!in_token || item_prev(in_token)) continue;
        cst_item* token = item_parent(in_token);
        cst_item* syllable = item_daughter(item_as(w, "SylStructure"));
        cst_item* segment = syllable ? item_as(item_daughter(syllable), "Segment") : nullptr;
        if (!token || !segment || !item_feat_present(token, "name")) continue;
        cst_item* before = item_prev(segment);
        const float start =
            before && item_feat_present(before, "end") ? item_feat_float(before, "end") : 0.0f;
        words.push_back({item_name(token), static_cast<std::size_t>(std::lround(
                                               std::max(0.0f, start) / frame_advance))});
    }
    return words;
}

std::string excerpt(const std::string& text) {
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

}  // namespace

AcousticFrames FliteVoice::analyse(std::string_view text, float duration_stretch) const {
    const std::string owned(text);
    std::lock_guard lock(flite_mutex());
    Tracks t;
    const bool ok =
        run_front_end(static_cast<cst_voice*>(voice_), owned.c_str(), &t, duration_stretch);
    AcousticFrames out = ok ? to_frames(t) : AcousticFrames{};
    if (out.frames > 0) out.words = find_word_starts(t.utt, t.db->frame_advance);
    release(t);
    if (!ok) throw Error("the Flite front end failed on the text \"" + excerpt(owned) + "\"");
    return out;
}

std::vector<short> FliteVoice::reference_waveform(std::string_view text, unsigned seed,
                                                  AcousticFrames* frames_out) const {
    const std::string owned(text);
    std::lock_guard lock(flite_mutex());
    Tracks t;
    if (!run_front_end(static_cast<cst_voice*>(voice_), owned.c_str(), &t) || !t.params) {
        release(t);
        throw Error("the Flite front end failed on the text \"" + excerpt(owned) + "\"");
    }
    std::srand(seed);
    cst_wave* w = mlsa_resynthesis(t.params, t.strengths, t.db, nullptr, 0);
    std::vector<short> samples;
    if (w) {
        samples.assign(w->samples, w->samples + w->num_samples);
        delete_wave(w);
    }
    if (frames_out) *frames_out = to_frames(t);
    release(t);
    return samples;
}

std::size_t FliteVoice::flite_synthesize(std::string_view text) const {
    const std::string owned(text);
    std::lock_guard lock(flite_mutex());
    cst_wave* w = flite_text_to_wave(owned.c_str(), static_cast<cst_voice*>(voice_));
    const std::size_t n = w ? static_cast<std::size_t>(w->num_samples) : 0;
    if (w) delete_wave(w);
    return n;
}

}  // namespace etude::engine
