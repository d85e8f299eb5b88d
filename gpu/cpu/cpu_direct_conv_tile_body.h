// The register tiles' one body, included by each tile set's file
// (cpu_direct_conv_tiles.h lists them) inside that set's own namespace,
// after it defines:
// - ETUDE_TILE_CODE, the set's target attribute;
// - Lanes, kLanes floats of one vector, and splat, load, store and
//   fused_multiply_add over it (always inlined, with that attribute);
// - RowWeights, load_row_weights<R> and row_weight: the R rows' weights of
//   one (input channel, tap), broadcast to a vector each;
// - kRows and kVectors, the main tile's shape.
// Why a body included twice, not a template over Lanes: a target attribute
// cannot depend on a template parameter, and an always-inline vector helper
// cannot be inlined into a function compiled without its target.
//
// Every output column is bias + one fused multiply-add per (input channel,
// tap) in that order, whatever the set, tile or chunk it falls in: every set
// gives the same floats.
// The including file includes <algorithm>, <array>, <cstring>, <utility>
// and cpu_direct_conv_tiles.h before it opens its set's namespace (inside
// etude::gpu::cpu::tiles), as this body has no namespace or includes of
// its own.
#pragma once

constexpr int kTileColumns = kLanes * kVectors;
static_assert(kVectors == 3, "tile_rows_body's tail rule is written for 3-vector tiles");

// One tile: R output rows over kLanes V times of the staged input `xs`
// (rows xs_stride apart), written to `out` (rows out_stride apart), the
// first `keep` columns of each row.
template <int R, int V>
ETUDE_TILE_CODE void tile(const float* xs, std::size_t xs_stride, const Taps& t, const float* w,
                          const float* bias, float* out, std::size_t out_stride, int keep) {
    const int in_channels = t.in_channels, taps = t.taps;
    const std::ptrdiff_t x_step = t.x_step, w_in = t.w_in, w_row = t.w_row, w_tap = t.w_tap;
    Lanes acc[R][V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        const Lanes b = splat(bias ? bias[r] : 0.0f);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = b;
    }
    for (int ic = 0; ic < in_channels; ++ic) {
        const float* xr = xs + static_cast<std::size_t>(ic) * xs_stride;
        const float* wr = w + ic * w_in;
        for (int j = 0; j < taps; ++j) {
            const float* p = xr + j * x_step;
            const float* wj = wr + j * w_tap;
            Lanes x[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) x[v] = load(p + kLanes * v);
            const RowWeights weights = load_row_weights<R>(wj, w_row);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                const Lanes wv = row_weight(weights, r);
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] = fused_multiply_add(wv, x[v], acc[r][v]);
            }
        }
    }
    if (keep == kLanes * V) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) store(out + r * out_stride + kLanes * v, acc[r][v]);
        return;
    }
    // A last, partial tile: every accumulator stored by a fully unrolled
    // loop (an indexed one would keep them in memory through the whole sum).
    float rows[R][kLanes * V];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) store(rows[r] + kLanes * v, acc[r][v]);
    for (int r = 0; r < R; ++r) std::memcpy(out + r * out_stride, rows[r], sizeof(float) * keep);
}

using TileFn = void (*)(const float*, std::size_t, const Taps&, const float*, const float*, float*,
                        std::size_t, int);

template <int V, std::size_t... R>
constexpr std::array<TileFn, kRows> tiles_of_width(std::index_sequence<R...>) {
    return {tile<static_cast<int>(R) + 1, V>...};
}
template <std::size_t... V>
constexpr std::array<std::array<TileFn, kRows>, kVectors> tile_table(std::index_sequence<V...>) {
    return {tiles_of_width<static_cast<int>(V) + 1>(std::make_index_sequence<kRows>())...};
}
// kTiles[V - 1][R - 1]: the tile of R rows and V vectors.
constexpr auto kTiles = tile_table(std::make_index_sequence<kVectors>());

// Blocks of kRows rows (the last one fewer), each over the columns in tiles
// of kVectors vectors, the last kTileColumns + 1 to kTileColumns + kLanes
// columns as two of 2 vectors: a 1-vector tile has only kRows independent
// sums, too few to hide the multiply-add's latency, so it runs only on
// signals of kLanes columns or fewer.
inline void tile_rows_body(const float* stage, int width, const Taps& taps, const float* w,
                           const float* bias, int rows, int count, float* out,
                           std::size_t out_stride) {
    for (int o = 0; o < rows; o += kRows) {
        const int block = std::min(kRows, rows - o);
        const float* wo = w + o * taps.w_row;
        const float* bo = bias ? bias + o : nullptr;
        float* yo = out + static_cast<std::size_t>(o) * out_stride;
        for (int c = 0; c < count;) {
            const int left = count - c;
            const int vectors = left > kTileColumns && left <= kTileColumns + kLanes
                                    ? 2
                                    : std::min(kVectors, (left + kLanes - 1) / kLanes);
            const int keep = std::min(left, kLanes * vectors);
            kTiles[vectors - 1][block - 1](stage + c, static_cast<std::size_t>(width), taps, wo, bo,
                                           yo + c, out_stride, keep);
            c += keep;
        }
    }
}
