#include "server/audio_encoding.h"

#include <sndfile.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "audio-io/wav_writer.h"
#include "server/aac_encoder.h"

namespace etude::server {

namespace {

void put_u32(std::string& s, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u16(std::string& s, std::uint16_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>(v >> 8);
}

// 16-bit little-endian mono, with or without the WAV header in front.
class Pcm16Encoder : public AudioEncoder {
  public:
    Pcm16Encoder(Writer write, bool wav) : write_(std::move(write)), wav_(wav) {}
    bool start(int rate) override { return !wav_ || write_(streaming_wav_header(rate)); }
    bool add(std::span<const float> samples) override {
        pcm_.resize(samples.size());
        audio_io::float_to_pcm16(samples, pcm_);
        // Little-endian: the host order on every platform we build for.
        return write_(
            std::string_view(reinterpret_cast<const char*>(pcm_.data()), pcm_.size() * 2));
    }
    bool finish() override { return true; }
    const char* content_type() const override { return wav_ ? "audio/wav" : "audio/pcm"; }

  private:
    Writer write_;
    bool wav_;
    std::vector<short> pcm_;
};

// FLAC, MP3 (MPEG Layer III, LAME) and Ogg Opus through libsndfile's
// virtual I/O. The output cannot seek: what has gone to the client is gone.
// libFLAC writes STREAMINFO first and, at the end, seeks back to fill in the
// length and checksum; LAME likewise seeks back to fill in its Xing/LAME tag
// frame. Those rewrites of bytes already sent are dropped, so a FLAC stream
// says "length unknown" (total samples 0, no MD5), which FLAC allows for
// streams, and an MP3's first frame stays LAME's placeholder for the tag
// (all zeros after the frame header: 576 or 1152 samples of silence, plus
// the encoder's delay, before the speech). Ogg Opus is written
// page by page and never seeks back.
class SndfileEncoder : public AudioEncoder {
  public:
    SndfileEncoder(Writer write, int format, const char* content_type)
        : write_(std::move(write)), format_(format), content_type_(content_type) {}
    ~SndfileEncoder() override {
        if (file_) sf_close(file_);
    }
    bool start(int rate) override {
        SF_INFO info{};
        info.samplerate = rate;
        info.channels = 1;
        info.format = format_;
        io_.get_filelen = [](void* self) { return static_cast<sf_count_t>(me(self).sent_); };
        io_.seek = [](sf_count_t offset, int whence, void* self) -> sf_count_t {
            auto& e = me(self);
            const sf_count_t base = whence == SEEK_CUR   ? static_cast<sf_count_t>(e.pos_)
                                    : whence == SEEK_END ? static_cast<sf_count_t>(e.sent_)
                                                         : 0;
            if (base + offset < 0) return -1;
            e.pos_ = static_cast<std::size_t>(base + offset);
            return base + offset;
        };
        io_.read = [](void*, sf_count_t, void*) -> sf_count_t { return 0; };
        io_.write = [](const void* data, sf_count_t n, void* self) -> sf_count_t {
            auto& e = me(self);
            const auto* bytes = static_cast<const char*>(data);
            const auto count = static_cast<std::size_t>(n);
            // Only bytes past what was sent go out; a rewrite is dropped.
            if (e.pos_ + count > e.sent_) {
                const std::size_t skip = e.sent_ > e.pos_ ? e.sent_ - e.pos_ : 0;
                if (e.pos_ > e.sent_) return 0;  // a gap cannot be streamed
                if (!e.client_gone_ && !e.write_(std::string_view(bytes + skip, count - skip)))
                    e.client_gone_ = true;
                e.sent_ = e.pos_ + count;
            }
            e.pos_ += count;
            return n;
        };
        io_.tell = [](void* self) { return static_cast<sf_count_t>(me(self).pos_); };
        file_ = sf_open_virtual(&io_, SFM_WRITE, &info, this);
        if (file_ && (format_ & SF_FORMAT_SUBMASK) == SF_FORMAT_MPEG_LAYER_III) {
            // Constant bit rate: the Xing/LAME tag that would give a VBR
            // stream's length cannot be filled in (see above), and decoders
            // (mpg123, so libsndfile) then take the length from the file's
            // size over the bit rate, which only a constant one makes right.
            // Level 0.5: 80 kbit/s at 24 kHz mono, some 26 dB above the
            // error on speech.
            int mode = SF_BITRATE_MODE_CONSTANT;
            double level = 0.5;
            sf_command(file_, SFC_SET_BITRATE_MODE, &mode, sizeof mode);
            sf_command(file_, SFC_SET_COMPRESSION_LEVEL, &level, sizeof level);
        }
        if (file_ && (format_ & SF_FORMAT_SUBMASK) == SF_FORMAT_OPUS) {
            // An Ogg page holds up to a second of audio by default: a listener
            // would wait that long for the first bytes. 60 ms pages cost a
            // header of about 30 bytes each (under 1 % at Opus's bit rates).
            double page_ms = 60.0;
            sf_command(file_, SFC_SET_OGG_PAGE_LATENCY_MS, &page_ms, sizeof page_ms);
        }
        return file_ && !client_gone_;
    }
    bool add(std::span<const float> samples) override {
        // The same 16-bit samples as wav and pcm: FLAC decodes to them exactly,
        // MP3 and Opus to them within their codec's error.
        pcm_.resize(samples.size());
        audio_io::float_to_pcm16(samples, pcm_);
        const auto n = static_cast<sf_count_t>(pcm_.size());
        return sf_write_short(file_, pcm_.data(), n) == n && !client_gone_;
    }
    bool finish() override {
        const bool ok = sf_close(file_) == 0;
        file_ = nullptr;
        return ok && !client_gone_;
    }
    const char* content_type() const override { return content_type_; }

  private:
    static SndfileEncoder& me(void* self) { return *static_cast<SndfileEncoder*>(self); }
    Writer write_;
    int format_;
    const char* content_type_;
    SF_VIRTUAL_IO io_{};
    SNDFILE* file_ = nullptr;
    std::size_t pos_ = 0, sent_ = 0;
    bool client_gone_ = false;
    std::vector<short> pcm_;
};

bool one_of(int rate, std::initializer_list<int> rates) {
    return std::find(rates.begin(), rates.end(), rate) != rates.end();
}

}  // namespace

std::string streaming_wav_header(int rate) {
    std::string h = "RIFF";
    put_u32(h, 0xFFFFFFFFu);  // unknown length: the audio is still being made
    h += "WAVEfmt ";
    put_u32(h, 16);
    put_u16(h, 1);  // PCM
    put_u16(h, 1);  // mono
    put_u32(h, static_cast<std::uint32_t>(rate));
    put_u32(h, static_cast<std::uint32_t>(rate) * 2);
    put_u16(h, 2);
    put_u16(h, 16);
    h += "data";
    put_u32(h, 0xFFFFFFFFu);
    return h;
}

std::unique_ptr<AudioEncoder> make_audio_encoder(std::string_view format,
                                                 AudioEncoder::Writer write) {
    if (format == "wav") return std::make_unique<Pcm16Encoder>(std::move(write), true);
    if (format == "pcm") return std::make_unique<Pcm16Encoder>(std::move(write), false);
    if (format == "flac")
        return std::make_unique<SndfileEncoder>(std::move(write), SF_FORMAT_FLAC | SF_FORMAT_PCM_16,
                                                "audio/flac");
    if (format == "mp3")
        return std::make_unique<SndfileEncoder>(
            std::move(write), SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, "audio/mpeg");
    if (format == "opus")
        return std::make_unique<SndfileEncoder>(std::move(write), SF_FORMAT_OGG | SF_FORMAT_OPUS,
                                                "audio/ogg");
    if (format == "aac") return make_aac_encoder(std::move(write));  // nullptr where not built
    return nullptr;
}

std::vector<std::string> audio_formats() {
    std::vector<std::string> names{"mp3", "opus"};
    if (aac_available()) names.emplace_back("aac");
    for (const char* n : {"wav", "flac", "pcm"}) names.emplace_back(n);
    return names;
}

std::string audio_format_names() {
    std::string joined;
    for (const auto& n : audio_formats()) joined += (joined.empty() ? "" : ", ") + n;
    return joined;
}

std::optional<int> default_audio_rate(std::string_view format) {
    if (format == "pcm" || format == "mp3" || format == "opus" || format == "aac")
        return kOpenAiRate;
    return std::nullopt;
}

std::string audio_rate_problem(std::string_view format, int rate) {
    if (format == "opus" && !one_of(rate, {8000, 12000, 16000, 24000, 48000}))
        return "opus is made at 8000, 12000, 16000, 24000 or 48000 Hz";
    if (format == "mp3" &&
        !one_of(rate, {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}))
        return "mp3 is made at 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100 or 48000 Hz";
    // ISO/IEC 14496-3's sampling frequency index (ADTS names one of these).
    if (format == "aac" && !one_of(rate, {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100,
                                          48000, 64000, 88200, 96000}))
        return "aac is made at 8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, "
               "64000, 88200 or 96000 Hz";
    if (rate < 8000 || rate > 192000) return "the rate must be 8000 to 192000 Hz";
    return {};
}

}  // namespace etude::server
