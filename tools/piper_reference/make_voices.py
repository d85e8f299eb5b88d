#!/usr/bin/python3
"""Random-weight Piper voices in Piper's published architecture, exported to
ONNX as Piper's exporter does, with reference audio (tests/data/piper/).

For each voice: `<voice>.onnx` (opset 15; weight norm removed from the
decoder only; inputs input, input_lengths, scales and, for several speakers,
sid; output `output`), `<voice>.onnx.json` (Piper's config layout), and
`<voice>_audio.npy`, the audio for the phoneme ids in `reference.json` with
noise_scale = noise_w = 0, computed by PyTorch in float64. The script checks
that ONNX Runtime running the exported graph gives the same audio (within
1e-4) and that PyTorch in float32 does too, and prints how close they came.

  /usr/bin/python3 tools/piper_reference/make_voices.py            # small test voices
  build/pyenv/bin/python tools/piper_reference/make_voices.py      # ... checked by onnxruntime
  ... make_voices.py --full-size DIR [--sizes medium,high]          # published channel counts
  ... make_voices.py --compare-with REAL.onnx                       # graph check against a real voice

Everything is deterministic (fixed seeds). onnxruntime (PyPI, in the test
venv) is optional: without it the ONNX Runtime check is skipped, saying so.
"""

import argparse
import collections
import inspect
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

try:
    import onnx
except ImportError:
    sys.exit("make_voices.py: needs Debian's python3-onnx (apt-get install python3-onnx), "
             "which the test command does not install: the tests use the stored voices")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import vits  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "piper")
OPSET = 15
HOP = 256

# Piper's four sizes (piper_train/__main__.py and vits/config.py): x_low is
# the small encoder; low and medium are one architecture at 16 kHz and
# 22.05 kHz; high has the large HiFi-GAN (ResBlock1).
DECODER_V2 = dict(resblock="2", resblock_kernel_sizes=[3, 5, 7],
                  resblock_dilation_sizes=[[1, 2], [2, 6], [3, 12]], upsample_rates=[8, 8, 4],
                  upsample_initial_channel=256, upsample_kernel_sizes=[16, 16, 8])
DECODER_V1 = dict(resblock="1", resblock_kernel_sizes=[3, 7, 11],
                  resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],
                  upsample_rates=[8, 8, 2, 2], upsample_initial_channel=512,
                  upsample_kernel_sizes=[16, 16, 4, 4])
COMMON = dict(num_symbols=256, n_heads=2, n_layers=6, kernel_size=3, num_speakers=1,
              gin_channels=0)
SIZES = {
    "x_low": dict(COMMON, **DECODER_V2, inter_channels=96, hidden_channels=96,
                  filter_channels=384, sample_rate=16000),
    "low": dict(COMMON, **DECODER_V2, inter_channels=192, hidden_channels=192,
                filter_channels=768, sample_rate=16000),
    "medium": dict(COMMON, **DECODER_V2, inter_channels=192, hidden_channels=192,
                   filter_channels=768, sample_rate=22050),
    "high": dict(COMMON, **DECODER_V1, inter_channels=192, hidden_channels=192,
                 filter_channels=768, sample_rate=22050),
}


def reduced(size, **extra):
    """The size's structure with channel counts cut (so the test data stays
    small): hidden, inter and filter channels divided by 12 (x_low keeps its
    half-width encoder), the decoder starting at 32 channels (a cut by 8, or
    by 16 for high's twice as wide decoder); every layer count, kernel,
    dilation and rate kept."""
    hp = dict(SIZES[size])
    hp["hidden_channels"] = hp["inter_channels"] = hp["hidden_channels"] // 12
    hp["filter_channels"] = hp["filter_channels"] // 12
    hp["upsample_initial_channel"] = 32
    hp.update(extra)
    return hp


# name -> (size, hyperparameters, speaker for the reference, length_scale)
TEST_VOICES = {
    "test_x_low": ("x_low", lambda: reduced("x_low"), None, 1.0),
    "test_low": ("low", lambda: reduced("low"), None, 1.0),
    "test_medium": ("medium", lambda: reduced("medium"), None, 1.0),
    "test_high": ("high", lambda: reduced("high"), None, 1.0),
    "test_medium_multi": ("medium", lambda: reduced("medium", num_speakers=4, gin_channels=16),
                          2, 1.2),
}

# A Piper-style phoneme_id_map (the layout Piper's espeak voices use: pad _,
# bos ^, eos $, space, punctuation, then letters and IPA symbols).
SYMBOLS = ["_", "^", "$", " ", "!", "'", "(", ")", ",", "-", ".", ":", ";", "?"] + [
    chr(c) for c in range(ord("a"), ord("z") + 1)] + list("æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ")

# The reference sentence as ids: ^ _ (p _)* $ over 16 phonemes (what the
# front end would lay out for a short phrase).
PHONEMES = "hɛloʊ, wʌn tɛst."
REFERENCE_IDS = [1, 0]
for ph in PHONEMES:
    REFERENCE_IDS += [SYMBOLS.index(ph), 0]
REFERENCE_IDS += [2]


def piper_config(name, size, hp, noise_w=0.8):
    speakers = {f"speaker_{i}": i for i in range(hp["num_speakers"])} \
        if hp["num_speakers"] > 1 else {}
    return {
        "audio": {"sample_rate": hp["sample_rate"], "quality": size},
        "espeak": {"voice": "en-us"},
        "inference": {"noise_scale": 0.667, "length_scale": 1, "noise_w": noise_w},
        "phoneme_type": "espeak",
        "phoneme_map": {},
        "phoneme_id_map": {s: [i] for i, s in enumerate(SYMBOLS)},
        "num_symbols": hp["num_symbols"],
        "num_speakers": hp["num_speakers"],
        "speaker_id_map": speakers,
        "piper_version": "1.0.0",
        "language": {"code": "en_US", "family": "en", "region": "US",
                     "name_native": "English", "name_english": "English",
                     "country_english": "United States"},
        "dataset": name,
    }


# ---------------------------------------------------------------------------
# Weights


def clone(model, dtype=torch.float32):
    """A fresh copy (deepcopy fails on weight norm's computed weights)."""
    copy_ = vits.SynthesizerInfer(model.hp)
    copy_.load_state_dict(model.state_dict())
    return copy_.to(dtype).eval()


def randomize(model, seed):
    """Every parameter random, including those Piper initialises to zero
    (the flows' output convolutions, whose zeros would make the flows the
    identity and hide them from the test). Conv weights get PyTorch's default
    fan-in scale; norms, affine terms and weight-norm gains are perturbed
    around their neutral values so that a mapping mistake shows."""
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * std

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g"):
                p.copy_(p * (1.0 + normal(p.shape, 0.1)))
            elif name.endswith("gamma"):
                p.copy_(1.0 + normal(p.shape, 0.1))
            elif name.endswith("beta") or name.endswith(".m") or name.endswith(".logs"):
                p.copy_(normal(p.shape, 0.1))
            elif name.endswith("emb_rel_k") or name.endswith("emb_rel_v"):
                p.copy_(normal(p.shape, p.shape[-1] ** -0.5))
            elif name.endswith("emb.weight") or name.endswith("emb_g.weight"):
                p.copy_(normal(p.shape, 1.0 / math.sqrt(p.shape[-1])))
            elif name.endswith("weight_v") or name.endswith("weight"):
                fan_in = p.shape[1] * (p.shape[2] if p.dim() > 2 else 1)
                if ".ups." in name:
                    # ConvTranspose1d [in, out, k] with k = 2 * stride: each
                    # output sample sums in * 2 products.
                    fan_in = p.shape[0] * 2
                p.copy_(normal(p.shape, 1.0 / math.sqrt(fan_in)))
            elif name.endswith("bias"):
                p.copy_(normal(p.shape, 0.05))
            else:
                raise RuntimeError(f"no rule to randomise {name}")
        # Weight norm: make g differ from |v| so that the fold is exercised.
        for module in model.modules():
            if hasattr(module, "weight_g"):
                v = module.weight_v
                norm = v.reshape(v.shape[0], -1).norm(dim=1).reshape(module.weight_g.shape)
                module.weight_g.copy_(norm * (1.0 + normal(norm.shape, 0.1)))


def tune_durations(model, ids, sid, length_scale):
    """Shift and scale the duration predictor's last affine step so the
    reference durations fall between about 1.5 and 6 frames, like speech, and
    check each lies at least 0.02 away from an integer: durations are rounded
    up, so one near an integer would make the frame count depend on float
    rounding."""
    m64 = clone(model, torch.float64)
    x, lengths = torch.tensor([ids]), torch.tensor([len(ids)])
    with torch.no_grad():
        enc, _, _, x_mask = m64.enc_p(x, lengths)
        g = m64.emb_g(torch.tensor([sid])).unsqueeze(-1) if sid is not None else None
        affine = m64.dp.flows[0]
        affine.m.zero_()
        affine.logs.zero_()
        z = m64.dp(enc, x_mask, g=g, noise_scale=0.0)[0, 0].numpy()
    scale = max(z.std() / 0.35, 1e-6)  # log-durations spread 0.35
    shift = z.mean() - math.log(3.2) * scale  # centred on 3.2 frames
    with torch.no_grad():
        model.dp.flows[0].m[0, 0] = float(shift)
        model.dp.flows[0].logs[0, 0] = float(math.log(scale))
    w = np.exp((z - shift) / scale) * length_scale
    margin = np.min(np.abs(w - np.round(w)))
    return w, margin


# ---------------------------------------------------------------------------
# Export (as piper_train/export_onnx.py)


def export(model, path, num_speakers):
    model = clone(model)
    with torch.no_grad():
        model.dec.remove_weight_norm()

    def infer_forward(text, text_lengths, scales, sid=None):
        return model.infer(text, text_lengths, sid=sid, noise_scale=scales[0],
                           length_scale=scales[1], noise_scale_w=scales[2]).unsqueeze(1)

    model.forward = infer_forward
    gen = torch.Generator().manual_seed(1234)
    sequences = torch.randint(0, model.hp["num_symbols"], (1, 50), dtype=torch.long, generator=gen)
    lengths = torch.LongTensor([sequences.size(1)])
    sid = torch.LongTensor([0]) if num_speakers > 1 else None
    scales = torch.FloatTensor([0.667, 1.0, 0.8])
    torch.manual_seed(1234)
    # Newer torch (2.9 on the GPU machine) exports through torch.export by
    # default, which cannot trace the durations' data-dependent lengths;
    # Piper's own export uses the TorchScript exporter, asked for by name
    # where torch has both.
    choice = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(
        model=model, args=(sequences, lengths, scales, sid), f=path, verbose=False, **choice,
        opset_version=OPSET, input_names=["input", "input_lengths", "scales", "sid"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch_size", 1: "phonemes"},
                      "input_lengths": {0: "batch_size"},
                      "output": {0: "batch_size", 1: "time"}})


def shorten_names(path):
    """Renames the graph's intermediate values and its nodes to short names
    (v1, v2, ...; n1, n2, ...). torch's scoped names ("/enc_p/encoder/
    attn_layers.0/...") are most of a small model's file; nothing else
    changes: nodes, attributes, initializers (names included: the anonymous
    onnx::Conv_NNNN stay), graph inputs and outputs are as exported."""
    m = onnx.load(path)
    g = m.graph
    keep = {i.name for i in g.initializer} | {i.name for i in g.input} | \
        {o.name for o in g.output} | {""}
    renamed = {}
    for node in g.node:
        for out in node.output:
            if out not in keep and out not in renamed:
                renamed[out] = f"v{len(renamed) + 1}"
    for i, node in enumerate(g.node, start=1):
        node.name = f"n{i}"
        node.input[:] = [renamed.get(x, x) for x in node.input]
        node.output[:] = [renamed.get(x, x) for x in node.output]
    for vi in g.value_info:
        vi.name = renamed.get(vi.name, vi.name)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def torch_audio(model, ids, sid, length_scale, dtype):
    m = clone(model, dtype)
    with torch.no_grad():
        out = m.infer(torch.tensor([ids]), torch.tensor([len(ids)]),
                      sid=torch.tensor([sid]) if sid is not None else None,
                      noise_scale=0.0, length_scale=length_scale, noise_scale_w=0.0)
    return out[0, 0].numpy()


def onnxruntime_audio(path, ids, sid, length_scale):
    try:
        import onnxruntime
    except ImportError:
        return None
    opts = onnxruntime.SessionOptions()
    opts.log_severity_level = 3
    sess = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feeds = {"input": np.array([ids], dtype=np.int64),
             "input_lengths": np.array([len(ids)], dtype=np.int64),
             "scales": np.array([0.0, length_scale, 0.0], dtype=np.float32)}
    if sid is not None:
        feeds["sid"] = np.array([sid], dtype=np.int64)
    return sess.run(["output"], feeds)[0].reshape(-1)


# ---------------------------------------------------------------------------
# Graph comparison with a real voice


def graph_summary(path):
    m = onnx.load(path)
    g = m.graph
    init = {i.name for i in g.initializer}

    def io(values):
        return [(v.name, onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type))
                for v in values if v.name not in init]

    return {
        "opset": [(o.domain, o.version) for o in m.opset_import],
        "inputs": io(g.input),
        "outputs": io(g.output),
        "op_types": collections.Counter(n.op_type for n in g.node),
        "anonymous_conv": sum(1 for n in init if n.startswith("onnx::Conv_")),
        "conv": sum(1 for n in g.node if n.op_type == "Conv"),
        "conv_transpose": sum(1 for n in g.node if n.op_type == "ConvTranspose"),
    }


def compare_graphs(ours, real, same_size):
    """Prints how our export compares with a real voice's; returns the list
    of differences that matter (input and output names and types, opset,
    kinds of nodes; for a voice of the real one's size, the counts of
    convolutions and of anonymous weight constants too).

    One difference is expected and allowed: torch before 2.0 (Debian's is
    1.13) writes small constants as Constant nodes, torch 2.0 (which made
    the real voice) as initializers. A loader must take both."""
    a, b = graph_summary(ours), graph_summary(real)
    problems = []
    for key in ("opset", "inputs", "outputs"):
        print(f"  {key}: ours {a[key]}, real {b[key]}")
        if a[key] != b[key]:
            problems.append(f"{key}: ours {a[key]}, real {b[key]}")
    only_ours = set(a["op_types"]) - set(b["op_types"]) - {"Constant"}
    only_real = set(b["op_types"]) - set(a["op_types"])
    print(f"  node kinds: ours {len(a['op_types'])}, real {len(b['op_types'])}; only ours "
          f"{sorted(set(a['op_types']) - set(b['op_types']))}, only real {sorted(only_real)}")
    if only_ours or only_real:
        problems.append(f"node kinds only in ours {sorted(only_ours)}, only in the real voice "
                        f"{sorted(only_real)}")
    for key in ("anonymous_conv", "conv", "conv_transpose"):
        print(f"  {key}: ours {a[key]}, real {b[key]}")
        if same_size and a[key] != b[key]:
            problems.append(f"{key}: ours {a[key]}, real {b[key]}")
    print(f"  nodes: ours {sum(a['op_types'].values())}, real {sum(b['op_types'].values())}")
    return problems


# ---------------------------------------------------------------------------


def build_voice(name, size, hp, sid, length_scale, out_dir, seed, shorten):
    # The first seed (of a fixed sequence) whose durations are well clear of
    # integers.
    for attempt in range(50):
        torch.manual_seed(seed + 1000 * attempt)
        model = vits.SynthesizerInfer(hp).eval()
        randomize(model, seed + 1000 * attempt)
        w, margin = tune_durations(model, REFERENCE_IDS, sid, length_scale)
        if margin >= 0.02:
            break
    else:
        raise SystemExit(f"{name}: no seed gave durations clear of integers")
    onnx_path = os.path.join(out_dir, f"{name}.onnx")
    export(model, onnx_path, hp["num_speakers"])
    if shorten:
        shorten_names(onnx_path)
    # The full-size voices speak benchmark sentences, not just the reference
    # ids their durations were tuned on: with random weights the duration
    # predictor's noise (noise_w 0.8) can make thousands of frames per
    # phoneme (the high voice passed 100,000 frames, the engine's limit, for
    # a 28-word sentence), so their configs default to noise_w 0, which
    # keeps sentences near speech length (11-26 s for those 28 words).
    config = piper_config(name, size, hp, noise_w=0.8 if shorten else 0.0)
    with open(onnx_path + ".json", "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    if not shorten:
        # The same weights for PyTorch (bench/torch_piper.py runs them
        # batched beside the engine in the GPU pack).
        torch.save({"hp": hp, "state_dict": model.state_dict()},
                   os.path.join(out_dir, f"{name}.pt"))

    ref64 = torch_audio(model, REFERENCE_IDS, sid, length_scale, torch.float64)
    ref32 = torch_audio(model, REFERENCE_IDS, sid, length_scale, torch.float32)
    frames = int(np.sum(np.ceil(w)))
    assert ref64.size == frames * HOP, (ref64.size, frames)
    np.save(os.path.join(out_dir, f"{name}_audio.npy"), ref64.astype(np.float32))
    d32 = float(np.max(np.abs(ref32 - ref64)))
    ort = onnxruntime_audio(onnx_path, REFERENCE_IDS, sid, length_scale)
    params = sum(p.numel() for p in model.parameters())
    line = (f"{name}: {params} parameters, {frames} frames, durations {w.min():.2f}..{w.max():.2f} "
            f"(margin {margin:.3f}), rms {np.sqrt(np.mean(ref64**2)):.3f} peak "
            f"{np.max(np.abs(ref64)):.3f}; torch f32 vs f64 {d32:.2e}")
    if ort is None:
        line += "; onnxruntime not installed: ONNX Runtime check skipped"
    else:
        if ort.size != ref64.size:
            raise SystemExit(f"{name}: onnxruntime made {ort.size} samples, PyTorch {ref64.size}")
        d_ort = float(np.max(np.abs(ort - ref64)))
        line += f"; onnxruntime vs f64 {d_ort:.2e}"
        if d_ort > 1e-4:
            raise SystemExit(line + ": onnxruntime disagrees with PyTorch")
    if d32 > 1e-4:
        raise SystemExit(line + ": float32 PyTorch disagrees with float64")
    print(line)
    return onnx_path, [int(d) for d in np.ceil(w)]


def write_not_vits(path):
    """A valid ONNX model that is not a voice (one Relu), for the loader's
    refusal test."""
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "not_vits",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, producer_name="make_voices.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--full-size", metavar="DIR",
                    help="write published-size voices (x_low, low, medium, high) to DIR instead")
    ap.add_argument("--sizes", metavar="LIST",
                    help="with --full-size: only these sizes, comma-separated (x_low, low, "
                         "medium, high; the GPU pack makes medium alone)")
    ap.add_argument("--compare-with", metavar="ONNX",
                    help="a real Piper voice to compare the exported graph with")
    args = ap.parse_args()

    if args.full_size:
        out_dir = args.full_size
        sizes = args.sizes.split(",") if args.sizes else list(SIZES)
        unknown = [s for s in sizes if s not in SIZES]
        if unknown:
            ap.error(f"--sizes: unknown {', '.join(unknown)} (choose from {', '.join(SIZES)})")
        voices = {f"full_{s}": (s, (lambda s=s: dict(SIZES[s])), None, 1.0) for s in sizes}
    else:
        out_dir = args.out
        voices = TEST_VOICES
    os.makedirs(out_dir, exist_ok=True)
    written, durations = {}, {}
    for seed, (name, (size, make_hp, sid, length_scale)) in enumerate(voices.items(), start=7):
        if args.full_size:
            seed = 7 + list(SIZES).index(size)  # the same voice whichever --sizes are made
        written[name], durations[name] = build_voice(name, size, make_hp(), sid, length_scale, out_dir, seed,
                                    shorten=not args.full_size)
    if not args.full_size:
        write_not_vits(os.path.join(out_dir, "not_vits.onnx"))
        ref = {"phonemes": PHONEMES, "phoneme_ids": REFERENCE_IDS, "noise_scale": 0.0,
               "noise_w": 0.0,
               "voices": {n: {"speaker_id": v[2], "length_scale": v[3],
                              "durations": durations[n], "audio": f"{n}_audio.npy"}
                          for n, v in voices.items()}}
        with open(os.path.join(out_dir, "reference.json"), "w", encoding="utf-8") as f:
            json.dump(ref, f, ensure_ascii=False, indent=2)
            f.write("\n")
    if args.compare_with:
        with open(args.compare_with + ".json", encoding="utf-8") as f:
            real_quality = json.load(f)["audio"]["quality"]
        failed = False
        for name, path in written.items():
            if "multi" in name:
                continue  # the real voice is single-speaker: sid differs by design
            print(f"graph of {name} against {args.compare_with}:")
            problems = compare_graphs(path, args.compare_with,
                                      same_size=voices[name][0] == real_quality)
            for p in problems:
                print("  DIFFERS:", p)
            failed |= bool(problems)
        if failed:
            raise SystemExit("the exported graph differs from the real voice's")


if __name__ == "__main__":
    main()
