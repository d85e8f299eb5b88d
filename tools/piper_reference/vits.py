"""VITS as Piper trains and exports it, written out for reference data.

The inference path of Piper's SynthesizerTrn (piper_train/vits): text
encoder, stochastic duration predictor run in reverse, durations scaled and
rounded up, prior sampled with noise_scale, residual-coupling flow in
reverse, HiFi-GAN decoder. Module and parameter names follow Piper's so that
the ONNX export names its initializers the way a real voice does (the engine
must not rely on them: the flow's weight-normed convolutions come out as
anonymous `onnx::Conv_NNNN` constants either way).

Only what inference needs is here: no posterior encoder, no discriminators,
no forward (training) direction of the flows. Dropout is absent (inference).
"""

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class LayerNorm(nn.Module):
    """Layer norm over the channel axis of [b, c, t], eps 1e-5."""

    def __init__(self, channels):
        super().__init__()
        self.channels = channels  # a Python int: the export needs a static shape
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        y = F.layer_norm(x.transpose(1, -1), (self.channels,), self.gamma, self.beta, 1e-5)
        return y.transpose(1, -1)


def length_mask(lengths, max_length):
    """[b] lengths -> [b, max_length] bool, true inside."""
    positions = torch.arange(max_length, dtype=lengths.dtype, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


# ---------------------------------------------------------------------------
# Text encoder: post-norm transformer with relative-position self-attention


class RelativeSelfAttention(nn.Module):
    """Multi-head self-attention with learned relative-position embeddings for
    keys and values, shared by the heads, over offsets -window..window; offsets
    outside the window contribute nothing."""

    def __init__(self, channels, n_heads, window):
        super().__init__()
        self.n_heads = n_heads
        self.head_channels = channels // n_heads
        self.window = window
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        spread = self.head_channels**-0.5
        self.emb_rel_k = nn.Parameter(torch.randn(1, 2 * window + 1, self.head_channels) * spread)
        self.emb_rel_v = nn.Parameter(torch.randn(1, 2 * window + 1, self.head_channels) * spread)

    def _offsets_for(self, table, length):
        """Rows of `table` for offsets -(length-1)..(length-1): zero-padded
        beyond the window, so there is no data-dependent branch in the graph."""
        extra = max(length - (self.window + 1), 0)
        first = max((self.window + 1) - length, 0)
        if extra > 0:
            table = F.pad(table, (0, 0, extra, extra, 0, 0))
        return table[:, first : first + 2 * length - 1]

    @staticmethod
    def _relative_to_absolute(x):
        """[b, h, l, 2l-1] indexed by offset -> [b, h, l, l] indexed by key
        position, by the pad-and-reshape skew."""
        b, h, l, _ = x.size()
        x = F.pad(x, (0, 1, 0, 0, 0, 0, 0, 0))
        x = x.view([b, h, l * 2 * l])
        x = F.pad(x, (0, l - 1, 0, 0, 0, 0))
        return x.view([b, h, l + 1, 2 * l - 1])[:, :, :l, l - 1 :]

    @staticmethod
    def _absolute_to_relative(x):
        """[b, h, l, l] -> [b, h, l, 2l-1], the inverse skew."""
        b, h, l, _ = x.size()
        x = F.pad(x, (0, l - 1, 0, 0, 0, 0, 0, 0))
        x = x.view([b, h, l * l + l * (l - 1)])
        x = F.pad(x, (l, 0, 0, 0, 0, 0))
        return x.view([b, h, l, 2 * l])[:, :, :, 1:]

    def forward(self, x, attn_mask):
        q, k, v = self.conv_q(x), self.conv_k(x), self.conv_v(x)
        b, d, t = k.size()
        q = q.view(b, self.n_heads, self.head_channels, t).transpose(2, 3)
        k = k.view(b, self.n_heads, self.head_channels, t).transpose(2, 3)
        v = v.view(b, self.n_heads, self.head_channels, t).transpose(2, 3)
        q = q / math.sqrt(self.head_channels)
        scores = torch.matmul(q, k.transpose(-2, -1))
        rel_k = self._offsets_for(self.emb_rel_k, t)
        rel_logits = torch.matmul(q, rel_k.unsqueeze(0).transpose(-2, -1))
        scores = scores + self._relative_to_absolute(rel_logits)
        scores = scores.masked_fill(attn_mask == 0, -1e4)
        weights = F.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)
        rel_v = self._offsets_for(self.emb_rel_v, t)
        out = out + torch.matmul(self._absolute_to_relative(weights), rel_v.unsqueeze(0))
        out = out.transpose(2, 3).contiguous().view(b, d, t)
        return self.conv_o(out)


class FeedForward(nn.Module):
    """Two convolutions of kernel k with ReLU between, 'same' padding
    ((k-1)//2 left, k//2 right), input masked before each."""

    def __init__(self, channels, filter_channels, kernel_size):
        super().__init__()
        self.kernel_size = kernel_size
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size)

    def _pad(self, x):
        return F.pad(x, ((self.kernel_size - 1) // 2, self.kernel_size // 2, 0, 0, 0, 0))

    def forward(self, x, x_mask):
        x = torch.relu(self.conv_1(self._pad(x * x_mask)))
        return self.conv_2(self._pad(x * x_mask)) * x_mask


class TransformerEncoder(nn.Module):
    def __init__(self, hidden, filter_channels, n_heads, n_layers, kernel_size, window=4):
        super().__init__()
        self.attn_layers = nn.ModuleList(
            RelativeSelfAttention(hidden, n_heads, window) for _ in range(n_layers)
        )
        self.norm_layers_1 = nn.ModuleList(LayerNorm(hidden) for _ in range(n_layers))
        self.ffn_layers = nn.ModuleList(
            FeedForward(hidden, filter_channels, kernel_size) for _ in range(n_layers)
        )
        self.norm_layers_2 = nn.ModuleList(LayerNorm(hidden) for _ in range(n_layers))

    def forward(self, x, x_mask):
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)
        x = x * x_mask
        for attn, norm_1, ffn, norm_2 in zip(
            self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2
        ):
            x = norm_1(x + attn(x, attn_mask))
            x = norm_2(x + ffn(x, x_mask))
        return x * x_mask


class TextEncoder(nn.Module):
    def __init__(self, n_vocab, out_channels, hidden, filter_channels, n_heads, n_layers, kernel):
        super().__init__()
        self.hidden = hidden
        self.out_channels = out_channels
        self.emb = nn.Embedding(n_vocab, hidden)
        self.encoder = TransformerEncoder(hidden, filter_channels, n_heads, n_layers, kernel)
        self.proj = nn.Conv1d(hidden, out_channels * 2, 1)

    def forward(self, ids, lengths):
        x = self.emb(ids) * math.sqrt(self.hidden)
        x = torch.transpose(x, 1, -1)
        x_mask = torch.unsqueeze(length_mask(lengths, x.size(2)), 1).type_as(x)
        x = self.encoder(x * x_mask, x_mask)
        stats = self.proj(x) * x_mask
        m, logs = torch.split(stats, self.out_channels, dim=1)
        return x, m, logs, x_mask


# ---------------------------------------------------------------------------
# Stochastic duration predictor (reverse direction only)


class DDSConv(nn.Module):
    """Dilated depth-separable convolutions: per layer a depthwise conv of
    kernel k and dilation k**i, layer norm, GELU, a 1x1 conv, layer norm, GELU,
    added back to the input."""

    def __init__(self, channels, kernel_size, n_layers):
        super().__init__()
        self.convs_sep = nn.ModuleList()
        self.convs_1x1 = nn.ModuleList()
        self.norms_1 = nn.ModuleList()
        self.norms_2 = nn.ModuleList()
        for i in range(n_layers):
            dilation = kernel_size**i
            padding = (kernel_size * dilation - dilation) // 2
            self.convs_sep.append(
                nn.Conv1d(channels, channels, kernel_size, groups=channels, dilation=dilation,
                          padding=padding))
            self.convs_1x1.append(nn.Conv1d(channels, channels, 1))
            self.norms_1.append(LayerNorm(channels))
            self.norms_2.append(LayerNorm(channels))

    def forward(self, x, x_mask, g=None):
        if g is not None:
            x = x + g
        for sep, pointwise, norm_1, norm_2 in zip(
            self.convs_sep, self.convs_1x1, self.norms_1, self.norms_2
        ):
            y = F.gelu(norm_1(sep(x * x_mask)))
            y = F.gelu(norm_2(pointwise(y)))
            x = x + y
        return x * x_mask


SPLINE_MIN_BIN = 1e-3
SPLINE_MIN_DERIVATIVE = 1e-3


def inverse_rational_quadratic_spline(x, widths_raw, heights_raw, derivs_raw, bound):
    """Inverse of the monotone rational-quadratic spline on [-bound, bound]
    with linear (identity) tails. widths_raw, heights_raw: [..., bins];
    derivs_raw: [..., bins-1] (the interior knots; the two ends get the
    derivative 1). Written with boolean masks, as Piper's transforms.py is,
    which is what makes NonZero/GatherND/ScatterND appear in the graph."""
    inside = (x >= -bound) & (x <= bound)
    out = torch.zeros_like(x)
    out[~inside] = x[~inside]

    end_value = np.log(np.exp(1 - SPLINE_MIN_DERIVATIVE) - 1)
    derivs_raw = F.pad(derivs_raw, pad=(1, 1))
    derivs_raw[..., 0] = end_value
    derivs_raw[..., derivs_raw.size(-1) - 1] = end_value

    y = x[inside]
    w_raw = widths_raw[inside, :]
    h_raw = heights_raw[inside, :]
    d_raw = derivs_raw[inside, :]
    bins = w_raw.shape[-1]

    def knots(raw):
        sizes = SPLINE_MIN_BIN + (1 - SPLINE_MIN_BIN * bins) * F.softmax(raw, dim=-1)
        cum = F.pad(torch.cumsum(sizes, dim=-1), pad=(1, 0), mode="constant", value=0.0)
        cum = 2 * bound * cum - bound
        cum[..., 0] = -bound
        cum[..., cum.size(-1) - 1] = bound
        return cum, cum[..., 1:] - cum[..., :-1]

    cumwidths, widths = knots(w_raw)
    cumheights, heights = knots(h_raw)
    derivs = SPLINE_MIN_DERIVATIVE + F.softplus(d_raw)

    # bin: the last knot (of the heights, since this is the inverse) <= y; the
    # top knot is nudged up so that y == bound falls in the last bin.
    search = cumheights.clone()
    search[..., search.size(-1) - 1] += 1e-6
    k = (torch.sum(y[..., None] >= search, dim=-1) - 1)[..., None]

    x_lo = cumwidths.gather(-1, k)[..., 0]
    w_k = widths.gather(-1, k)[..., 0]
    y_lo = cumheights.gather(-1, k)[..., 0]
    slope = (heights / widths).gather(-1, k)[..., 0]
    d_lo = derivs.gather(-1, k)[..., 0]
    d_hi = derivs[..., 1:].gather(-1, k)[..., 0]
    h_k = heights.gather(-1, k)[..., 0]

    # Solve the bin's rational quadratic for theta in [0, 1]:
    # a theta^2 + b theta + c = 0, root taken in its cancellation-free form.
    dy = y - y_lo
    curve = d_lo + d_hi - 2 * slope
    a = dy * curve + h_k * (slope - d_lo)
    b = h_k * d_lo - dy * curve
    c = -slope * dy
    theta = (2 * c) / (-b - torch.sqrt(b.pow(2) - 4 * a * c))
    out[inside] = theta * w_k + x_lo
    return out


class ElementwiseAffine(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def forward(self, x, x_mask, g=None):
        return (x - self.m) * torch.exp(-self.logs) * x_mask


class Flip(nn.Module):
    def forward(self, x, x_mask, g=None):
        return torch.flip(x, [1])


class ConvFlow(nn.Module):
    """Coupling layer whose transform of the second half is a rational-
    quadratic spline computed from the first half (and the conditioning)."""

    def __init__(self, channels, filter_channels, kernel_size, n_layers, bins=10, bound=5.0):
        super().__init__()
        self.half = channels // 2
        self.filter_channels = filter_channels
        self.bins = bins
        self.bound = bound
        self.pre = nn.Conv1d(self.half, filter_channels, 1)
        self.convs = DDSConv(filter_channels, kernel_size, n_layers)
        self.proj = nn.Conv1d(filter_channels, self.half * (bins * 3 - 1), 1)

    def forward(self, x, x_mask, g=None):
        x0, x1 = torch.split(x, [self.half] * 2, 1)
        h = self.convs(self.pre(x0), x_mask, g=g)
        h = self.proj(h) * x_mask
        b, c, t = x0.shape
        h = h.reshape(b, c, -1, t).permute(0, 1, 3, 2)
        scale = math.sqrt(self.filter_channels)
        x1 = inverse_rational_quadratic_spline(
            x1, h[..., : self.bins] / scale, h[..., self.bins : 2 * self.bins] / scale,
            h[..., 2 * self.bins :], self.bound)
        return torch.cat([x0, x1], 1) * x_mask


class StochasticDurationPredictor(nn.Module):
    """Piper builds 4 spline flows after an elementwise affine; inference
    runs them in reverse and skips the last one (the first built, flows.1)."""

    def __init__(self, channels, kernel_size, n_flows=4, gin_channels=0):
        super().__init__()
        self.flows = nn.ModuleList([ElementwiseAffine(2)])
        for _ in range(n_flows):
            self.flows.append(ConvFlow(2, channels, kernel_size, n_layers=3))
            self.flows.append(Flip())
        self.pre = nn.Conv1d(channels, channels, 1)
        self.proj = nn.Conv1d(channels, channels, 1)
        self.convs = DDSConv(channels, kernel_size, n_layers=3)
        if gin_channels:
            self.cond = nn.Conv1d(gin_channels, channels, 1)

    def forward(self, x, x_mask, g=None, noise_scale=1.0):
        x = self.pre(x)
        if g is not None:
            x = x + self.cond(g)
        x = self.proj(self.convs(x, x_mask)) * x_mask
        flows = list(reversed(self.flows))
        flows = flows[:-2] + [flows[-1]]
        z = torch.randn(x.size(0), 2, x.size(2)).type_as(x) * noise_scale
        for flow in flows:
            z = flow(z, x_mask, g=x)
        return z[:, :1]


# ---------------------------------------------------------------------------
# Residual-coupling flow (reverse direction only)


class WaveNet(nn.Module):
    """Non-causal WaveNet: gated dilated convs with residual and skip paths,
    each conv weight-normed (Piper keeps weight norm here when exporting)."""

    def __init__(self, hidden, kernel_size, dilation_rate, n_layers, gin_channels=0):
        super().__init__()
        self.hidden = hidden
        self.n_layers = n_layers
        wn = torch.nn.utils.weight_norm
        if gin_channels:
            self.cond_layer = wn(nn.Conv1d(gin_channels, 2 * hidden * n_layers, 1))
        self.in_layers = nn.ModuleList()
        self.res_skip_layers = nn.ModuleList()
        for i in range(n_layers):
            dilation = dilation_rate**i
            padding = (kernel_size * dilation - dilation) // 2
            self.in_layers.append(
                wn(nn.Conv1d(hidden, 2 * hidden, kernel_size, dilation=dilation, padding=padding)))
            out = 2 * hidden if i < n_layers - 1 else hidden
            self.res_skip_layers.append(wn(nn.Conv1d(hidden, out, 1)))

    def forward(self, x, x_mask, g=None):
        output = torch.zeros_like(x)
        if g is not None:
            g = self.cond_layer(g)
        for i in range(self.n_layers):
            x_in = self.in_layers[i](x)
            if g is not None:
                g_l = g[:, i * 2 * self.hidden : (i + 1) * 2 * self.hidden, :]
            else:
                g_l = torch.zeros_like(x_in)
            z = x_in + g_l
            acts = torch.tanh(z[:, : self.hidden, :]) * torch.sigmoid(z[:, self.hidden :, :])
            res_skip = self.res_skip_layers[i](acts)
            if i < self.n_layers - 1:
                x = (x + res_skip[:, : self.hidden, :]) * x_mask
                output = output + res_skip[:, self.hidden :, :]
            else:
                output = output + res_skip
        return output * x_mask


class ResidualCouplingLayer(nn.Module):
    """Mean-only affine coupling: the second half is shifted by a WaveNet of
    the first half."""

    def __init__(self, channels, hidden, kernel_size, dilation_rate, n_layers, gin_channels=0):
        super().__init__()
        self.half = channels // 2
        self.pre = nn.Conv1d(self.half, hidden, 1)
        self.enc = WaveNet(hidden, kernel_size, dilation_rate, n_layers, gin_channels)
        self.post = nn.Conv1d(hidden, self.half, 1)

    def forward(self, x, x_mask, g=None):
        x0, x1 = torch.split(x, [self.half] * 2, 1)
        h = self.enc(self.pre(x0) * x_mask, x_mask, g=g)
        m = self.post(h) * x_mask
        logs = torch.zeros_like(m)
        x1 = (x1 - m) * torch.exp(-logs) * x_mask
        return torch.cat([x0, x1], 1)


class ResidualCouplingBlock(nn.Module):
    def __init__(self, channels, hidden, kernel_size, dilation_rate, n_layers, n_flows=4,
                 gin_channels=0):
        super().__init__()
        self.flows = nn.ModuleList()
        for _ in range(n_flows):
            self.flows.append(ResidualCouplingLayer(channels, hidden, kernel_size, dilation_rate,
                                                    n_layers, gin_channels))
            self.flows.append(Flip())

    def forward(self, x, x_mask, g=None):
        for flow in reversed(self.flows):
            x = flow(x, x_mask, g=g)
        return x


# ---------------------------------------------------------------------------
# HiFi-GAN decoder

LRELU_SLOPE = 0.1


def same_padding(kernel_size, dilation=1):
    return (kernel_size * dilation - dilation) // 2


class ResBlock1(nn.Module):
    def __init__(self, channels, kernel_size, dilations):
        super().__init__()
        wn = torch.nn.utils.weight_norm
        self.convs1 = nn.ModuleList(
            wn(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                         padding=same_padding(kernel_size, d))) for d in dilations)
        self.convs2 = nn.ModuleList(
            wn(nn.Conv1d(channels, channels, kernel_size, 1, dilation=1,
                         padding=same_padding(kernel_size))) for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            y = c1(F.leaky_relu(x, LRELU_SLOPE))
            x = x + c2(F.leaky_relu(y, LRELU_SLOPE))
        return x

    def remove_weight_norm(self):
        for conv in list(self.convs1) + list(self.convs2):
            torch.nn.utils.remove_weight_norm(conv)


class ResBlock2(nn.Module):
    def __init__(self, channels, kernel_size, dilations):
        super().__init__()
        wn = torch.nn.utils.weight_norm
        self.convs = nn.ModuleList(
            wn(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d,
                         padding=same_padding(kernel_size, d))) for d in dilations)

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, LRELU_SLOPE))
        return x

    def remove_weight_norm(self):
        for conv in self.convs:
            torch.nn.utils.remove_weight_norm(conv)


class Generator(nn.Module):
    def __init__(self, in_channels, resblock, rb_kernels, rb_dilations, rates, initial_channel,
                 up_kernels, gin_channels=0):
        super().__init__()
        self.num_kernels = len(rb_kernels)
        self.conv_pre = nn.Conv1d(in_channels, initial_channel, 7, 1, padding=3)
        block = ResBlock1 if resblock == "1" else ResBlock2
        wn = torch.nn.utils.weight_norm
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        for i, (u, k) in enumerate(zip(rates, up_kernels)):
            c_in, c_out = initial_channel // 2**i, initial_channel // 2 ** (i + 1)
            self.ups.append(wn(nn.ConvTranspose1d(c_in, c_out, k, u, padding=(k - u) // 2)))
            for rk, rd in zip(rb_kernels, rb_dilations):
                self.resblocks.append(block(c_out, rk, rd))
        self.conv_post = nn.Conv1d(c_out, 1, 7, 1, padding=3, bias=False)
        if gin_channels:
            self.cond = nn.Conv1d(gin_channels, initial_channel, 1)

    def forward(self, x, g=None):
        x = self.conv_pre(x)
        if g is not None:
            x = x + self.cond(g)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            blocks = self.resblocks[i * self.num_kernels : (i + 1) * self.num_kernels]
            total = blocks[0](x)
            for blk in blocks[1:]:
                total = total + blk(x)
            x = total / self.num_kernels
        # The last activation is PyTorch's default leaky ReLU: slope 0.01.
        x = self.conv_post(F.leaky_relu(x))
        return torch.tanh(x)

    def remove_weight_norm(self):
        for up in self.ups:
            torch.nn.utils.remove_weight_norm(up)
        for blk in self.resblocks:
            blk.remove_weight_norm()


# ---------------------------------------------------------------------------
# The whole synthesizer


def generate_path(durations, mask):
    """durations [b, 1, t_x] (integers as floats), mask [b, 1, t_y, t_x] ->
    the hard monotonic alignment [b, 1, t_y, t_x]."""
    b, _, t_y, t_x = mask.shape
    ends = torch.cumsum(durations, -1).view(b * t_x)
    path = length_mask(ends, t_y).type_as(mask).view(b, t_x, t_y)
    path = path - F.pad(path, (0, 0, 1, 0, 0, 0))[:, :-1]
    return path.unsqueeze(1).transpose(2, 3) * mask


class SynthesizerInfer(nn.Module):
    """Piper's SynthesizerTrn, inference path."""

    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        gin = hp["gin_channels"] if hp["num_speakers"] > 1 else 0
        self.n_speakers = hp["num_speakers"]
        self.enc_p = TextEncoder(hp["num_symbols"], hp["inter_channels"], hp["hidden_channels"],
                                 hp["filter_channels"], hp["n_heads"], hp["n_layers"],
                                 hp["kernel_size"])
        self.dec = Generator(hp["inter_channels"], hp["resblock"], hp["resblock_kernel_sizes"],
                             hp["resblock_dilation_sizes"], hp["upsample_rates"],
                             hp["upsample_initial_channel"], hp["upsample_kernel_sizes"],
                             gin_channels=gin)
        self.flow = ResidualCouplingBlock(hp["inter_channels"], hp["hidden_channels"], 5, 1, 4,
                                          gin_channels=gin)
        self.dp = StochasticDurationPredictor(hp["hidden_channels"], 3, 4, gin_channels=gin)
        if self.n_speakers > 1:
            self.emb_g = nn.Embedding(self.n_speakers, gin)

    def durations(self, x, x_mask, g, length_scale, noise_scale_w):
        logw = self.dp(x, x_mask, g=g, noise_scale=noise_scale_w)
        return torch.exp(logw) * x_mask * length_scale

    def infer(self, ids, lengths, sid=None, noise_scale=0.667, length_scale=1.0,
              noise_scale_w=0.8):
        x, m_p, logs_p, x_mask = self.enc_p(ids, lengths)
        g = self.emb_g(sid).unsqueeze(-1) if self.n_speakers > 1 else None
        w = self.durations(x, x_mask, g, length_scale, noise_scale_w)
        w_ceil = torch.ceil(w)
        y_lengths = torch.clamp_min(torch.sum(w_ceil, [1, 2]), 1).long()
        y_mask = torch.unsqueeze(length_mask(y_lengths, y_lengths.max()), 1).type_as(x_mask)
        attn_mask = torch.unsqueeze(x_mask, 2) * torch.unsqueeze(y_mask, -1)
        attn = generate_path(w_ceil, attn_mask).squeeze(1)
        m_p = torch.matmul(attn, m_p.transpose(1, 2)).transpose(1, 2)
        logs_p = torch.matmul(attn, logs_p.transpose(1, 2)).transpose(1, 2)
        z_p = m_p + torch.randn_like(m_p) * torch.exp(logs_p) * noise_scale
        z = self.flow(z_p, y_mask, g=g)
        return self.dec(z * y_mask, g=g)
