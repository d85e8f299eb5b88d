#include "engine/models/model_metadata.h"

#include "engine/models/lef_file.h"
#include "engine/models/metadata_reader.h"

namespace etude::engine {

ModelAudioParams read_audio_params(const MetadataReader& m) {
    const MetadataReader::Json& r = m.root();
    ModelAudioParams a;
    a.architecture = m.text(r, "architecture", {"hifigan", "vocos"});
    a.sample_rate = m.integer(r, "sample_rate", 8000, 192000);
    a.n_fft = m.integer(r, "n_fft", 16, 1 << 16);
    a.hop = m.integer(r, "hop", 1, a.n_fft);
    a.win_length = m.integer(r, "win_length", 1, a.n_fft);
    m.text(r, "window", {"hann"});
    a.n_mels = m.integer(r, "n_mels", 1, 512);
    a.fmin = m.number(r, "fmin");
    a.fmax = m.number(r, "fmax");
    if (a.fmin < 0 || a.fmax <= a.fmin || a.fmax > a.sample_rate / 2.0 + 1e-6)
        m.fail("fmin/fmax", "must satisfy 0 <= fmin < fmax <= sample_rate/2");
    a.mel_scale = m.text(r, "mel_scale", {"slaney", "htk"});
    a.mel_norm = m.text(r, "mel_norm", {"slaney", "none"});
    a.mel_power = m.number(r, "mel_power");
    if (a.mel_power != 1.0 && a.mel_power != 2.0) m.fail("mel_power", "must be 1 or 2");
    a.log_floor = m.number(r, "log_floor");
    if (!(a.log_floor > 0)) m.fail("log_floor", "must be positive");
    a.magnitude_eps = m.number(r, "magnitude_eps");
    if (a.magnitude_eps < 0) m.fail("magnitude_eps", "must not be negative");
    a.padding = m.text(r, "padding", {"reflect_half", "center"});
    return a;
}

ModelAudioParams read_model_audio(const std::string& path) {
    const LefFile file = LefFile::open(path);
    return read_audio_params(MetadataReader(file.metadata_json(), path));
}

dsp::LogMelConfig log_mel_config(const ModelAudioParams& a) {
    dsp::LogMelConfig c;
    c.sample_rate = a.sample_rate;
    c.n_fft = static_cast<std::size_t>(a.n_fft);
    c.hop = static_cast<std::size_t>(a.hop);
    c.win_length = static_cast<std::size_t>(a.win_length);
    c.n_mels = static_cast<std::size_t>(a.n_mels);
    c.fmin = a.fmin;
    c.fmax = a.fmax;
    c.scale = a.mel_scale == "htk" ? dsp::MelScale::Htk : dsp::MelScale::Slaney;
    c.norm = a.mel_norm == "slaney" ? dsp::MelNorm::Slaney : dsp::MelNorm::None;
    c.power = a.mel_power;
    c.magnitude_eps = a.magnitude_eps;
    c.log_floor = a.log_floor;
    c.padding = a.padding == "center" ? dsp::MelPadding::Center : dsp::MelPadding::ReflectHalf;
    return c;
}

}  // namespace etude::engine
