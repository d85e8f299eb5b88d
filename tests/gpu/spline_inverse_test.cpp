// gpu::Backend::spline_inverse (gpu/kernels/spline_bodies.h) on every device
// the registry opens, against the definition computed in double on the
// host, written here as Piper's transforms.py writes it (cumulative sums
// of the padded bin sizes, searchsorted, the quadratic's root).
//
// Tolerance, element by element, from float rounding alone. Every quantity
// the float body forms passes through at most m = bins + 16 roundings in a
// row (a knot is a running sum of `bins` terms, each term and everything
// after it a few more: exp within 4 ulp, a division, the softplus series,
// the root's handful of products), so each is within m u of its value,
// relatively (u = 2^-24; a knot, 2 bound times a sum less bound, within
// m u 2 bound). To first order the output then moves by at most m u (sum
// over q of |dy/dq| |q| + |y|), q the bin's knots (|q| taken as 2 bound),
// its end derivatives and x (the partial derivatives by central
// differences of the double definition); where x lies within a knot's
// rounding of the next bin, the float body may take that bin, whose
// inverse differs by about as much (the spline is continuous). A wrong bin, a wrong knot or a
// misplaced parameter moves the output by a good part of a bin, far outside this.
#include "gpu/backend_parity.h"

namespace etude::gpu {
namespace {

constexpr double kUnit = 1.0 / (1 << 24);

// The bin an element falls into and everything its root needs, in double.
struct Bin {
    double w0, w1, h0, h1, d0, d1;
};

double softplus(double v) {
    return v > 20 ? v : std::log1p(std::exp(v));
}

// Piper's rational_quadratic_spline: knots from the softmax of the bin
// sizes (each at least 1e-3), the ends pinned to +-bound, derivatives
// softplus + 1e-3 inside and 1 at the ends.
struct Spline {
    std::vector<double> cw, ch, d;
    int bins;
    // The bin of x, by searchsorted.
    int bin_index(double x) const {
        int k = 0;
        while (k < bins - 1 && x >= ch[std::size_t(k) + 1]) ++k;
        return k;
    }
    Bin bin(int k) const {
        const std::size_t i = std::size_t(k);
        return {cw[i], cw[i + 1], ch[i], ch[i + 1], d[i], d[i + 1]};
    }
};

Spline spline_of(const float* p, int bins, double bound, double scale) {
    const auto knots = [&](const float* raw) {
        double top = -INFINITY, sum = 0;
        for (int i = 0; i < bins; ++i) top = std::max(top, double(raw[i]) * scale);
        for (int i = 0; i < bins; ++i) sum += std::exp(double(raw[i]) * scale - top);
        std::vector<double> cum(std::size_t(bins) + 1, 0.0);
        double acc = 0;
        for (int i = 0; i < bins; ++i) {
            acc += 1e-3 + (1 - 1e-3 * bins) * std::exp(double(raw[i]) * scale - top) / sum;
            cum[std::size_t(i) + 1] = 2 * bound * acc - bound;
        }
        cum.front() = -bound;
        cum.back() = bound;
        return cum;
    };
    Spline s{knots(p), knots(p + bins), {}, bins};
    for (int i = 0; i <= bins; ++i)
        s.d.push_back(i == 0 || i == bins ? 1.0 : 1e-3 + softplus(p[2 * bins + i - 1]));
    return s;
}

double root(double x, const Bin& b) {
    const double w = b.w1 - b.w0, h = b.h1 - b.h0, slope = h / w, dy = x - b.h0;
    const double curve = b.d0 + b.d1 - 2 * slope;
    const double a = dy * curve + h * (slope - b.d0);
    const double bb = h * b.d0 - dy * curve;
    const double c = -slope * dy;
    const double theta = 2 * c / (-bb - std::sqrt(std::max(0.0, bb * bb - 4 * a * c)));
    return theta * w + b.w0;
}

// The rounding bound of the top of the file for x's inverse in bin b.
double bound_in(double x, const Bin& b, int bins, double bound) {
    const double y = root(x, b);
    double sensitivity = std::fabs(y);
    double Bin::*fields[] = {&Bin::w0, &Bin::w1, &Bin::h0, &Bin::h1, &Bin::d0, &Bin::d1};
    for (auto f : fields) {
        const double step = 1e-7 * std::max(1.0, std::fabs(b.*f));
        Bin up = b, down = b;
        up.*f += step;
        down.*f -= step;
        // A knot is 2 bound times a sum, less bound: its rounding scales
        // with 2 bound, not with the knot (which cancels near 0).
        const bool knot = f != &Bin::d0 && f != &Bin::d1;
        const double size = knot ? 2 * bound : std::fabs(b.*f);
        sensitivity += std::fabs((root(x, up) - root(x, down)) / (2 * step)) * size;
    }
    const double step = 1e-7 * std::max(1.0, std::fabs(x));
    sensitivity += std::fabs((root(x + step, b) - root(x - step, b)) / (2 * step)) * std::fabs(x);
    return (bins + 16) * kUnit * sensitivity;
}

// The definition, and how far from it the float body may land: within the
// bound in x's bin, or, where x lies within a knot's rounding (m u bound)
// of the next bin, that bin's inverse within its bound (the spline is
// continuous, so the two differ only by the knot's rounding).
std::pair<double, double> inverse_and_bound(float xf, const float* p, int bins, double bound,
                                            double scale) {
    const double x = xf;
    if (!(x >= -bound && x <= bound)) return {x, 0.0};
    const Spline s = spline_of(p, bins, bound, scale);
    const int k = s.bin_index(x);
    const double y = root(x, s.bin(k));
    double allowed = bound_in(x, s.bin(k), bins, bound);
    const double knot_rounding = (bins + 16) * kUnit * bound;
    for (int j : {k - 1, k + 1}) {
        if (j < 0 || j >= bins) continue;
        const double knot = s.ch[std::size_t(std::max(j, k))];  // between bins j and k
        if (std::fabs(x - knot) > knot_rounding) continue;
        const Bin other = s.bin(j);
        allowed =
            std::max(allowed, std::fabs(root(x, other) - y) + bound_in(x, other, bins, bound));
    }
    return {y, allowed};
}

class SplineInverse : public BackendParity {};

struct SplineCase {
    int count, bins;
    float bound, scale, spread;  // parameters uniform in [-spread, spread]
};

TEST_P(SplineInverse, inverts_the_rational_quadratic_spline_per_element) {
    // Piper's (10 bins, bound 5, 1/sqrt(192) and 1/sqrt(96) on the sizes),
    // one bin, a few bins with sharp softmaxes and derivatives near the
    // minimum, and many bins.
    const SplineCase cases[] = {{1, 10, 5.0f, 0.0722f, 3.0f},  {400, 10, 5.0f, 0.0722f, 3.0f},
                                {300, 10, 5.0f, 0.102f, 8.0f}, {64, 1, 5.0f, 1.0f, 2.0f},
                                {257, 3, 2.0f, 1.0f, 9.0f},    {200, 64, 5.0f, 0.5f, 4.0f}};
    for (const auto& s : cases) {
        const int width = 3 * s.bins - 1;
        auto params =
            random_vector(std::size_t(s.count) * width, 950 + s.count, -s.spread, s.spread);
        // Inside the interval mostly, some outside, the edges, and every
        // element's own knots (the bin boundaries) for the first few.
        auto x = random_vector(std::size_t(s.count), 960 + s.bins, -1.2f * s.bound, 1.2f * s.bound);
        if (s.count > 3) {
            x[0] = -s.bound;
            x[1] = s.bound;
            x[2] = 0.0f;
        }
        for (int i = 3; i < std::min(s.count, 3 + s.bins); ++i) {
            // Element i at its upper knot of bin i - 3 (in float).
            double top = -INFINITY, sum = 0, acc = 0;
            const float* h = params.data() + std::size_t(i) * width + s.bins;
            for (int j = 0; j < s.bins; ++j) top = std::max(top, double(h[j]) * s.scale);
            for (int j = 0; j < s.bins; ++j) sum += std::exp(double(h[j]) * s.scale - top);
            for (int j = 0; j <= i - 3; ++j)
                acc += 1e-3 + (1 - 1e-3 * s.bins) * std::exp(double(h[j]) * s.scale - top) / sum;
            x[std::size_t(i)] = float(2 * s.bound * acc - s.bound);
        }
        std::vector<double> want(x.size()), bound(x.size());
        for (int i = 0; i < s.count; ++i)
            std::tie(want[std::size_t(i)], bound[std::size_t(i)]) =
                inverse_and_bound(x[std::size_t(i)], params.data() + std::size_t(i) * width, s.bins,
                                  s.bound, s.scale);
        const auto p = upload(params);
        const auto xs = upload(x);
        auto y = output(x.size());
        ref_.spline_inverse(*rq_, s.count, s.bins, s.bound, s.scale, p.ref, xs.ref, y.ref);
        dev_->spline_inverse(*dq_, s.count, s.bins, s.bound, s.scale, p.dev, xs.dev, y.dev);
        auto in_place = upload(x);
        dev_->spline_inverse(*dq_, s.count, s.bins, s.bound, s.scale, p.dev, in_place.dev,
                             in_place.dev);
        const std::string what =
            "spline_inverse n=" + std::to_string(s.count) + " bins=" + std::to_string(s.bins);
        const auto check = [&](const char* who, const std::vector<float>& got) {
            double worst = 0;
            std::size_t bad = 0, first_bad = 0;
            for (std::size_t i = 0; i < want.size(); ++i) {
                const double err = std::fabs(double(got[i]) - want[i]);
                // One float rounding of the result itself on top.
                const double allowed = bound[i] + std::fabs(want[i]) * kUnit;
                const double share = allowed > 0 ? err / allowed : (err > 0 ? 1e30 : 0);
                if (!(share <= 1.0) && bad++ == 0) first_bad = i;
                if (!(share <= worst)) worst = share;
            }
            std::printf("[ parity ] %-6s %-40s error at most %.3f of its bound (%s)\n", label(),
                        what.c_str(), worst, who);
            EXPECT_EQ(bad, 0u) << what << " (" << who << "): element " << first_bad << " is "
                               << got[first_bad] << ", want " << want[first_bad] << " within "
                               << bound[first_bad];
        };
        check(label(), dev_data(y));
        check("in place", dev_data(in_place));
        check("cpu reference", ref_data(y));
    }
}

TEST_P(SplineInverse, outside_the_interval_is_the_identity_and_inside_it_the_inverse) {
    // The forward spline of Piper's transforms.py at a few points, then its
    // inverse must give them back: an independent check of the root.
    const int bins = 10, width = 3 * bins - 1;
    const auto params = random_vector(width, 971, -3.0f, 3.0f);
    std::vector<float> xs{-7.0f, -5.5f, 5.25f, 100.0f}, want{-7.0f, -5.5f, 5.25f, 100.0f};
    for (double t : {-4.9, -2.5, -0.3, 0.0, 1.7, 4.2}) {
        // Forward: bin by the widths' knots, then Piper's rational quadratic.
        double top = -INFINITY, sum = 0;
        for (int i = 0; i < bins; ++i) top = std::max(top, double(params[std::size_t(i)]));
        for (int i = 0; i < bins; ++i) sum += std::exp(params[std::size_t(i)] - top);
        double acc = 0, w0 = -5, w1 = 5;
        int k = 0;
        for (; k < bins; ++k) {
            acc += 1e-3 + (1 - 1e-3 * bins) * std::exp(params[std::size_t(k)] - top) / sum;
            w1 = k == bins - 1 ? 5.0 : 10 * acc - 5;
            if (t < w1) break;
            w0 = w1;
        }
        double htop = -INFINITY, hsum = 0, hacc = 0, h0 = -5, h1 = 5;
        for (int i = 0; i < bins; ++i) htop = std::max(htop, double(params[std::size_t(bins + i)]));
        for (int i = 0; i < bins; ++i) hsum += std::exp(params[std::size_t(bins + i)] - htop);
        for (int i = 0; i <= k; ++i) {
            h0 = i == 0 ? -5.0 : h1;
            hacc +=
                1e-3 + (1 - 1e-3 * bins) * std::exp(params[std::size_t(bins + i)] - htop) / hsum;
            h1 = i == bins - 1 ? 5.0 : 10 * hacc - 5;
        }
        const auto deriv = [&](int i) {
            return i == 0 || i == bins ? 1.0
                                       : 1e-3 + softplus(params[std::size_t(2 * bins + i - 1)]);
        };
        const double d0 = deriv(k), d1 = deriv(k + 1);
        const double w = w1 - w0, h = h1 - h0, delta = h / w, theta = (t - w0) / w;
        const double tt = theta * (1 - theta);
        const double y =
            h0 + h * (delta * theta * theta + d0 * tt) / (delta + (d0 + d1 - 2 * delta) * tt);
        xs.push_back(float(y));
        want.push_back(float(t));
    }
    std::vector<float> all_params;
    for (std::size_t i = 0; i < xs.size(); ++i)
        all_params.insert(all_params.end(), params.begin(), params.end());
    const auto p = upload(all_params);
    auto y = upload(xs);
    dev_->spline_inverse(*dq_, int(xs.size()), bins, 5.0f, 1.0f, p.dev, y.dev, y.dev);
    const auto got = dev_data(y);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << "outside, element " << i;
    for (std::size_t i = 4; i < xs.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4) << "the inverse of the forward spline at " << want[i];
}

// Checked once in gpu::Backend, for every backend, before anything is queued.
TEST_P(SplineInverse, bad_arguments_are_refused_before_anything_runs) {
    auto p = upload(random_vector(29 * 4, 980));
    auto x = upload(random_vector(4, 981));
    auto y = output(4);
    const auto call = [&](int count, int bins, float bound, float scale, const DeviceBuffer& params,
                          DeviceBuffer& out) {
        dev_->spline_inverse(*dq_, count, bins, bound, scale, params, x.dev, out);
    };
    EXPECT_THROW(call(4, 0, 5.0f, 1.0f, p.dev, y.dev), std::invalid_argument);  // no bins
    EXPECT_THROW(call(4, 5000, 5.0f, 1.0f, p.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(call(4, 10, 0.0f, 1.0f, p.dev, y.dev), std::invalid_argument);  // empty interval
    EXPECT_THROW(call(4, 10, NAN, 1.0f, p.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(call(4, 10, 5.0f, INFINITY, p.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(call(4, 11, 5.0f, 1.0f, p.dev, y.dev), std::invalid_argument);  // params short
    EXPECT_THROW(call(5, 10, 5.0f, 1.0f, p.dev, y.dev), std::invalid_argument);  // x, y short
    EXPECT_THROW(call(1, 1, 5.0f, 1.0f, p.dev, p.dev), std::invalid_argument);   // params are y
    dev_->synchronize(*dq_);
    expect_equal_to("y after refused calls", y, std::vector<float>(4, 12345.0f), 0.0);
    call(0, 10, 5.0f, 1.0f, p.dev, y.dev);  // nothing to do
    dev_->synchronize(*dq_);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, SplineInverse, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace etude::gpu
