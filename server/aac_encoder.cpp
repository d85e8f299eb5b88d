#include "server/aac_encoder.h"

#ifdef ETUDE_WITH_AAC

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
}

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "audio-io/wav_writer.h"

namespace etude::server {

namespace {

// 64 kbit/s for one channel of speech at 24 kHz: FFmpeg's encoder defaults
// to 128 kbit/s, twice what OpenAI's and other services' mono speech uses,
// for no audible gain.
constexpr std::int64_t kBitRate = 64000;
// The muxer's output buffer; it is flushed after every add(), so this only
// bounds one write.
constexpr int kIoBuffer = 4096;

struct CodecFree {
    void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
    void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct IoFree {
    void operator()(AVIOContext* io) const {
        av_freep(&io->buffer);
        avio_context_free(&io);
    }
};
struct FormatFree {
    void operator()(AVFormatContext* f) const { avformat_free_context(f); }
};

// FFmpeg writes to stderr what it thinks worth saying at its default level,
// such as the encoder's mean quantiser each time one closes: a line per
// request in a server's log. Only its errors are worth one.
void quiet_ffmpeg() {
    static std::once_flag once;
    std::call_once(once, [] { av_log_set_level(AV_LOG_ERROR); });
}

class AacEncoder : public AudioEncoder {
  public:
    explicit AacEncoder(Writer write) : write_(std::move(write)) {}
    ~AacEncoder() override {
        // The format context's pb is ours (custom I/O): freed by io_ after it.
        if (format_) format_->pb = nullptr;
    }

    bool start(int rate) override {
        quiet_ffmpeg();
        const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_AAC);
        if (!codec) return false;
        codec_.reset(avcodec_alloc_context3(codec));
        if (!codec_) return false;
        codec_->sample_rate = rate;
        codec_->sample_fmt = AV_SAMPLE_FMT_FLTP;
        codec_->bit_rate = kBitRate;
        codec_->time_base = AVRational{1, rate};
        av_channel_layout_default(&codec_->ch_layout, 1);

        AVFormatContext* f = nullptr;
        if (avformat_alloc_output_context2(&f, nullptr, "adts", nullptr) < 0 || !f) return false;
        format_.reset(f);
        if (format_->oformat->flags & AVFMT_GLOBALHEADER)
            codec_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        if (avcodec_open2(codec_.get(), codec, nullptr) < 0) return false;

        auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBuffer));
        if (!buffer) return false;
        io_.reset(
            avio_alloc_context(buffer, kIoBuffer, 1, this, nullptr, &AacEncoder::put, nullptr));
        if (!io_) {
            av_free(buffer);
            return false;
        }
        format_->pb = io_.get();
        format_->flags |= AVFMT_FLAG_CUSTOM_IO;
        stream_ = avformat_new_stream(format_.get(), nullptr);
        if (!stream_ || avcodec_parameters_from_context(stream_->codecpar, codec_.get()) < 0)
            return false;
        stream_->time_base = codec_->time_base;
        if (avformat_write_header(format_.get(), nullptr) < 0) return false;
        frame_.reset(av_frame_alloc());
        packet_.reset(av_packet_alloc());
        if (!frame_ || !packet_) return false;
        frame_size_ = codec_->frame_size > 0 ? codec_->frame_size : 1024;
        avio_flush(io_.get());
        return !client_gone_;
    }

    bool add(std::span<const float> samples) override {
        // The same 16-bit samples as every other format: each decodes to
        // them, exactly or within its codec's error.
        pcm_.resize(samples.size());
        audio_io::float_to_pcm16(samples, pcm_);
        for (short s : pcm_) pending_.push_back(static_cast<float>(s) / 32768.0f);
        std::size_t used = 0;
        while (pending_.size() - used >= frame_size_) {
            if (!encode(std::span<const float>(pending_).subspan(used, frame_size_))) return false;
            used += frame_size_;
        }
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(used));
        avio_flush(io_.get());
        return !client_gone_ && !failed_;
    }

    bool finish() override {
        if (!pending_.empty()) {
            // A short last frame where the encoder takes one, else silence
            // to a whole frame (after the speech: nothing of it is lost).
            if (!(codec_->codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME))
                pending_.resize(frame_size_, 0.0f);
            if (!encode(pending_)) return false;
            pending_.clear();
        }
        if (!send(nullptr)) return false;  // the encoder's delayed frames
        const bool ok = av_write_trailer(format_.get()) == 0;
        avio_flush(io_.get());
        return ok && !client_gone_ && !failed_;
    }

    const char* content_type() const override { return "audio/aac"; }

  private:
#if LIBAVFORMAT_VERSION_MAJOR >= 61
    using IoBytes = const std::uint8_t*;
#else
    using IoBytes = std::uint8_t*;
#endif
    static int put(void* self, IoBytes data, int size) {
        auto& e = *static_cast<AacEncoder*>(self);
        if (!e.client_gone_ &&
            !e.write_(std::string_view(reinterpret_cast<const char*>(data), size)))
            e.client_gone_ = true;
        return size;
    }

    bool encode(std::span<const float> samples) {
        av_frame_unref(frame_.get());
        frame_->nb_samples = static_cast<int>(samples.size());
        frame_->format = codec_->sample_fmt;
        frame_->sample_rate = codec_->sample_rate;
        if (av_channel_layout_copy(&frame_->ch_layout, &codec_->ch_layout) < 0 ||
            av_frame_get_buffer(frame_.get(), 0) < 0)
            return fail();
        std::copy(samples.begin(), samples.end(), reinterpret_cast<float*>(frame_->data[0]));
        frame_->pts = next_pts_;
        next_pts_ += static_cast<std::int64_t>(samples.size());
        return send(frame_.get());
    }

    // Sends a frame (nullptr: the end) and writes every packet it gives.
    bool send(AVFrame* frame) {
        if (avcodec_send_frame(codec_.get(), frame) < 0) return fail();
        for (;;) {
            const int r = avcodec_receive_packet(codec_.get(), packet_.get());
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return true;
            if (r < 0) return fail();
            av_packet_rescale_ts(packet_.get(), codec_->time_base, stream_->time_base);
            packet_->stream_index = stream_->index;
            const int w = av_write_frame(format_.get(), packet_.get());
            av_packet_unref(packet_.get());
            if (w < 0) return fail();
        }
    }

    bool fail() {
        failed_ = true;
        return false;
    }

    Writer write_;
    std::unique_ptr<AVCodecContext, CodecFree> codec_;
    std::unique_ptr<AVIOContext, IoFree> io_;
    std::unique_ptr<AVFormatContext, FormatFree> format_;  // freed before io_
    AVStream* stream_ = nullptr;                           // format_'s
    std::unique_ptr<AVFrame, FrameFree> frame_;
    std::unique_ptr<AVPacket, PacketFree> packet_;
    std::size_t frame_size_ = 1024;
    std::int64_t next_pts_ = 0;
    std::vector<short> pcm_;
    std::vector<float> pending_;  // samples short of a whole frame
    bool client_gone_ = false, failed_ = false;
};

}  // namespace

bool aac_available() {
    return avcodec_find_encoder(AV_CODEC_ID_AAC) != nullptr;
}

std::unique_ptr<AudioEncoder> make_aac_encoder(AudioEncoder::Writer write) {
    // An FFmpeg built without its AAC encoder: refused as unbuilt (a 400
    // naming the formats), not a 200 whose body ends at once.
    if (!aac_available()) return nullptr;
    return std::make_unique<AacEncoder>(std::move(write));
}

}  // namespace etude::server

#else

namespace etude::server {

bool aac_available() {
    return false;
}

std::unique_ptr<AudioEncoder> make_aac_encoder(AudioEncoder::Writer) {
    return nullptr;
}

}  // namespace etude::server

#endif
