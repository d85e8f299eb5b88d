"""PyTorch reference architectures and mel front ends for the converter's parity data.

Written from the published descriptions of
  - HiFi-GAN (jik876/hifi-gan, models.py Generator, ResBlock1, ResBlock2;
    meldataset.py mel_spectrogram), and
  - Vocos (gemelo-ai/vocos: VocosBackbone, ConvNeXtBlock, ISTFTHead,
    MelSpectrogramFeatures over torchaudio's MelSpectrogram),
with module names chosen so that state_dict() keys are exactly the official ones.
Neither package is installed here, and neither are librosa or torchaudio: the
mel filterbanks below follow librosa.filters.mel (Slaney) and
torchaudio.functional.melscale_fbanks (HTK) from their documented definitions.

Run with /usr/bin/python3 (Debian's python3-torch).
"""

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# HiFi-GAN's slope inside the upsampling stages; the one before conv_post is
# torch's default 0.01 (the official code calls F.leaky_relu(x) there).
LRELU_SLOPE = 0.1
FINAL_LRELU_SLOPE = 0.01

# Published HiFi-GAN generator configurations (config_v1/v2/v3.json).
HIFIGAN_AUDIO = {
    "num_mels": 80, "n_fft": 1024, "hop_size": 256, "win_size": 1024,
    "sampling_rate": 22050, "fmin": 0, "fmax": 8000,
}
HIFIGAN_CONFIGS = {
    "v1": {"resblock": "1", "upsample_rates": [8, 8, 2, 2],
           "upsample_kernel_sizes": [16, 16, 4, 4], "upsample_initial_channel": 512,
           "resblock_kernel_sizes": [3, 7, 11],
           "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]]},
    "v2": {"resblock": "1", "upsample_rates": [8, 8, 2, 2],
           "upsample_kernel_sizes": [16, 16, 4, 4], "upsample_initial_channel": 128,
           "resblock_kernel_sizes": [3, 7, 11],
           "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]]},
    "v3": {"resblock": "2", "upsample_rates": [8, 8, 4],
           "upsample_kernel_sizes": [16, 16, 8], "upsample_initial_channel": 256,
           "resblock_kernel_sizes": [3, 5, 7],
           "resblock_dilation_sizes": [[1, 2], [2, 6], [3, 12]]},
}


def hifigan_config(version, **overrides):
    """A complete config.json dict for a published version, with overrides."""
    h = dict(HIFIGAN_CONFIGS[version])
    h.update(HIFIGAN_AUDIO)
    h.update(overrides)
    return h


# The charactr/vocos-mel-24khz config.yaml, as a dict.
def vocos_config(dim=512, intermediate_dim=1536, num_layers=8, n_mels=100, n_fft=1024,
                 hop=256, sample_rate=24000):
    return {
        "feature_extractor": {
            "class_path": "vocos.feature_extractors.MelSpectrogramFeatures",
            "init_args": {"sample_rate": sample_rate, "n_fft": n_fft, "hop_length": hop,
                          "n_mels": n_mels, "padding": "center"}},
        "backbone": {
            "class_path": "vocos.models.VocosBackbone",
            "init_args": {"input_channels": n_mels, "dim": dim,
                          "intermediate_dim": intermediate_dim, "num_layers": num_layers}},
        "head": {
            "class_path": "vocos.heads.ISTFTHead",
            "init_args": {"dim": dim, "n_fft": n_fft, "hop_length": hop, "padding": "center"}},
    }


# ---------------------------------------------------------------------------
# Mel filterbanks (float64 numpy, shape (n_mels, n_fft // 2 + 1))

def slaney_hz_to_mel(hz):
    hz = np.asarray(hz, dtype=np.float64)
    f_sp = 200.0 / 3.0
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    linear = hz / f_sp
    log = min_log_mel + np.log(np.maximum(hz, min_log_hz) / min_log_hz) / logstep
    return np.where(hz >= min_log_hz, log, linear)


def slaney_mel_to_hz(mel):
    mel = np.asarray(mel, dtype=np.float64)
    f_sp = 200.0 / 3.0
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    linear = f_sp * mel
    log = min_log_hz * np.exp(logstep * (mel - min_log_mel))
    return np.where(mel >= min_log_mel, log, linear)


def slaney_mel_filterbank(sample_rate, n_fft, n_mels, fmin, fmax):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax) with its defaults htk=False,
    norm='slaney': triangles between n_mels + 2 points equally spaced on the Slaney
    scale, each scaled by 2 / (upper edge - lower edge) in Hz."""
    bin_hz = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges = slaney_mel_to_hz(
        np.linspace(slaney_hz_to_mel(fmin), slaney_hz_to_mel(fmax), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - bin_hz[None, :]
    fb = np.zeros((n_mels, bin_hz.size))
    for m in range(n_mels):
        rising = -ramps[m] / widths[m]
        falling = ramps[m + 2] / widths[m + 1]
        fb[m] = np.maximum(0.0, np.minimum(rising, falling))
    fb *= (2.0 / (edges[2:] - edges[:n_mels]))[:, None]
    return fb


def htk_mel_filterbank(sample_rate, n_fft, n_mels, fmin, fmax):
    """torchaudio.functional.melscale_fbanks(n_fft // 2 + 1, fmin, fmax, n_mels,
    sample_rate, norm=None, mel_scale='htk'), transposed to (n_mels, bins):
    mel = 2595 log10(1 + hz / 700), triangles of peak 1, bins at
    linspace(0, sample_rate // 2, n_bins) (integer half rate, as torchaudio)."""
    bin_hz = np.linspace(0.0, float(sample_rate // 2), n_fft // 2 + 1)

    def to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)

    edges = 700.0 * (10.0 ** (np.linspace(to_mel(fmin), to_mel(fmax), n_mels + 2) / 2595.0) - 1.0)
    widths = np.diff(edges)
    slopes = edges[None, :] - bin_hz[:, None]  # (bins, n_mels + 2)
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    return np.maximum(0.0, np.minimum(down, up)).T.copy()


def hann_window(n, dtype=torch.float64):
    """torch.hann_window(n) (periodic): 0.5 - 0.5 cos(2 pi i / n)."""
    return torch.hann_window(n, periodic=True, dtype=dtype)


def hifigan_log_mel(audio, sample_rate=22050, n_fft=1024, hop=256, win=1024, n_mels=80,
                    fmin=0.0, fmax=8000.0):
    """HiFi-GAN meldataset.mel_spectrogram(center=False) in float64: reflect-pad
    (n_fft - hop) / 2 each side, framed STFT, sqrt(re^2 + im^2 + 1e-9), Slaney mel,
    log(clamp(mel, 1e-5)). audio: 1-D array; returns (n_mels, frames) float64."""
    y = torch.as_tensor(np.asarray(audio, dtype=np.float64))[None, None, :]
    pad = (n_fft - hop) // 2
    y = F.pad(y, (pad, pad), mode="reflect")[:, 0, :]
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=win, window=hann_window(win),
                      center=False, normalized=False, onesided=True, return_complex=True)
    spec = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)[0]
    fb = torch.from_numpy(slaney_mel_filterbank(sample_rate, n_fft, n_mels, fmin, fmax))
    return torch.log(torch.clamp(fb @ spec, min=1e-5)).numpy()


def vocos_log_mel(audio, sample_rate=24000, n_fft=1024, hop=256, n_mels=100):
    """Vocos MelSpectrogramFeatures(padding='center') in float64: torchaudio
    MelSpectrogram(center=True, power=1) = centred STFT with reflect padding n_fft / 2,
    periodic Hann, magnitude, HTK mel without norm over 0..sr/2; then
    log(clip(mel, 1e-7)). Returns (n_mels, frames) float64."""
    y = torch.as_tensor(np.asarray(audio, dtype=np.float64))[None, :]
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=n_fft, window=hann_window(n_fft),
                      center=True, pad_mode="reflect", normalized=False, onesided=True,
                      return_complex=True)
    spec = spec.abs()[0]
    fb = torch.from_numpy(htk_mel_filterbank(sample_rate, n_fft, n_mels, 0.0,
                                             float(sample_rate // 2)))
    return torch.log(torch.clip(fb @ spec, min=1e-7)).numpy()


# ---------------------------------------------------------------------------
# HiFi-GAN generator

def _padding(kernel, dilation=1):
    return (kernel * dilation - dilation) // 2


def _maybe_wn(module, weight_norm):
    return nn.utils.weight_norm(module) if weight_norm else module


class ResBlock1(nn.Module):
    def __init__(self, channels, kernel, dilations, weight_norm=True):
        super().__init__()
        self.convs1 = nn.ModuleList(
            _maybe_wn(nn.Conv1d(channels, channels, kernel, 1, dilation=d,
                                padding=_padding(kernel, d)), weight_norm) for d in dilations)
        self.convs2 = nn.ModuleList(
            _maybe_wn(nn.Conv1d(channels, channels, kernel, 1, dilation=1,
                                padding=_padding(kernel)), weight_norm) for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = c1(F.leaky_relu(x, LRELU_SLOPE))
            xt = c2(F.leaky_relu(xt, LRELU_SLOPE))
            x = xt + x
        return x


class ResBlock2(nn.Module):
    def __init__(self, channels, kernel, dilations, weight_norm=True):
        super().__init__()
        self.convs = nn.ModuleList(
            _maybe_wn(nn.Conv1d(channels, channels, kernel, 1, dilation=d,
                                padding=_padding(kernel, d)), weight_norm) for d in dilations)

    def forward(self, x):
        for c in self.convs:
            x = c(F.leaky_relu(x, LRELU_SLOPE)) + x
        return x


class HifiganGenerator(nn.Module):
    """jik876/hifi-gan models.Generator. `h` is the config.json dict. With
    weight_norm=False the convolutions hold plain weights (the folded form, as after
    the official remove_weight_norm())."""

    def __init__(self, h, weight_norm=True):
        super().__init__()
        self.num_kernels = len(h["resblock_kernel_sizes"])
        self.num_upsamples = len(h["upsample_rates"])
        ch = h["upsample_initial_channel"]
        self.conv_pre = _maybe_wn(nn.Conv1d(h["num_mels"], ch, 7, 1, padding=3), weight_norm)
        block = ResBlock1 if str(h["resblock"]) == "1" else ResBlock2
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(h["upsample_rates"], h["upsample_kernel_sizes"])):
            self.ups.append(_maybe_wn(
                nn.ConvTranspose1d(ch // 2 ** i, ch // 2 ** (i + 1), k, u, padding=(k - u) // 2),
                weight_norm))
        self.resblocks = nn.ModuleList()
        for i in range(self.num_upsamples):
            c = ch // 2 ** (i + 1)
            for k, d in zip(h["resblock_kernel_sizes"], h["resblock_dilation_sizes"]):
                self.resblocks.append(block(c, k, d, weight_norm))
        self.conv_post = _maybe_wn(nn.Conv1d(ch // 2 ** self.num_upsamples, 1, 7, 1, padding=3),
                                   weight_norm)

    def forward(self, mel):
        """mel (B, num_mels, frames) -> audio (B, 1, frames * prod(upsample_rates))."""
        x = self.conv_pre(mel)
        for i in range(self.num_upsamples):
            x = self.ups[i](F.leaky_relu(x, LRELU_SLOPE))
            xs = None
            for j in range(self.num_kernels):
                y = self.resblocks[i * self.num_kernels + j](x)
                xs = y if xs is None else xs + y
            x = xs / self.num_kernels
        x = self.conv_post(F.leaky_relu(x, FINAL_LRELU_SLOPE))
        return torch.tanh(x)


# ---------------------------------------------------------------------------
# Vocos (mel model: MelSpectrogramFeatures + VocosBackbone + ISTFTHead)

class ConvNeXtBlock(nn.Module):
    def __init__(self, dim, intermediate_dim, layer_scale):
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.act = nn.GELU()  # exact (erf) GELU
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.gamma = nn.Parameter(layer_scale * torch.ones(dim))

    def forward(self, x):
        residual = x
        x = self.dwconv(x).transpose(1, 2)
        x = self.pwconv2(self.act(self.pwconv1(self.norm(x))))
        x = (self.gamma * x).transpose(1, 2)
        return residual + x


class VocosBackbone(nn.Module):
    def __init__(self, input_channels, dim, intermediate_dim, num_layers):
        super().__init__()
        self.embed = nn.Conv1d(input_channels, dim, kernel_size=7, padding=3)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.convnext = nn.ModuleList(
            ConvNeXtBlock(dim, intermediate_dim, 1.0 / num_layers) for _ in range(num_layers))
        self.final_layer_norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        """x (B, input_channels, T) -> (B, T, dim)."""
        x = self.embed(x)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in self.convnext:
            x = block(x)
        return self.final_layer_norm(x.transpose(1, 2))


class ISTFT(nn.Module):
    def __init__(self, n_fft, hop_length):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, spec):
        # padding "center": torch.istft(center=True) gives hop * (frames - 1) samples.
        return torch.istft(spec, self.n_fft, self.hop_length, self.n_fft, self.window,
                           center=True)


class ISTFTHead(nn.Module):
    def __init__(self, dim, n_fft, hop_length):
        super().__init__()
        self.out = nn.Linear(dim, n_fft + 2)
        self.istft = ISTFT(n_fft, hop_length)

    def forward(self, x):
        """x (B, T, dim) -> audio (B, hop * (T - 1))."""
        x = self.out(x).transpose(1, 2)
        mag, p = x.chunk(2, dim=1)
        mag = torch.clip(torch.exp(mag), max=1e2)
        spec = mag * (torch.cos(p) + 1j * torch.sin(p))
        return self.istft(spec)


class _MelSpectrogramBuffers(nn.Module):
    """Holds the buffers torchaudio's MelSpectrogram puts in the state dict
    (mel_spec.spectrogram.window, mel_spec.mel_scale.fb), so checkpoints made here
    look like official ones; the converter drops them."""

    def __init__(self, sample_rate, n_fft, n_mels):
        super().__init__()
        self.spectrogram = nn.Module()
        self.spectrogram.register_buffer("window", torch.hann_window(n_fft))
        self.mel_scale = nn.Module()
        fb = htk_mel_filterbank(sample_rate, n_fft, n_mels, 0.0, float(sample_rate // 2))
        self.mel_scale.register_buffer("fb", torch.from_numpy(fb.T.astype(np.float32)))


class MelSpectrogramFeatures(nn.Module):
    def __init__(self, sample_rate, n_fft, hop_length, n_mels):
        super().__init__()
        self.sample_rate, self.n_fft, self.hop, self.n_mels = sample_rate, n_fft, hop_length, n_mels
        self.mel_spec = _MelSpectrogramBuffers(sample_rate, n_fft, n_mels)

    def forward(self, audio):
        return torch.from_numpy(vocos_log_mel(audio.numpy(), self.sample_rate, self.n_fft,
                                              self.hop, self.n_mels))


class Vocos(nn.Module):
    """The Vocos mel model; decode(mel) is Vocos.decode. `config` is the config.yaml dict."""

    def __init__(self, config):
        super().__init__()
        fe = config["feature_extractor"]["init_args"]
        bb = config["backbone"]["init_args"]
        hd = config["head"]["init_args"]
        self.feature_extractor = MelSpectrogramFeatures(fe["sample_rate"], fe["n_fft"],
                                                        fe["hop_length"], fe["n_mels"])
        self.backbone = VocosBackbone(bb["input_channels"], bb["dim"], bb["intermediate_dim"],
                                      bb["num_layers"])
        self.head = ISTFTHead(hd["dim"], hd["n_fft"], hd["hop_length"])

    def decode(self, mel):
        """mel (B, n_mels, T) -> audio (B, hop * (T - 1))."""
        return self.head(self.backbone(mel))


# ---------------------------------------------------------------------------
# Models rebuilt from a converted LEF file (tools/lef.py), without weight norm

def hifigan_config_from_metadata(meta):
    hp = meta["hyperparameters"]
    return {"resblock": str(hp["resblock"]), "upsample_rates": hp["upsample_rates"],
            "upsample_kernel_sizes": hp["upsample_kernel_sizes"],
            "upsample_initial_channel": hp["upsample_initial_channel"],
            "resblock_kernel_sizes": hp["resblock_kernel_sizes"],
            "resblock_dilation_sizes": hp["resblock_dilation_sizes"],
            "num_mels": meta["n_mels"]}


def vocos_config_from_metadata(meta):
    hp = meta["hyperparameters"]
    return vocos_config(dim=hp["dim"], intermediate_dim=hp["intermediate_dim"],
                        num_layers=hp["num_layers"], n_mels=meta["n_mels"],
                        n_fft=hp["head_n_fft"], hop=hp["head_hop"],
                        sample_rate=meta["sample_rate"])


def model_from_lef(lef_file):
    """A float32 eval-mode model holding the tensors of a read LEF file; returns
    (model, forward) where forward(mel (B, n_mels, T)) -> audio (B, samples)."""
    meta = lef_file.metadata
    state = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in
             lef_file.tensors.items()}
    if meta["architecture"] == "hifigan":
        model = HifiganGenerator(hifigan_config_from_metadata(meta), weight_norm=False)
        model.load_state_dict(state, strict=True)
        forward = lambda mel: model(mel)[:, 0, :]  # noqa: E731
    elif meta["architecture"] == "vocos":
        model = Vocos(vocos_config_from_metadata(meta))
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or any(not k.startswith("feature_extractor.") for k in missing):
            raise ValueError(f"LEF tensors do not fit Vocos: missing {missing}, "
                             f"unexpected {unexpected}")
        forward = model.decode
    else:
        raise ValueError(f"unknown architecture {meta['architecture']!r}")
    return model.eval(), forward
