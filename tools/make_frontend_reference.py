#!/usr/bin/python3
"""Reference log-mel spectrograms for dsp/log_mel.h, computed independently with PyTorch.

Writes tests/data/frontend/{hifigan,vocos}_{audio,mel}.npy:
  *_audio.npy  float32 (samples,)       a deterministic ~0.5 s speech-like test signal
  *_mel.npy    float64 (n_mels, frames) its log-mel spectrogram as the model was trained on

The two front ends are re-implemented here from their published training code, with torch.stft
doing the transform and the mel filterbanks written out from the definitions librosa and
torchaudio document (neither library is needed):

  HiFi-GAN (meldataset.mel_spectrogram): 22050 Hz, n_fft 1024, hop 256, win 1024, periodic Hann;
    reflect-pad (n_fft - hop) / 2 on both sides, torch.stft(center=False);
    sqrt(re^2 + im^2 + 1e-9); librosa.filters.mel(sr, 1024, 80, fmin=0, fmax=8000) (Slaney scale,
    Slaney norm); log(clamp(mel, min=1e-5)).
  Vocos (MelSpectrogramFeatures, padding="center"): torchaudio MelSpectrogram(24000, n_fft 1024,
    hop 256, n_mels 100, center=True, power=1) = torch.stft(center=True, pad_mode="reflect"),
    |X|, melscale_fbanks(513, 0, 12000, 100, 24000, norm=None, mel_scale="htk");
    log(clamp(mel, min=1e-7)).

Everything is computed in float64 (the ideal the float32 C++ code is measured against); the
script also reports how far the models' own float32 arithmetic is from it, for scale.

Run from the repository root: /usr/bin/python3 tools/make_frontend_reference.py
"""
import math
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "frontend")


# --- mel filterbanks, from the definitions ---------------------------------------------------

def slaney_hz_to_mel(hz):
    hz = np.asarray(hz, dtype=np.float64)
    f_sp = 200.0 / 3.0
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    return np.where(hz >= min_log_hz,
                    min_log_mel + np.log(np.maximum(hz, 1e-300) / min_log_hz) / logstep,
                    hz / f_sp)


def slaney_mel_to_hz(mel):
    mel = np.asarray(mel, dtype=np.float64)
    f_sp = 200.0 / 3.0
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)),
                    f_sp * mel)


def librosa_mel(sr, n_fft, n_mels, fmin, fmax):
    """librosa.filters.mel(htk=False, norm='slaney'), (n_mels, 1 + n_fft // 2)."""
    fft_freqs = np.linspace(0.0, sr / 2.0, 1 + n_fft // 2)
    mel_points = np.linspace(slaney_hz_to_mel(fmin), slaney_hz_to_mel(fmax), n_mels + 2)
    mel_f = slaney_mel_to_hz(mel_points)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    weights = np.zeros((n_mels, fft_freqs.size))
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights


def torchaudio_htk_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate):
    """torchaudio.functional.melscale_fbanks(norm=None, mel_scale='htk'), (n_freqs, n_mels)."""
    all_freqs = np.linspace(0.0, sample_rate // 2, n_freqs)
    m_min = 2595.0 * math.log10(1.0 + f_min / 700.0)
    m_max = 2595.0 * math.log10(1.0 + f_max / 700.0)
    m_pts = np.linspace(m_min, m_max, n_mels + 2)
    f_pts = 700.0 * (10.0 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return np.maximum(0.0, np.minimum(down, up))


# --- the two front ends -----------------------------------------------------------------------

def hifigan_log_mel(audio, dtype):
    n_fft, hop, win, sr = 1024, 256, 1024, 22050
    mel_basis = torch.from_numpy(librosa_mel(sr, n_fft, 80, 0.0, 8000.0)).to(dtype)
    y = torch.from_numpy(audio).to(dtype)[None, None, :]
    pad = (n_fft - hop) // 2
    y = torch.nn.functional.pad(y, (pad, pad), mode="reflect")[0, 0]
    window = torch.hann_window(win, periodic=True, dtype=dtype)
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=win, window=window, center=False,
                      normalized=False, onesided=True, return_complex=True)
    mag = torch.sqrt(spec.real ** 2 + spec.imag ** 2 + 1e-9)
    return torch.log(torch.clamp(mel_basis @ mag, min=1e-5)).numpy()


def vocos_log_mel(audio, dtype):
    n_fft, hop, sr = 1024, 256, 24000
    fb = torch.from_numpy(torchaudio_htk_fbanks(n_fft // 2 + 1, 0.0, sr / 2, 100, sr)).to(dtype)
    y = torch.from_numpy(audio).to(dtype)
    window = torch.hann_window(n_fft, periodic=True, dtype=dtype)
    spec = torch.stft(y, n_fft, hop_length=hop, win_length=n_fft, window=window, center=True,
                      pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
    mel = (spec.abs().transpose(0, 1) @ fb).transpose(0, 1)
    return torch.log(torch.clamp(mel, min=1e-7)).numpy()


# --- the test signal --------------------------------------------------------------------------

def resonate(x, freqs, bandwidth, sr):
    """Two-pole resonator whose centre frequency follows `freqs` sample by sample."""
    y = np.zeros_like(x)
    r = math.exp(-math.pi * bandwidth / sr)
    y1 = y2 = 0.0
    for i in range(x.size):
        a1 = 2.0 * r * math.cos(2.0 * math.pi * freqs[i] / sr)
        y0 = (1.0 - r) * x[i] + a1 * y1 - r * r * y2
        y[i] = y0
        y2, y1 = y1, y0
    return y


def speech_like(sr, seconds=0.5):
    """A vowel glide /a/ -> /i/ on a rising-falling f0 with vibrato, a fricative burst, breath
    noise and a faint noise floor (so no mel band is empty), with an onset and a decay. Made
    from seeded randomness only, so every run writes the same file."""
    n = int(round(seconds * sr))
    t = np.arange(n) / sr
    rng = np.random.default_rng(20240521)
    f0 = 120.0 + 60.0 * np.sin(math.pi * t / seconds) + 4.0 * np.sin(2.0 * math.pi * 5.5 * t)
    phase = 2.0 * math.pi * np.cumsum(f0) / sr
    source = np.zeros(n)
    for h in range(1, int(0.45 * sr / f0.min()) + 1):
        audible = (h * f0 < 0.45 * sr).astype(np.float64)  # band-limited: no aliasing
        source += audible * np.sin(h * phase) / h
    source += 0.05 * rng.standard_normal(n)  # breathiness
    glide = np.clip((t - 0.1) / 0.25, 0.0, 1.0)
    voiced = np.zeros(n)
    for (fa, fi, bw, gain) in [(730, 270, 90, 1.0), (1090, 2290, 110, 0.7),
                               (2440, 3010, 160, 0.4), (3400, 3700, 200, 0.25)]:
        voiced += gain * resonate(source, fa + (fi - fa) * glide, bw, sr)
    envelope = np.clip(t / 0.03, 0.0, 1.0) * np.clip((seconds - t) / 0.08, 0.0, 1.0)
    voiced *= envelope * np.where((t > 0.2) & (t < 0.26), 0.15, 1.0)
    # A short 's'-like burst: differentiated noise in the gap of the voicing.
    burst = np.diff(rng.standard_normal(n + 1)) * np.exp(-0.5 * ((t - 0.23) / 0.015) ** 2)
    x = voiced / np.max(np.abs(voiced)) * 0.5 + 0.08 * burst
    x += 2e-3 * rng.standard_normal(n)
    return x.astype(np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, sr, front_end in [("hifigan", 22050, hifigan_log_mel),
                                ("vocos", 24000, vocos_log_mel)]:
        audio = speech_like(sr)
        mel = front_end(audio, torch.float64)
        mel32 = front_end(audio, torch.float32)
        np.save(os.path.join(OUT, f"{name}_audio.npy"), audio)
        # C order: the transposes above can leave a Fortran-ordered array, which np.save would
        # store as such.
        np.save(os.path.join(OUT, f"{name}_mel.npy"), np.ascontiguousarray(mel))
        print(f"{name}: {audio.size} samples at {sr} Hz -> mel {mel.shape}, "
              f"log-mel range [{mel.min():.3f}, {mel.max():.3f}], "
              f"float32 torch vs float64 max |diff| {np.abs(mel32 - mel).max():.2e}")


if __name__ == "__main__":
    main()
