#include "server/audio_encoding.h"

#include <sndfile.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "audio-io/wav_writer.h"

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

// FLAC through libsndfile's virtual I/O. The output cannot seek: what has
// gone to the client is gone. libFLAC writes STREAMINFO first and, at the
// end, seeks back to fill in the length and checksum; those rewrites of
// bytes already sent are dropped, so the stream says "length unknown"
// (total samples 0, no MD5), which FLAC allows for streams.
class FlacEncoder : public AudioEncoder {
  public:
    explicit FlacEncoder(Writer write) : write_(std::move(write)) {}
    ~FlacEncoder() override {
        if (file_) sf_close(file_);
    }
    bool start(int rate) override {
        SF_INFO info{};
        info.samplerate = rate;
        info.channels = 1;
        info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
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
        return file_ && !client_gone_;
    }
    bool add(std::span<const float> samples) override {
        // The same 16-bit samples as wav and pcm, so FLAC decodes to them exactly.
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
    const char* content_type() const override { return "audio/flac"; }

  private:
    static FlacEncoder& me(void* self) { return *static_cast<FlacEncoder*>(self); }
    Writer write_;
    SF_VIRTUAL_IO io_{};
    SNDFILE* file_ = nullptr;
    std::size_t pos_ = 0, sent_ = 0;
    bool client_gone_ = false;
    std::vector<short> pcm_;
};

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
    if (format == "flac") return std::make_unique<FlacEncoder>(std::move(write));
    return nullptr;
}

const char* audio_format_names() {
    return "wav, pcm, flac";
}

}  // namespace etude::server
