#!/usr/bin/python3
"""Makes the data the C++ neural vocoders are tested against (tests/data/neural/).

For each of hifigan_v1, hifigan_v2, hifigan_v3 and vocos: the published
architecture with reduced channel counts and fixed random weights, saved as an
official checkpoint (+ config), converted by tools/convert.py (run as a
subprocess, as a user would), and stored as
  <name>.lef        the converted model
  <name>_mel.npy    float32 (n_mels, 48): a log-mel of a speech-like signal,
                    computed with the model's own front end
  <name>_out.npy    float32 1-D: PyTorch's output for that mel, computed in
                    float64 from the checkpoint (weight norm unfolded)
and the front-end references
  frontend_{hifigan,vocos}_audio.npy   float32 1-D, 0.5 s at 22050 / 24000 Hz
  frontend_{hifigan,vocos}_mel.npy     float32 (n_mels, frames), computed in float64

  /usr/bin/python3 tools/make_parity_data.py [--out DIR]
  /usr/bin/python3 tools/make_parity_data.py --full-size DIR

--full-size writes published-size hifigan_v1, hifigan_v3 and vocos models with
random weights and a 200-frame mel each (for benchmarks and a full-size run;
not committed). Everything is deterministic (fixed seeds).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import yaml

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, TOOLS)
import lef  # noqa: E402
import reference_models as rm  # noqa: E402

REPO = os.path.dirname(TOOLS)
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "neural")
PARITY_FRAMES = 48
FULL_FRAMES = 200
CALIBRATION_FRAMES = 32

PARITY_MODELS = {
    "hifigan_v1": ("hifigan", lambda: rm.hifigan_config("v1", upsample_initial_channel=32)),
    "hifigan_v2": ("hifigan", lambda: rm.hifigan_config("v2", upsample_initial_channel=16)),
    "hifigan_v3": ("hifigan", lambda: rm.hifigan_config("v3", upsample_initial_channel=32)),
    "vocos": ("vocos", lambda: rm.vocos_config(dim=32, intermediate_dim=96, num_layers=8)),
}
FULL_MODELS = {
    "hifigan_v1": ("hifigan", lambda: rm.hifigan_config("v1")),
    "hifigan_v3": ("hifigan", lambda: rm.hifigan_config("v3")),
    "vocos": ("vocos", lambda: rm.vocos_config()),
}


# ---------------------------------------------------------------------------
# A deterministic speech-like test signal

def speech_like(sample_rate, n, seed=1):
    """Voiced speech caricature: a gliding f0 with vibrato, harmonics shaped by four
    moving formants and a spectral tilt, syllable-rate amplitude, breath noise, a
    fricative burst, and 80 ms of digital silence (to reach the log floors)."""
    rng = np.random.RandomState(seed)
    t = np.arange(n) / sample_rate
    f0 = 115.0 + 25.0 * np.sin(2 * np.pi * 0.9 * t) + 60.0 * t + 4.0 * np.sin(2 * np.pi * 5.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    formants = [(600 + 200 * np.sin(2 * np.pi * 1.3 * t), 90.0),
                (1500 + 400 * np.sin(2 * np.pi * 0.7 * t + 1.0), 120.0),
                (2600 + 150 * np.sin(2 * np.pi * 0.5 * t), 170.0),
                (3600.0 + 0 * t, 250.0)]
    voiced = np.zeros(n)
    for h in range(1, int(0.5 * sample_rate / f0.min()) + 1):
        f = h * f0
        envelope = sum(1.0 / (1.0 + ((f - fc) / bw) ** 2) for fc, bw in formants)
        gain = envelope / (1.0 + f / 300.0) * (f < 0.5 * sample_rate)
        voiced += gain * np.sin(h * phase)
    syllables = 0.2 + 0.8 * np.sin(np.pi * 3.3 * t) ** 2
    noise = rng.standard_normal(n)
    breath = 0.02 * noise
    fricative = np.diff(noise, prepend=0.0) * 0.15 * ((t >= 0.40) & (t < 0.45))
    y = syllables * (voiced / np.max(np.abs(voiced)) + breath) + fricative
    y[(t >= 0.30) & (t < 0.38)] = 0.0
    return (0.6 * y / np.max(np.abs(y))).astype(np.float32)


def model_mel(kind, config, frames):
    """A float32 (n_mels, frames) log-mel of the test signal, by the model's front end."""
    if kind == "hifigan":
        # HiFi-GAN's padding gives len // hop frames.
        audio = speech_like(config["sampling_rate"], frames * config["hop_size"])
        mel = rm.hifigan_log_mel(audio, config["sampling_rate"], config["n_fft"],
                                 config["hop_size"], config["win_size"], config["num_mels"],
                                 config["fmin"], config["fmax"])
    else:
        fe = config["feature_extractor"]["init_args"]
        # Centred STFT gives 1 + len // hop frames.
        audio = speech_like(fe["sample_rate"], (frames - 1) * fe["hop_length"])
        mel = rm.vocos_log_mel(audio, fe["sample_rate"], fe["n_fft"], fe["hop_length"],
                               fe["n_mels"])
    assert mel.shape[1] == frames, mel.shape
    return mel.astype(np.float32)


# ---------------------------------------------------------------------------
# Random weights that keep activations O(1)

def _calibrate(model, run, targets, default_target=1.0):
    """Data-dependent scaling: during one forward pass, each Conv1d / ConvTranspose1d /
    Linear (in execution order, biases still zero) has its weight scaled so that its
    output has the RMS targets.get(name, default_target); the hook returns the output
    scaled the same way, so later layers see the calibrated network."""
    hooks = []
    for name, module in model.named_modules():
        if not isinstance(module, (torch.nn.Conv1d, torch.nn.ConvTranspose1d, torch.nn.Linear)):
            continue

        def hook(module, inputs, output, name=name):
            target = targets.get(name, default_target)
            if target is None:
                return output
            factor = target / float(output.detach().pow(2).mean().sqrt())
            with torch.no_grad():
                if hasattr(module, "weight_g"):
                    module.weight_g.mul_(factor)
                else:
                    module.weight.mul_(factor)
            return output * factor
        hooks.append(module.register_forward_hook(hook))
    with torch.no_grad():
        run()
    for h in hooks:
        h.remove()


def randomize_hifigan(model, mel):
    """weight_v ~ N(0, 1), weight_g > 0 per output (ConvTranspose: input) channel, then
    calibrated: each conv outputs RMS 1, each residual increment (ResBlock1's convs2,
    ResBlock2's convs) 0.5, and
    conv_post 0.3 (so tanh's output is neither ~0 nor saturated); small random biases."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_v"):
                p.normal_(0.0, 1.0)
            elif name.endswith("weight_g"):
                p.uniform_(0.7, 1.3)
            elif name.endswith("bias"):
                p.zero_()
    targets = {"conv_post": 0.3}
    for name, _ in model.named_modules():
        if ".convs2." in name or ".convs." in name:  # residual increments
            targets[name] = 0.5
    _calibrate(model, lambda: model(mel), targets)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.05)


def randomize_vocos(model, mel):
    """Random weights, calibrated so that every layer has O(1) outputs and the head gives
    log-magnitudes of RMS ~1 around -0.3 (a few bins forced above log(100), so the
    magnitude clip is exercised) and phases of RMS ~3."""
    n_bins = model.head.out.out_features // 2
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.uniform_(0.1, 0.5)
            elif ".norm" in name or "layer_norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight")
                        else 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.normal_(0.0, 1.0)
        # head.out sees layer-normed features (RMS ~1): rows of norm ~1 give log-magnitudes
        # of RMS ~1, rows of norm ~3 phases of RMS ~3.
        dim = model.head.out.in_features
        model.head.out.weight[:n_bins] /= dim ** 0.5
        model.head.out.weight[n_bins:] *= 3.0 / dim ** 0.5
    _calibrate(model, lambda: model.decode(mel), {"head.out": None})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and name != "head.out.bias":
                p.normal_(0.0, 0.05)
        bias = model.head.out.bias
        bias.zero_()
        bias[:n_bins] = -0.3 + 0.2 * torch.randn(n_bins)
        bias[40:43] = 6.0  # always clipped at magnitude 100
        bias[n_bins:] = torch.rand(n_bins) * 2 * np.pi


# ---------------------------------------------------------------------------

def build(name, kind, config, mel, seed):
    torch.manual_seed(seed)
    if kind == "hifigan":
        model = rm.HifiganGenerator(config, weight_norm=True)
        randomize_hifigan(model, torch.from_numpy(mel[None, :, :CALIBRATION_FRAMES]))
    else:
        model = rm.Vocos(config)
        randomize_vocos(model, torch.from_numpy(mel[None, :, :CALIBRATION_FRAMES]))
    return model.eval()


def save_official(kind, model, config, folder):
    """The checkpoint and config as the official repositories ship them."""
    if kind == "hifigan":
        checkpoint = os.path.join(folder, "g_00000000")
        config_path = os.path.join(folder, "config.json")
        torch.save({"generator": model.state_dict()}, checkpoint)
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2)
    else:
        checkpoint = os.path.join(folder, "pytorch_model.bin")
        config_path = os.path.join(folder, "config.yaml")
        torch.save(model.state_dict(), checkpoint)
        with open(config_path, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
    return checkpoint, config_path


def run_converter(kind, checkpoint, config_path, out):
    subprocess.run([sys.executable, os.path.join(TOOLS, "convert.py"), kind, checkpoint,
                    config_path, out], check=True)


def reference_output(kind, model, mel):
    """The model's output for mel (n_mels, T), in float64 on a double copy of the float32
    parameters the checkpoint holds."""
    import copy
    double = copy.deepcopy(model).double()
    x = torch.from_numpy(mel.astype(np.float64))[None]
    with torch.no_grad():
        y = double(x)[0, 0] if kind == "hifigan" else double.decode(x)[0]
    return y.numpy()


def check_lef_matches(lef_path, mel, reference):
    """The converted file, rebuilt as a plain float32 model, must reproduce the reference."""
    model, forward = rm.model_from_lef(lef.read(lef_path))
    with torch.no_grad():
        y = forward(torch.from_numpy(mel)[None])[0].numpy()
    err = float(np.max(np.abs(y - reference)))
    scale = float(np.max(np.abs(reference)))
    if y.shape != reference.shape or not err <= 1e-4 * max(scale, 1.0):
        raise SystemExit(f"{lef_path}: converted model differs from the checkpoint "
                         f"(max |diff| {err:.3g})")
    return err


def make_parity(out):
    os.makedirs(out, exist_ok=True)
    for seed, (name, (kind, make_config)) in enumerate(PARITY_MODELS.items(), start=1):
        config = make_config()
        mel = model_mel(kind, config, PARITY_FRAMES)
        model = build(name, kind, config, mel, seed)
        ref = reference_output(kind, model, mel)
        rms = float(np.sqrt(np.mean(ref ** 2)))
        saturated = float(np.mean(np.abs(ref) > 0.95))
        if not 0.05 <= rms <= 0.7 or saturated > 0.01:
            raise SystemExit(f"{name}: output RMS {rms:.3f}, {100 * saturated:.1f}% of samples "
                             f"above 0.95: not a useful test signal; retune the initialisation")
        lef_path = os.path.join(out, name + ".lef")
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint, config_path = save_official(kind, model, config, tmp)
            run_converter(kind, checkpoint, config_path, lef_path)
        err = check_lef_matches(lef_path, mel, ref)
        np.save(os.path.join(out, name + "_mel.npy"), mel)
        np.save(os.path.join(out, name + "_out.npy"), ref.astype(np.float32))
        print(f"{name}: mel {mel.shape}, out {ref.shape[0]} samples, RMS {rms:.3f}, peak "
              f"{np.max(np.abs(ref)):.3f}; float32 LEF model vs float64 reference: max |diff| "
              f"{err:.2e}")

    # Front ends: 0.5 s of the test signal and its log-mel, exactly as each model's
    # training code computes it (here in float64, from the float32 audio stored).
    for which, rate in (("hifigan", 22050), ("vocos", 24000)):
        audio = speech_like(rate, rate // 2)
        mel = rm.hifigan_log_mel(audio) if which == "hifigan" else rm.vocos_log_mel(audio)
        np.save(os.path.join(out, f"frontend_{which}_audio.npy"), audio)
        np.save(os.path.join(out, f"frontend_{which}_mel.npy"), mel.astype(np.float32))
        print(f"frontend_{which}: audio {audio.shape[0]} samples at {rate} Hz, mel {mel.shape}, "
              f"range [{mel.min():.2f}, {mel.max():.2f}]")


def make_full_size(out):
    os.makedirs(out, exist_ok=True)
    for seed, (name, (kind, make_config)) in enumerate(FULL_MODELS.items(), start=101):
        config = make_config()
        mel = model_mel(kind, config, FULL_FRAMES)
        model = build(name, kind, config, mel, seed)
        lef_path = os.path.join(out, name + ".lef")
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint, config_path = save_official(kind, model, config, tmp)
            run_converter(kind, checkpoint, config_path, lef_path)
        np.save(os.path.join(out, name + "_mel.npy"), mel)
        print(f"{name}: {lef_path} ({os.path.getsize(lef_path) / 2**20:.1f} MiB), mel {mel.shape}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help="folder for the parity data (default tests/data/neural)")
    parser.add_argument("--full-size", metavar="DIR",
                        help="instead, write published-size models and 200-frame mels to DIR")
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.full_size:
        make_full_size(args.full_size)
    else:
        make_parity(args.out)


if __name__ == "__main__":
    main()
