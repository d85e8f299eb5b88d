// How much mel context a network needs on each side of the frames it
// produces, walked from one output frame back through every layer. Not a
// public interface.
#pragma once

#include <algorithm>

namespace etude::engine {

inline long floor_div(long a, long b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline long ceil_div(long a, long b) {
    return -floor_div(-a, b);
}

// Tracks how far each layer's input must reach for one output frame, so the
// streaming window carries exactly the context the receptive field needs.
// Intervals are [lo, hi) in the layer's own samples; `rate` is samples per
// mel frame at that layer.
class ReceptiveField {
  public:
    struct Interval {
        long lo, hi;
    };
    void require(Interval in, long rate) {
        left_ = std::max<long>(left_, ceil_div(-in.lo, rate));
        right_ = std::max<long>(right_, ceil_div(in.hi, rate) - 1);
    }
    // Stride-1 convolution with `padding`: output [lo, hi) reads this input.
    static Interval through_conv(Interval out, long kernel, long dilation, long padding) {
        return {out.lo - padding, out.hi - padding + (kernel - 1) * dilation};
    }
    static Interval through_transpose(Interval out, long kernel, long stride, long padding) {
        return {ceil_div(out.lo + padding - (kernel - 1), stride),
                floor_div(out.hi - 1 + padding, stride) + 1};
    }
    int left() const { return static_cast<int>(left_); }
    int right() const { return static_cast<int>(right_); }

  private:
    long left_ = 0, right_ = 0;
};

}  // namespace etude::engine
