#include "dsp/resampler.h"

#include <samplerate.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace etude::dsp {

namespace {

int converter_type(ResamplerQuality q) {
    switch (q) {
        case ResamplerQuality::SincBest:
            return SRC_SINC_BEST_QUALITY;
        case ResamplerQuality::SincMedium:
            return SRC_SINC_MEDIUM_QUALITY;
        case ResamplerQuality::SincFastest:
            return SRC_SINC_FASTEST;
    }
    return SRC_SINC_MEDIUM_QUALITY;
}

void check_rate(const char* name, double rate) {
    if (!std::isfinite(rate) || rate <= 0.0) {
        std::ostringstream msg;
        msg << "StreamingResampler: " << name << " must be finite and > 0, got " << rate;
        throw std::invalid_argument(msg.str());
    }
}

// The sinc converters keep at most about coeff_half_len / index_inc input samples of history
// on each side of the output point (143 for SINC_BEST, fewer for the others), stretched by
// 1/ratio when downsampling. This rounds that up generously; the bound only sizes buffers.
constexpr double kHistoryInputSamples = 400.0;

// libsamplerate refuses null pointers even for zero-length buffers in some versions.
float g_dummy = 0.0f;

}  // namespace

void StreamingResampler::StateDeleter::operator()(SRC_STATE_tag* state) const {
    src_delete(state);
}

StreamingResampler::StreamingResampler(double in_rate, double out_rate, ResamplerQuality q)
    : ratio_(0.0) {
    check_rate("in_rate", in_rate);
    check_rate("out_rate", out_rate);
    ratio_ = out_rate / in_rate;
    if (!src_is_valid_ratio(ratio_)) {
        std::ostringstream msg;
        msg << "StreamingResampler: out_rate " << out_rate << " / in_rate " << in_rate << " = "
            << ratio_ << " is outside libsamplerate's 1/256..256";
        throw std::invalid_argument(msg.str());
    }
    int error = 0;
    state_.reset(src_new(converter_type(q), 1, &error));
    if (!state_) {
        throw std::runtime_error(std::string("StreamingResampler: src_new failed: ") +
                                 src_strerror(error));
    }
}

std::size_t StreamingResampler::max_output_for(std::size_t in_frames) const {
    const double history = kHistoryInputSamples / std::min(1.0, ratio_);
    return static_cast<std::size_t>(
               std::ceil((static_cast<double>(in_frames) + history) * ratio_)) +
           16;
}

std::size_t StreamingResampler::process(std::span<const float> in, std::span<float> out,
                                        bool end_of_input) {
    assert(state_);
    SRC_DATA data{};
    data.src_ratio = ratio_;
    data.end_of_input = end_of_input ? 1 : 0;
    std::size_t consumed = 0;
    std::size_t written = 0;
    // src_process stops early when the output space runs out, and a flush may need more
    // than one call to release everything, so keep calling until the input is gone and (when
    // flushing) a call produces nothing.
    for (;;) {
        const std::size_t in_left = in.size() - consumed;
        const std::size_t out_left = out.size() - written;
        data.data_in = in_left > 0 ? in.data() + consumed : &g_dummy;
        data.input_frames = static_cast<long>(in_left);
        data.data_out = out_left > 0 ? out.data() + written : &g_dummy;
        data.output_frames = static_cast<long>(out_left);
        const int error = src_process(state_.get(), &data);
        assert(error == 0);
        if (error != 0) break;
        consumed += static_cast<std::size_t>(data.input_frames_used);
        written += static_cast<std::size_t>(data.output_frames_gen);
        const bool input_done = consumed == in.size();
        if (input_done && (!end_of_input || data.output_frames_gen == 0)) break;
        if (written == out.size()) {
            assert(input_done && "StreamingResampler: output span smaller than max_output_for");
            break;
        }
        if (!input_done && data.input_frames_used == 0 && data.output_frames_gen == 0) {
            break;  // no progress possible; never expected, but must not spin
        }
    }
    if (end_of_input) reset();
    return written;
}

void StreamingResampler::reset() {
    if (state_) src_reset(state_.get());
}

}  // namespace etude::dsp
