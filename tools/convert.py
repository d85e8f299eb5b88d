#!/usr/bin/python3
"""Converts a PyTorch vocoder checkpoint into a LEF model file for LibEtude.

  tools/convert.py hifigan g_02500000 config.json hifigan_v1.lef
  tools/convert.py vocos pytorch_model.bin config.yaml vocos_mel_24khz.lef

HiFi-GAN: an official jik876/hifi-gan generator checkpoint ({'generator':
state_dict}) and its config.json; weight norm is folded into plain weights.
Vocos: an official mel model (pytorch_model.bin, a plain state dict) and its
config.yaml (MelSpectrogramFeatures + VocosBackbone + ISTFTHead, padding
"center"). The tensor names and metadata written are the contract with the
engine, described in docs/model-format.md ("Model families").

Exit status: 0 written; 1 refused (one line on stderr says why; no output
file is left behind); 2 usage error. Run with /usr/bin/python3, which has torch.
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lef  # noqa: E402

CONVERTER_VERSION = 1


class ConversionError(Exception):
    """A refusal: the message is the one line the user sees."""


def one_line(exc):
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


# ---------------------------------------------------------------------------
# Input files

def check_readable(path, what):
    if not os.path.exists(path):
        raise ConversionError(f"{what} '{path}' does not exist")
    if not os.path.isfile(path):
        raise ConversionError(f"{what} '{path}' is not a regular file")
    if not os.access(path, os.R_OK):
        raise ConversionError(f"{what} '{path}' is not readable")


def check_writable(path):
    """Fails early (before the slow torch work) if `path` cannot be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConversionError(f"cannot write '{path}': it is a directory")
    if not os.path.isdir(folder):
        raise ConversionError(f"cannot write '{path}': folder '{folder}' does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConversionError(f"cannot write '{path}': folder '{folder}' is not writable")


def load_checkpoint(path):
    check_readable(path, "checkpoint")
    import torch
    try:
        return torch.load(path, map_location="cpu")
    except Exception as e:  # torch.load raises many kinds (pickle, zip, EOF, ...)
        raise ConversionError(
            f"cannot load checkpoint '{path}' with torch.load: {one_line(e)}") from None


def load_json(path):
    check_readable(path, "config")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConversionError(f"config '{path}' is not valid JSON: {one_line(e)}") from None
    if not isinstance(config, dict):
        raise ConversionError(f"config '{path}' is not a JSON object")
    return config


def load_yaml(path):
    check_readable(path, "config")
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ConversionError(f"config '{path}' is not valid YAML: {one_line(e)}") from None
    if not isinstance(config, dict):
        raise ConversionError(f"config '{path}' is not a YAML mapping")
    return config


def float_tensors(state, label):
    """name -> float64 numpy array for every tensor of a state dict."""
    import torch
    if not isinstance(state, dict):
        raise ConversionError(f"{label} is not a state dict (got {type(state).__name__})")
    out = {}
    for name, value in state.items():
        if not isinstance(name, str) or not torch.is_tensor(value):
            raise ConversionError(f"{label} is not a state dict (entry {name!r} is not a tensor)")
        if value.is_floating_point():
            out[name] = value.detach().cpu().to(torch.float64).numpy()
        else:
            out[name] = None  # only an error if someone needs it
    return out


# ---------------------------------------------------------------------------
# Config fields

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# kind -> (test, what the message says was expected)
_FIELD_KINDS = {
    "int": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    "number": (lambda v: (_is_int(v) or isinstance(v, float)) and math.isfinite(v), "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "ints": (lambda v: isinstance(v, list) and len(v) > 0 and all(_is_int(x) and x > 0
                                                                  for x in v),
             "a non-empty list of positive integers"),
}


def field(config, key, label, kind, default=None, required=True):
    """config[key], checked to be of `kind`; `default` when absent (or null) and not required."""
    if key not in config or config[key] is None:
        if required:
            raise ConversionError(f"{label}: field '{key}' is missing")
        return default
    test, expected = _FIELD_KINDS[kind]
    if not test(config[key]):
        raise ConversionError(f"{label}: field '{key}' must be {expected}, got {config[key]!r}")
    return config[key]


def check_sample_rate(rate, label):
    if not 8000 <= rate <= 192000:
        raise ConversionError(f"{label}: sample rate {rate} is outside 8000-192000")


# ---------------------------------------------------------------------------
# Taking tensors out of a state dict, checking shapes

class StateReader:
    """Hands out the tensors of a state dict by name, checks their shapes, and
    remembers which were used so that leftovers can be reported."""

    def __init__(self, tensors, label):
        self.tensors = tensors
        self.label = label
        self.used = set()

    def has(self, name):
        return name in self.tensors

    def take(self, name, shape):
        if name not in self.tensors:
            raise ConversionError(f"{self.label}: tensor '{name}' is missing")
        value = self.tensors[name]
        self.used.add(name)
        if value is None:
            raise ConversionError(f"{self.label}: tensor '{name}' is not floating point")
        if tuple(value.shape) != tuple(shape):
            raise ConversionError(
                f"{self.label}: tensor '{name}' has shape {tuple(value.shape)}, expected "
                f"{tuple(shape)} from the config")
        if not np.all(np.isfinite(value)):
            raise ConversionError(f"{self.label}: tensor '{name}' has NaN or infinite values")
        return value

    def take_weight(self, prefix, shape):
        """`prefix.weight`, folding weight norm (dim 0) if the checkpoint stores it as
        weight_g/weight_v (torch.nn.utils.weight_norm) or parametrizations.weight.original0/1
        (torch.nn.utils.parametrizations.weight_norm)."""
        plain = prefix + ".weight"
        forms = [(prefix + ".weight_g", prefix + ".weight_v"),
                 (prefix + ".parametrizations.weight.original0",
                  prefix + ".parametrizations.weight.original1")]
        if self.has(plain):
            return self.take(plain, shape)
        for g_name, v_name in forms:
            if self.has(g_name) or self.has(v_name):
                g = self.take(g_name, (shape[0],) + (1,) * (len(shape) - 1))
                v = self.take(v_name, shape)
                norm = np.sqrt(np.sum(v * v, axis=tuple(range(1, v.ndim)), keepdims=True))
                if np.any(norm == 0):
                    raise ConversionError(
                        f"{self.label}: tensor '{v_name}' has an all-zero slice; cannot fold "
                        f"weight norm")
                return g * v / norm
        raise ConversionError(f"{self.label}: tensor '{plain}' (or its weight-norm pair "
                              f"'{prefix}.weight_g'/'{prefix}.weight_v') is missing")

    def leftovers(self, ignore_prefix=None):
        return [n for n in self.tensors if n not in self.used
                and not (ignore_prefix and n.startswith(ignore_prefix))]


def refuse_leftovers(reader, what, ignore_prefix=None):
    extra = reader.leftovers(ignore_prefix)
    if extra:
        shown = ", ".join(f"'{n}'" for n in extra[:3]) + (" ..." if len(extra) > 3 else "")
        raise ConversionError(f"{reader.label}: {len(extra)} tensor(s) the config does not "
                              f"account for ({shown}); does the config match the {what}?")


# ---------------------------------------------------------------------------
# HiFi-GAN

def hifigan_hyperparameters(h, label):
    if h.get("resblock") is None:
        raise ConversionError(f"{label}: field 'resblock' is missing")
    resblock = h["resblock"]
    if str(resblock) not in ("1", "2"):
        raise ConversionError(f"{label}: resblock {resblock!r} is not supported (only \"1\" "
                              f"and \"2\", as in HiFi-GAN V1/V2 and V3)")
    resblock = int(str(resblock))
    rates = field(h, "upsample_rates", label, "ints")
    kernels = field(h, "upsample_kernel_sizes", label, "ints")
    channels = field(h, "upsample_initial_channel", label, "int")
    rb_kernels = field(h, "resblock_kernel_sizes", label, "ints")
    rb_dilations = h.get("resblock_dilation_sizes")
    if len(kernels) != len(rates):
        raise ConversionError(f"{label}: upsample_kernel_sizes has {len(kernels)} entries, "
                              f"upsample_rates {len(rates)}")
    for k, u in zip(kernels, rates):
        if k < u or (k - u) % 2:
            raise ConversionError(
                f"{label}: upsample kernel {k} with rate {u} is not supported (kernel - rate "
                f"must be even and >= 0 so that each frame gives exactly rate samples)")
    if any(k % 2 == 0 for k in rb_kernels):
        raise ConversionError(f"{label}: resblock_kernel_sizes {rb_kernels} must all be odd "
                              f"(an even kernel changes the signal length)")
    # The official ResBlock1 uses dilation[0..2] and ResBlock2 dilation[0..1]; longer
    # lists are accepted there and their tail ignored, so we do the same.
    need = 3 if resblock == 1 else 2
    if (not isinstance(rb_dilations, list) or len(rb_dilations) != len(rb_kernels)
            or not all(isinstance(d, list) and len(d) >= need and all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in d)
                for d in rb_dilations)):
        raise ConversionError(
            f"{label}: resblock_dilation_sizes must be a list of {len(rb_kernels)} lists of "
            f"at least {need} positive integers (one per resblock kernel size)")
    rb_dilations = [list(d[:need]) for d in rb_dilations]
    if channels // 2 ** len(rates) < 1:
        raise ConversionError(f"{label}: upsample_initial_channel {channels} is too small for "
                              f"{len(rates)} upsampling stages")
    return {
        "resblock": resblock,
        "upsample_rates": rates,
        "upsample_kernel_sizes": kernels,
        "upsample_initial_channel": channels,
        "resblock_kernel_sizes": rb_kernels,
        "resblock_dilation_sizes": rb_dilations,
        "conv_pre_kernel": 7,
        "conv_post_kernel": 7,
        "leaky_relu_slope": 0.1,
        "final_leaky_relu_slope": 0.01,
    }


def convert_hifigan(checkpoint_path, config_path):
    config = load_json(config_path)
    clabel = f"config '{config_path}'"
    hp = hifigan_hyperparameters(config, clabel)
    n_mels = field(config, "num_mels", clabel, "int")
    n_fft = field(config, "n_fft", clabel, "int")
    hop = field(config, "hop_size", clabel, "int")
    win = field(config, "win_size", clabel, "int")
    rate = field(config, "sampling_rate", clabel, "int")
    fmin = field(config, "fmin", clabel, "number")
    fmax = field(config, "fmax", clabel, "number", default=rate / 2, required=False)
    check_sample_rate(rate, clabel)
    if math.prod(hp["upsample_rates"]) != hop:
        raise ConversionError(f"{clabel}: the upsample rates multiply to "
                              f"{math.prod(hp['upsample_rates'])}, not hop_size {hop}")
    if win > n_fft or (n_fft - hop) % 2:
        raise ConversionError(f"{clabel}: win_size {win} / n_fft {n_fft} / hop_size {hop} are "
                              f"not supported (need win <= n_fft and n_fft - hop even)")
    if not 0 <= fmin < fmax:
        raise ConversionError(f"{clabel}: need 0 <= fmin < fmax, got {fmin}, {fmax}")

    checkpoint = load_checkpoint(checkpoint_path)
    label = f"checkpoint '{checkpoint_path}'"
    if not isinstance(checkpoint, dict) or "generator" not in checkpoint:
        hint = ""
        if isinstance(checkpoint, dict) and ("mpd" in checkpoint or "msd" in checkpoint):
            hint = " (this looks like a discriminator checkpoint do_*; convert the g_* file)"
        elif isinstance(checkpoint, dict) and any(
                str(k).startswith("conv_pre.") for k in checkpoint):
            hint = " (a bare state dict; official generator checkpoints are " \
                   "{'generator': state_dict})"
        raise ConversionError(f"{label} is not a HiFi-GAN generator checkpoint: no "
                              f"'generator' key{hint}")
    state = StateReader(float_tensors(checkpoint["generator"], label), label)

    tensors = []

    def conv(prefix, shape, out_channels=None):
        # Conv1d weights are (out, in, k); ConvTranspose1d ones (in, out, k).
        tensors.append((prefix + ".weight", state.take_weight(prefix, shape)))
        tensors.append((prefix + ".bias", state.take(prefix + ".bias",
                                                     (out_channels or shape[0],))))

    ch = hp["upsample_initial_channel"]
    conv("conv_pre", (ch, n_mels, 7))
    for i, k in enumerate(hp["upsample_kernel_sizes"]):
        conv(f"ups.{i}", (ch // 2 ** i, ch // 2 ** (i + 1), k), ch // 2 ** (i + 1))
    nk = len(hp["resblock_kernel_sizes"])
    for i in range(len(hp["upsample_rates"])):
        c = ch // 2 ** (i + 1)
        for j, (k, dilations) in enumerate(zip(hp["resblock_kernel_sizes"],
                                               hp["resblock_dilation_sizes"])):
            block = f"resblocks.{i * nk + j}"
            lists = ["convs1", "convs2"] if hp["resblock"] == 1 else ["convs"]
            for name in lists:
                for m in range(len(dilations)):
                    conv(f"{block}.{name}.{m}", (c, c, k))
    conv("conv_post", (1, ch // 2 ** len(hp["upsample_rates"]), 7))
    refuse_leftovers(state, "checkpoint")

    metadata = {
        "architecture": "hifigan",
        "sample_rate": rate,
        "n_fft": n_fft,
        "hop": hop,
        "win_length": win,
        "window": "hann",
        "n_mels": n_mels,
        "fmin": float(fmin),
        "fmax": float(fmax),
        "mel_scale": "slaney",
        "mel_norm": "slaney",
        "mel_power": 1,
        "log_floor": 1e-5,
        "magnitude_eps": 1e-9,
        "padding": "reflect_half",
        "converted_from": os.path.basename(checkpoint_path),
        "converter_version": CONVERTER_VERSION,
        "hyperparameters": hp,
    }
    return metadata, tensors


# ---------------------------------------------------------------------------
# Vocos

def vocos_section(config, key, label, class_name, refusal):
    section = config.get(key)
    if not isinstance(section, dict) or not isinstance(section.get("class_path"), str):
        raise ConversionError(f"{label}: section '{key}' with a class_path is missing")
    if section["class_path"].rsplit(".", 1)[-1] != class_name:
        raise ConversionError(f"{label}: {key} {section['class_path']} is not supported "
                              f"({refusal})")
    args = section.get("init_args") or {}
    if not isinstance(args, dict):
        raise ConversionError(f"{label}: {key}.init_args is not a mapping")
    return args


def convert_vocos(checkpoint_path, config_path):
    config = load_yaml(config_path)
    clabel = f"config '{config_path}'"
    fe = vocos_section(config, "feature_extractor", clabel, "MelSpectrogramFeatures",
                       "only the mel model, vocos.feature_extractors.MelSpectrogramFeatures")
    bb = vocos_section(config, "backbone", clabel, "VocosBackbone",
                       "only vocos.models.VocosBackbone")
    hd = vocos_section(config, "head", clabel, "ISTFTHead", "only vocos.heads.ISTFTHead")

    # Defaults are those of the Vocos constructors.
    fel = clabel + " feature_extractor"
    rate = field(fe, "sample_rate", fel, "int", 24000, required=False)
    n_fft = field(fe, "n_fft", fel, "int", 1024, required=False)
    hop = field(fe, "hop_length", fel, "int", 256, required=False)
    n_mels = field(fe, "n_mels", fel, "int", 100, required=False)
    fe_padding = field(fe, "padding", fel, "str", "center", required=False)
    check_sample_rate(rate, fel)
    if fe_padding != "center":
        raise ConversionError(f"{fel}: padding '{fe_padding}' is not supported yet (only "
                              f"'center')")
    bbl = clabel + " backbone"
    if bb.get("adanorm_num_embeddings") is not None:
        raise ConversionError(f"{bbl}: adanorm_num_embeddings is not supported (AdaLayerNorm "
                              f"models, e.g. Vocos on EnCodec tokens)")
    input_channels = field(bb, "input_channels", bbl, "int")
    dim = field(bb, "dim", bbl, "int")
    intermediate = field(bb, "intermediate_dim", bbl, "int")
    layers = field(bb, "num_layers", bbl, "int")
    layer_scale = bb.get("layer_scale_init_value")
    if input_channels != n_mels:
        raise ConversionError(f"{bbl}: input_channels {input_channels} differs from the feature "
                              f"extractor's n_mels {n_mels}")
    hdl = clabel + " head"
    head_dim = field(hd, "dim", hdl, "int")
    head_n_fft = field(hd, "n_fft", hdl, "int")
    head_hop = field(hd, "hop_length", hdl, "int")
    head_padding = field(hd, "padding", hdl, "str", "same", required=False)
    if head_padding != "center":
        raise ConversionError(f"{hdl}: padding '{head_padding}' is not supported yet (only "
                              f"'center')")
    if head_dim != dim:
        raise ConversionError(f"{hdl}: dim {head_dim} differs from the backbone's dim {dim}")
    if head_hop != hop:
        raise ConversionError(f"{hdl}: hop_length {head_hop} differs from the feature "
                              f"extractor's {hop}")
    if head_n_fft % 2:
        raise ConversionError(f"{hdl}: n_fft {head_n_fft} must be even")

    checkpoint = load_checkpoint(checkpoint_path)
    label = f"checkpoint '{checkpoint_path}'"
    if isinstance(checkpoint, dict) and "generator" in checkpoint:
        raise ConversionError(f"{label} is not a Vocos state dict (it has a 'generator' key: "
                              f"a HiFi-GAN checkpoint?)")
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("state_dict"), dict):
        raise ConversionError(f"{label} is a training checkpoint; convert the exported "
                              f"pytorch_model.bin (a plain state dict)")
    state = StateReader(float_tensors(checkpoint, label), label)

    tensors = []

    def put(name, shape):
        tensors.append((name, state.take(name, shape)))

    def linear(prefix, n_in, n_out):
        put(prefix + ".weight", (n_out, n_in))
        put(prefix + ".bias", (n_out,))

    def layer_norm(prefix):
        put(prefix + ".weight", (dim,))
        put(prefix + ".bias", (dim,))

    put("backbone.embed.weight", (dim, n_mels, 7))
    put("backbone.embed.bias", (dim,))
    layer_norm("backbone.norm")
    for i in range(layers):
        p = f"backbone.convnext.{i}"
        put(p + ".dwconv.weight", (dim, 1, 7))
        put(p + ".dwconv.bias", (dim,))
        layer_norm(p + ".norm")
        linear(p + ".pwconv1", dim, intermediate)
        linear(p + ".pwconv2", intermediate, dim)
        if state.has(p + ".gamma") or layer_scale is None or layer_scale > 0:
            put(p + ".gamma", (dim,))
        else:  # layer_scale_init_value <= 0: Vocos has no gamma, i.e. a scale of 1
            tensors.append((p + ".gamma", np.ones(dim)))
    layer_norm("backbone.final_layer_norm")
    linear("head.out", dim, head_n_fft + 2)
    window = state.take("head.istft.window", (head_n_fft,))
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(head_n_fft) / head_n_fft)
    if np.max(np.abs(window - hann)) > 1e-6:
        raise ConversionError(f"{label}: head.istft.window is not a periodic Hann window")
    tensors.append(("head.istft.window", window))
    refuse_leftovers(state, "checkpoint", ignore_prefix="feature_extractor.")

    metadata = {
        "architecture": "vocos",
        "sample_rate": rate,
        "n_fft": n_fft,
        "hop": hop,
        "win_length": n_fft,
        "window": "hann",
        "n_mels": n_mels,
        "fmin": 0.0,
        "fmax": float(rate // 2),  # torchaudio's default f_max
        "mel_scale": "htk",
        "mel_norm": "none",
        "mel_power": 1,
        "log_floor": 1e-7,
        "magnitude_eps": 0.0,
        "padding": "center",
        "converted_from": os.path.basename(checkpoint_path),
        "converter_version": CONVERTER_VERSION,
        "hyperparameters": {
            "dim": dim,
            "intermediate_dim": intermediate,
            "num_layers": layers,
            "layer_norm_eps": 1e-6,
            "head_n_fft": head_n_fft,
            "head_hop": head_hop,
            "head_padding": "center",
            "max_magnitude": 100,
        },
    }
    return metadata, tensors


CONVERTERS = {"hifigan": convert_hifigan, "vocos": convert_vocos}


# ---------------------------------------------------------------------------

def cast(tensors, f16):
    """f32 everywhere; with f16, matrices and kernels (rank >= 2) become f16 while biases,
    norms, layer scales and the window (small, and where precision matters) stay f32."""
    out = []
    for name, value in tensors:
        if f16 and value.ndim >= 2:
            if np.max(np.abs(value)) > 65504:
                raise ConversionError(f"tensor '{name}' exceeds the f16 range; convert without "
                                      f"--f16")
            out.append((name, value.astype(np.float16)))
        else:
            out.append((name, value.astype(np.float32)))
    return out


def convert(architecture, checkpoint, config, output, f16=False):
    """Converts and writes `output`; returns (metadata, tensors written). Raises
    ConversionError on any refusal, leaving no file behind."""
    if architecture not in CONVERTERS:
        raise ConversionError(f"unknown architecture '{architecture}' (expected one of: "
                              f"{', '.join(CONVERTERS)})")
    check_writable(output)
    metadata, tensors = CONVERTERS[architecture](checkpoint, config)
    tensors = cast(tensors, f16)
    try:
        image = lef.to_bytes(metadata, tensors)
        # Read our own bytes back with the loader's checks before anything is written.
        check = lef.from_bytes(image, "converted model")
    except lef.LefError as e:
        raise ConversionError(f"internal error building the LEF file: {e}") from None
    for name, value in tensors:
        if not np.array_equal(check.tensors[name], value):
            raise ConversionError(f"internal error: tensor '{name}' does not read back")
    try:
        lef.write_bytes(output, image)
    except OSError as e:
        raise ConversionError(f"cannot write '{output}': {e.strerror or one_line(e)}") from None
    return metadata, tensors


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: usage error: {message} (see --help)\n")


def main(argv=None):
    parser = _Parser(
        prog="convert.py",
        description="Convert a PyTorch vocoder checkpoint into a LibEtude LEF model file.",
        epilog="examples:\n"
               "  tools/convert.py hifigan g_02500000 config.json hifigan_v1.lef\n"
               "  tools/convert.py vocos pytorch_model.bin config.yaml vocos.lef\n\n"
               "exit status: 0 written, 1 refused (the reason on one line), 2 usage error",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("architecture", help="hifigan (jik876/hifi-gan generator, resblock 1 "
                        "or 2) or vocos (gemelo-ai/vocos mel model with the ISTFT head)")
    parser.add_argument("checkpoint", help="hifigan: g_XXXXXXXX ({'generator': state_dict}); "
                        "vocos: pytorch_model.bin (a state dict)")
    parser.add_argument("config", help="hifigan: config.json; vocos: config.yaml")
    parser.add_argument("output", help="the LEF file to write (atomically)")
    parser.add_argument("--f16", action="store_true",
                        help="store weight matrices and kernels as f16 (biases, norms and "
                        "the window stay f32)")
    args = parser.parse_args(argv)
    try:
        metadata, tensors = convert(args.architecture, args.checkpoint, args.config,
                                    args.output, args.f16)
    except ConversionError as e:
        print(f"convert.py: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # an unforeseen failure still gets one line, not a traceback
        print(f"convert.py: error: unexpected {type(e).__name__}: {one_line(e)}",
              file=sys.stderr)
        return 1
    params = sum(v.size for _, v in tensors)
    print(f"wrote {args.output}: {metadata['architecture']}, {len(tensors)} tensors, "
          f"{params:,} parameters, {'f16/f32' if args.f16 else 'f32'}, "
          f"{metadata['sample_rate']} Hz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
