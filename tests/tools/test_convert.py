"""Tests of tools/convert.py and tools/lef.py (run with /usr/bin/python3, which has torch):

  /usr/bin/python3 -m unittest discover -s tests/tools -v

Tiny HiFi-GAN (V1-shaped) and Vocos checkpoints in the official formats are
converted by running convert.py as a user would; the LEF files are read back
and compared with weights folded here independently of the converter. Every
refusal must exit with status 1, say why on one line, and leave no file.
"""

import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import numpy as np
import torch
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
CONVERT = os.path.join(TOOLS, "convert.py")
sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, TOOLS)
import lef  # noqa: E402
import reference_models as rm  # noqa: E402


def run_convert(*args):
    return subprocess.run([sys.executable, CONVERT, *args], capture_output=True, text=True,
                          timeout=120)


def tiny_hifigan_config():
    # V1's structure (4 upsampling stages, ResBlock1 with kernels 3/7/11, dilations 1/3/5)
    # with 16 channels, so the last stage has a single channel.
    return rm.hifigan_config("v1", upsample_initial_channel=16)


def tiny_vocos_config():
    return rm.vocos_config(dim=8, intermediate_dim=12, num_layers=2, n_mels=20, n_fft=64,
                           hop=16)


def make_hifigan_checkpoint(folder, config, seed=3, weight_norm=True):
    torch.manual_seed(seed)
    model = rm.HifiganGenerator(config, weight_norm=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Weight norm's g differs from ||v|| so that the fold matters.
            p.copy_(torch.rand_like(p) + 0.5 if name.endswith("weight_g")
                    else torch.randn_like(p))
    state = model.state_dict()
    if not weight_norm:
        for module in model.modules():
            if hasattr(module, "weight_g"):
                torch.nn.utils.remove_weight_norm(module)
        state = model.state_dict()
    path = os.path.join(folder, "g_00000042")
    torch.save({"generator": state}, path)
    config_path = os.path.join(folder, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    return path, config_path, state


def make_vocos_checkpoint(folder, config, seed=4):
    torch.manual_seed(seed)
    model = rm.Vocos(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p))
    path = os.path.join(folder, "pytorch_model.bin")
    torch.save(model.state_dict(), path)
    config_path = os.path.join(folder, "config.yaml")
    with open(config_path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return path, config_path, model.state_dict()


def expected_hifigan_names(config):
    """The LEF tensor names for a HiFi-GAN config, listed from the architecture."""
    names = ["conv_pre"]
    names += [f"ups.{i}" for i in range(len(config["upsample_rates"]))]
    nk = len(config["resblock_kernel_sizes"])
    for i in range(len(config["upsample_rates"]) * nk):
        d = len(config["resblock_dilation_sizes"][i % nk])
        lists = ["convs1", "convs2"] if config["resblock"] == "1" else ["convs"]
        names += [f"resblocks.{i}.{c}.{m}" for c in lists for m in range(d)]
    names.append("conv_post")
    return [f"{n}.{w}" for n in names for w in ("weight", "bias")]


def fold(g, v):
    """weight_g * weight_v / ||weight_v||, the norm over all dims but 0, in float64."""
    v = v.double().numpy()
    norms = np.linalg.norm(v.reshape(v.shape[0], -1), axis=1).reshape(
        (-1,) + (1,) * (v.ndim - 1))
    return g.double().numpy() * v / norms


class ConverterTestCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def assert_refused(self, result, out_path, fragment):
        self.assertEqual(result.returncode, 1, f"stdout {result.stdout!r} stderr "
                                               f"{result.stderr!r}")
        message = result.stderr.strip()
        self.assertTrue(message.startswith("convert.py: error: "), message)
        self.assertNotIn("\n", message)
        self.assertNotIn("Traceback", message)
        self.assertIn(fragment, message)
        self.assertEqual(result.stdout, "")
        self.assertFalse(os.path.exists(out_path), "a refused conversion left its output")
        folder = os.path.dirname(out_path)
        if os.path.isdir(folder):
            leftovers = [n for n in os.listdir(folder) if ".partial" in n]
            self.assertEqual(leftovers, [], "a partial file was left behind")


class HifiganConversion(unittest.TestCase):
    # One checkpoint, converted once to f32 and once to f16, shared by the tests below
    # (each conversion starts a Python with torch, which is most of this file's run time).
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.tmp = cls._tmp.name
        cls.config = tiny_hifigan_config()
        cls.ckpt, cls.cfg, cls.state = make_hifigan_checkpoint(cls.tmp, cls.config)
        cls.out32 = os.path.join(cls.tmp, "model.lef")
        cls.out16 = os.path.join(cls.tmp, "model16.lef")
        cls.result32 = run_convert("hifigan", cls.ckpt, cls.cfg, cls.out32)
        cls.result16 = run_convert("hifigan", cls.ckpt, cls.cfg, cls.out16, "--f16")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_weight_norm_is_folded_and_metadata_describes_the_model(self):
        self.assertEqual(self.result32.returncode, 0, self.result32.stderr)
        self.assertIn("hifigan, 156 tensors", self.result32.stdout)
        state = self.state
        model = lef.read(self.out32)
        self.assertEqual(list(model.tensors), expected_hifigan_names(self.config))
        self.assertEqual(set(model.dtypes.values()), {"f32"})
        self.assertEqual(model.flags, 0)
        for name, value in model.tensors.items():
            prefix = name.rsplit(".", 1)[0]
            if name.endswith(".weight"):
                want = fold(state[prefix + ".weight_g"], state[prefix + ".weight_v"])
            else:
                want = state[name].double().numpy()
            self.assertEqual(value.shape, want.shape, name)
            np.testing.assert_allclose(value, want, rtol=2e-7, atol=1e-9, err_msg=name)
        # The fold is not a no-op: g was drawn independently of ||v||.
        v = state["conv_pre.weight_v"].numpy()
        self.assertFalse(np.allclose(model.tensors["conv_pre.weight"], v, rtol=0.1))

        meta = model.metadata
        self.assertEqual(meta["architecture"], "hifigan")
        self.assertEqual(meta["sample_rate"], 22050)
        for key, want in {"n_fft": 1024, "hop": 256, "win_length": 1024, "window": "hann",
                          "n_mels": 80, "fmin": 0, "fmax": 8000, "mel_scale": "slaney",
                          "mel_norm": "slaney", "mel_power": 1, "log_floor": 1e-5,
                          "magnitude_eps": 1e-9, "padding": "reflect_half",
                          "converted_from": "g_00000042", "converter_version": 1}.items():
            self.assertEqual(meta[key], want, key)
        self.assertEqual(meta["hyperparameters"], {
            "resblock": 1, "upsample_rates": [8, 8, 2, 2], "upsample_kernel_sizes": [16, 16, 4, 4],
            "upsample_initial_channel": 16, "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5]] * 3, "conv_pre_kernel": 7,
            "conv_post_kernel": 7, "leaky_relu_slope": 0.1, "final_leaky_relu_slope": 0.01})

    def test_converted_model_computes_what_the_checkpoint_computes(self):
        original = rm.HifiganGenerator(self.config, weight_norm=True).double()
        original.load_state_dict(self.state)
        rebuilt, forward = rm.model_from_lef(lef.read(self.out32))
        mel = torch.randn(1, 80, 5)
        with torch.no_grad():
            want = original(mel.double())[:, 0].numpy()
            got = forward(mel).numpy()
        self.assertEqual(got.shape, (1, 5 * 256))
        np.testing.assert_allclose(got, want, atol=1e-5)

    def test_plain_weights_are_accepted(self):
        folder = os.path.join(self.tmp, "plain")
        os.mkdir(folder)
        ckpt, cfg, state = make_hifigan_checkpoint(folder, self.config, weight_norm=False)
        self.assertIn("conv_pre.weight", state)
        out = os.path.join(folder, "m.lef")
        self.assertEqual(run_convert("hifigan", ckpt, cfg, out).returncode, 0)
        wn = lef.read(self.out32).tensors
        plain = lef.read(out).tensors
        self.assertEqual(list(wn), list(plain))
        for name in wn:
            np.testing.assert_allclose(plain[name], wn[name], rtol=1e-5, atol=1e-7,
                                       err_msg=name)

    def test_f16_stores_kernels_as_half_and_keeps_biases_f32(self):
        self.assertEqual(self.result16.returncode, 0, self.result16.stderr)
        full, half = lef.read(self.out32), lef.read(self.out16)
        self.assertEqual(half.flags, 1)
        for name, value in half.tensors.items():
            self.assertEqual(half.dtypes[name], "f16" if value.ndim >= 2 else "f32", name)
            np.testing.assert_allclose(value.astype(np.float32), full.tensors[name],
                                       rtol=1e-3, atol=1e-4, err_msg=name)


class VocosConversion(ConverterTestCase):
    def test_tensors_and_metadata(self):
        config = tiny_vocos_config()
        ckpt, cfg, state = make_vocos_checkpoint(self.tmp, config)
        self.assertTrue(any(k.startswith("feature_extractor.") for k in state))
        out = os.path.join(self.tmp, "vocos.lef")
        result = run_convert("vocos", ckpt, cfg, out)
        self.assertEqual(result.returncode, 0, result.stderr)
        model = lef.read(out)
        want_names = ["backbone.embed.weight", "backbone.embed.bias", "backbone.norm.weight",
                      "backbone.norm.bias"]
        for i in range(2):
            want_names += [f"backbone.convnext.{i}.{n}" for n in (
                "dwconv.weight", "dwconv.bias", "norm.weight", "norm.bias", "pwconv1.weight",
                "pwconv1.bias", "pwconv2.weight", "pwconv2.bias", "gamma")]
        want_names += ["backbone.final_layer_norm.weight", "backbone.final_layer_norm.bias",
                       "head.out.weight", "head.out.bias", "head.istft.window"]
        self.assertEqual(list(model.tensors), want_names)
        for name, value in model.tensors.items():
            self.assertEqual(model.dtypes[name], "f32")
            np.testing.assert_array_equal(value, state[name].numpy(), err_msg=name)
        self.assertEqual(model.tensors["head.out.weight"].shape, (66, 8))
        meta = model.metadata
        for key, want in {"architecture": "vocos", "sample_rate": 24000, "n_fft": 64, "hop": 16,
                          "win_length": 64, "window": "hann", "n_mels": 20, "fmin": 0,
                          "fmax": 12000, "mel_scale": "htk", "mel_norm": "none",
                          "mel_power": 1, "log_floor": 1e-7, "magnitude_eps": 0,
                          "padding": "center", "converted_from": "pytorch_model.bin",
                          "converter_version": 1}.items():
            self.assertEqual(meta[key], want, key)
        self.assertEqual(meta["hyperparameters"], {
            "dim": 8, "intermediate_dim": 12, "num_layers": 2, "layer_norm_eps": 1e-6,
            "head_n_fft": 64, "head_hop": 16, "head_padding": "center", "max_magnitude": 100})


class Refusals(ConverterTestCase):
    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.tmp, "out.lef")

    def hifigan_files(self, **config_overrides):
        config = tiny_hifigan_config()
        ckpt, cfg, _ = make_hifigan_checkpoint(self.tmp, config)
        if config_overrides:
            config.update(config_overrides)
            with open(cfg, "w") as f:
                json.dump(config, f)
        return ckpt, cfg

    def vocos_files(self, edit=None):
        config = tiny_vocos_config()
        ckpt, cfg, _ = make_vocos_checkpoint(self.tmp, config)
        if edit:
            edit(config)
            with open(cfg, "w") as f:
                yaml.safe_dump(config, f)
        return ckpt, cfg

    def test_unknown_architecture(self):
        ckpt, cfg = self.hifigan_files()
        self.assert_refused(run_convert("wavenet", ckpt, cfg, self.out), self.out,
                            "unknown architecture 'wavenet'")

    def test_missing_checkpoint(self):
        _, cfg = self.hifigan_files()
        missing = os.path.join(self.tmp, "g_missing")
        self.assert_refused(run_convert("hifigan", missing, cfg, self.out), self.out,
                            "does not exist")

    def test_checkpoint_that_is_not_a_torch_file(self):
        _, cfg = self.hifigan_files()
        junk = os.path.join(self.tmp, "junk")
        with open(junk, "wb") as f:
            f.write(b"not a checkpoint at all")
        self.assert_refused(run_convert("hifigan", junk, cfg, self.out), self.out,
                            "cannot load checkpoint")

    def test_checkpoint_without_generator_key(self):
        _, cfg = self.hifigan_files()
        ckpt = os.path.join(self.tmp, "do_00000042")
        torch.save({"mpd": {"w": torch.zeros(2)}, "msd": {}}, ckpt)
        self.assert_refused(run_convert("hifigan", ckpt, cfg, self.out), self.out,
                            "no 'generator' key")

    def test_shapes_that_do_not_match_the_config(self):
        ckpt, cfg = self.hifigan_files(upsample_initial_channel=32)
        self.assert_refused(run_convert("hifigan", ckpt, cfg, self.out), self.out,
                            "tensor 'conv_pre.weight_g' has shape (16, 1, 1), expected "
                            "(32, 1, 1)")

    def test_missing_tensor(self):
        config = tiny_hifigan_config()
        ckpt, cfg, state = make_hifigan_checkpoint(self.tmp, config)
        del state["conv_post.bias"]
        torch.save({"generator": state}, ckpt)
        self.assert_refused(run_convert("hifigan", ckpt, cfg, self.out), self.out,
                            "tensor 'conv_post.bias' is missing")

    def test_unsupported_hifigan_resblock(self):
        ckpt, cfg = self.hifigan_files(resblock="3")
        self.assert_refused(run_convert("hifigan", ckpt, cfg, self.out), self.out,
                            "resblock '3' is not supported")

    def test_vocos_checkpoint_given_as_hifigan_and_back(self):
        vckpt, vcfg = self.vocos_files()
        hckpt, hcfg = self.hifigan_files()
        self.assert_refused(run_convert("hifigan", vckpt, hcfg, self.out), self.out,
                            "no 'generator' key")
        self.assert_refused(run_convert("vocos", hckpt, vcfg, self.out), self.out,
                            "'generator' key")

    def test_vocos_adanorm(self):
        def edit(c):
            c["backbone"]["init_args"]["adanorm_num_embeddings"] = 4
        ckpt, cfg = self.vocos_files(edit)
        self.assert_refused(run_convert("vocos", ckpt, cfg, self.out), self.out,
                            "adanorm_num_embeddings is not supported")

    def test_vocos_feature_extractor_other_than_mel(self):
        def edit(c):
            c["feature_extractor"] = {"class_path": "vocos.feature_extractors.EncodecFeatures",
                                      "init_args": {"encodec_model": "encodec_24khz"}}
        ckpt, cfg = self.vocos_files(edit)
        self.assert_refused(run_convert("vocos", ckpt, cfg, self.out), self.out,
                            "EncodecFeatures is not supported")

    def test_vocos_head_other_than_istft(self):
        def edit(c):
            c["head"]["class_path"] = "vocos.heads.IMDCTCosHead"
        ckpt, cfg = self.vocos_files(edit)
        self.assert_refused(run_convert("vocos", ckpt, cfg, self.out), self.out,
                            "IMDCTCosHead is not supported")

    def test_vocos_same_padding(self):
        def edit(c):
            del c["head"]["init_args"]["padding"]  # ISTFTHead's default is "same"
        ckpt, cfg = self.vocos_files(edit)
        self.assert_refused(run_convert("vocos", ckpt, cfg, self.out), self.out,
                            "padding 'same' is not supported yet")

    def test_vocos_shapes_that_do_not_match_the_config(self):
        def edit(c):
            c["backbone"]["init_args"]["intermediate_dim"] = 16
        ckpt, cfg = self.vocos_files(edit)
        self.assert_refused(run_convert("vocos", ckpt, cfg, self.out), self.out,
                            "tensor 'backbone.convnext.0.pwconv1.weight' has shape (12, 8), "
                            "expected (16, 8)")

    def test_output_in_a_missing_folder(self):
        ckpt, cfg = self.hifigan_files()
        out = os.path.join(self.tmp, "no", "such", "folder", "out.lef")
        self.assert_refused(run_convert("hifigan", ckpt, cfg, out), out, "cannot write")

    def test_output_that_is_a_directory(self):
        ckpt, cfg = self.hifigan_files()
        out = os.path.join(self.tmp, "a_dir")
        os.mkdir(out)
        result = run_convert("hifigan", ckpt, cfg, out)
        self.assertEqual(result.returncode, 1)
        self.assertIn("it is a directory", result.stderr)
        self.assertEqual(os.listdir(out), [])

    @unittest.skipIf(os.geteuid() == 0, "root can write to read-only folders")
    def test_output_in_a_read_only_folder(self):
        ckpt, cfg = self.hifigan_files()
        folder = os.path.join(self.tmp, "ro")
        os.mkdir(folder)
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)
        try:
            out = os.path.join(folder, "out.lef")
            self.assert_refused(run_convert("hifigan", ckpt, cfg, out), out, "not writable")
        finally:
            os.chmod(folder, stat.S_IRWXU)

    def test_usage_error_exits_2(self):
        result = run_convert("hifigan")
        self.assertEqual(result.returncode, 2)
        self.assertIn("usage error", result.stderr)


class AtomicWrite(unittest.TestCase):
    def test_a_failed_write_leaves_neither_the_file_nor_a_partial_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.lef")
            image = lef.to_bytes({"architecture": "x", "sample_rate": 16000},
                                 [("w", np.ones(3, np.float32))])
            with mock.patch.object(lef.os, "replace", side_effect=OSError(28, "No space")):
                with self.assertRaises(OSError):
                    lef.write_bytes(path, image)
            self.assertEqual(os.listdir(tmp), [])
            lef.write_bytes(path, image)
            self.assertEqual(os.listdir(tmp), ["m.lef"])
            self.assertEqual(lef.read(path).tensors["w"].tolist(), [1.0, 1.0, 1.0])


class LefBytes(unittest.TestCase):
    """The Python writer lays bytes out as the format says (the C++ loader's view)."""

    def test_layout_alignment_and_checksums(self):
        import struct
        import zlib
        tensors = [("a", np.arange(5, dtype=np.float32)),
                   ("b.c", np.ones((2, 3), np.float16))]
        image = lef.to_bytes({"architecture": "t", "sample_rate": 8000}, tensors)
        magic, version, flags, meta_off, meta_len, index_off, count, data_off, crc, reserved = \
            struct.unpack_from("<8sIIQQQQQII", image)
        self.assertEqual((magic, version, flags, meta_off, count, reserved),
                         (b"LIBETUDE", 1, 1, 64, 2, 0))
        self.assertEqual(json.loads(image[meta_off:meta_off + meta_len]),
                         {"architecture": "t", "sample_rate": 8000})
        self.assertEqual(index_off, meta_off + meta_len)
        self.assertEqual(data_off % 64, 0)
        self.assertEqual(len(image) % 64, 0)
        zeroed = image[:56] + b"\0\0\0\0" + image[60:]
        self.assertEqual(crc, zlib.crc32(zeroed))
        # First index entry: name "a", f32, rank 1, shape 5, offset 0, 20 bytes.
        pos = index_off
        self.assertEqual(struct.unpack_from("<H1sBBQQQI", image, pos),
                         (1, b"a", 0, 1, 5, 0, 20, zlib.crc32(tensors[0][1].tobytes())))
        self.assertEqual(image[data_off:data_off + 20], tensors[0][1].tobytes())
        # Second: at the next 64-byte boundary of the data section.
        pos += 2 + 1 + 2 + 8 + 8 + 8 + 4
        name_len, = struct.unpack_from("<H", image, pos)
        offset, nbytes = struct.unpack_from("<QQ", image, pos + 2 + name_len + 2 + 16)
        self.assertEqual((name_len, offset, nbytes), (3, 64, 12))
        self.assertEqual(image[data_off + 64:data_off + 76], tensors[1][1].tobytes())

    def test_reader_rejects_a_flipped_byte(self):
        image = bytearray(lef.to_bytes({"architecture": "t", "sample_rate": 8000},
                                       [("a", np.zeros(4, np.float32))]))
        for at in range(0, len(image), 7):
            corrupt = bytearray(image)
            corrupt[at] ^= 0x40
            with self.assertRaises(lef.LefError, msg=f"byte {at}"):
                lef.from_bytes(bytes(corrupt))


if __name__ == "__main__":
    unittest.main()
