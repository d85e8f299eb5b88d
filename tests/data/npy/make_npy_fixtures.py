#!/usr/bin/python3
"""Writes the .npy fixtures in this folder with real NumPy, so the C++ reader is tested against
files it did not write itself. Run from anywhere: /usr/bin/python3 tests/data/npy/make_npy_fixtures.py

Values are exact in float32 (small multiples of 1/4), so tests can state them by formula:
value[i] = 0.25 * i - 3 over the flattened C-order index i, unless noted."""
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.dirname(os.path.abspath(__file__))


def ramp(shape, dtype):
    n = int(np.prod(shape, dtype=np.int64))
    return (0.25 * np.arange(n) - 3).astype(dtype).reshape(shape)


def save(name, array, version=None):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        npy_format.write_array(f, array, version=version, allow_pickle=False)


save("f32_2x3.npy", ramp((2, 3), "<f4"))
save("f32_2x1x3.npy", ramp((2, 1, 3), "<f4"))
save("f32_1000.npy", ramp((1000,), "<f4"))
save("f32_scalar.npy", np.array(3.25, dtype="<f4"))
save("f32_0x4.npy", np.zeros((0, 4), dtype="<f4"))
save("f32_v2_3x2.npy", ramp((3, 2), "<f4"), version=(2, 0))
save("f32_v3_3x2.npy", ramp((3, 2), "<f4"), version=(3, 0))
# float64 values that are not exact in float32: 0.1 * i - 1 (the reader rounds to nearest).
save("f64_4x5.npy", (0.1 * np.arange(20) - 1).astype("<f8").reshape(4, 5))
# Refused by the reader:
save("f32_fortran_2x3.npy", np.asfortranarray(ramp((2, 3), "<f4")))
save("i32_4.npy", np.arange(4, dtype="<i4"))
save("f32_bigendian_3.npy", ramp((3,), ">f4"))
save("structured_2.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<f4")]))
save("c64_2.npy", np.array([1 + 2j, 3 - 4j], dtype="<c8"))
