// The voices a server offers: what `describe` lists and what a request's
// voice (by name, by language, or none) resolves to. Each entry carries the
// StreamOptions that make its streams, so any voice the engine's public API
// can open (a Piper voice: piper_voice()) is added with add() and nothing
// else changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace etude::server {

struct VoiceEntry {
    std::string name;                    // what clients ask for ("slt")
    std::vector<std::string> languages;  // BCP 47 style, e.g. "en_US" as Piper writes it
    std::vector<std::string> speakers;   // empty: a single-speaker voice
    std::string description;
    std::string attribution_name, attribution_url;
    std::string version;
    engine::StreamOptions options;  // opens this voice; options.sample_rate is the output rate
    // The pace of speed 1.0, which the HTTP endpoint's `speed` divides: a
    // Piper voice's config's length_scale; 1 for the built-in voices (Flite's
    // duration stretch).
    float length_scale = 1.0f;

    // A speaker of this voice, by name or by id as Piper's tools take it
    // ("2"); false for a voice of one speaker.
    bool has_speaker(const std::string& speaker) const;
};

class VoiceCatalog {
  public:
    // Flite's embedded voices (slt first: the default).
    static VoiceCatalog builtin();
    // A Piper voice by path or name (engine::PiperVoiceOptions::piper_voice),
    // described from its config; throws etude::Error naming the file.
    static VoiceEntry piper_voice(const std::string& name_or_path);

    // Adds a voice; throws etude::Error if its name is taken or empty.
    void add(VoiceEntry entry);

    const std::vector<VoiceEntry>& voices() const { return voices_; }
    // The first voice added is the default.
    const VoiceEntry& default_voice() const;
    // By exact name; else nullptr.
    const VoiceEntry* by_name(const std::string& name) const;
    // The first voice listing `language` ("en_US"; "en-us" and "en" match
    // too); else nullptr.
    const VoiceEntry* by_language(const std::string& language) const;

  private:
    std::vector<VoiceEntry> voices_;
};

}  // namespace etude::server
