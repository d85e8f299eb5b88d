"""LEF, the LibEtude model file, from Python: a writer and a validating reader.

The byte layout is specified in docs/model-format.md; engine/models/lef_file.cpp is
the engine's reader (LefFile) and writer (LefWriter). This module writes the
same bytes as LefWriter for the same metadata and tensors, and reads files
back with the same checks, so the converter can prove its output before it
renames it into place.

Needs numpy only (no torch), so the reader works anywhere.
"""

import json
import os
import struct
import tempfile
import zlib

import numpy as np

MAGIC = b"LIBETUDE"
VERSION = 1
HEADER_BYTES = 64
ALIGNMENT = 64
MAX_TENSORS = 1 << 16
MAX_NAME_BYTES = 256
MAX_DIMS = 8
MAX_METADATA_BYTES = 1 << 20

DTYPE_F32 = 0
DTYPE_F16 = 1
_NUMPY_DTYPES = {DTYPE_F32: np.dtype("<f4"), DTYPE_F16: np.dtype("<f2")}


class LefError(Exception):
    """A LEF file (or the data for one) breaks the format."""


def _align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _check_name(name):
    raw = name.encode("utf-8")
    if not 1 <= len(raw) <= MAX_NAME_BYTES:
        raise LefError(f"tensor name {name!r} must be 1..{MAX_NAME_BYTES} bytes")
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise LefError(f"tensor name {name!r} has an unprintable character")
    return raw


def _file_crc(image):
    """CRC-32 of the whole image with the checksum field (bytes 56..59) read as zero."""
    c = zlib.crc32(image[:56])
    c = zlib.crc32(b"\0\0\0\0", c)
    return zlib.crc32(image[60:], c) & 0xFFFFFFFF


def to_bytes(metadata, tensors):
    """The LEF image for `metadata` (a dict, stored as JSON) and `tensors`.

    `tensors` is a sequence of (name, array) pairs, kept in this order; each
    array must be float32 or float16 (stored as such, little-endian, row-major).
    """
    if not isinstance(metadata, dict):
        raise LefError("metadata must be a JSON object")
    meta = json.dumps(metadata, allow_nan=False).encode("utf-8")
    if len(meta) > MAX_METADATA_BYTES:
        raise LefError(f"metadata of {len(meta)} bytes is too large")
    if not 1 <= len(tensors) <= MAX_TENSORS:
        raise LefError(f"tensor count {len(tensors)} is out of range (1..{MAX_TENSORS})")

    index = bytearray()
    blobs = []
    seen = set()
    offset = 0
    any_f16 = False
    for name, array in tensors:
        raw_name = _check_name(name)
        if name in seen:
            raise LefError(f"tensor name {name!r} appears twice")
        seen.add(name)
        array = np.asarray(array)
        if array.dtype == np.float32:
            dtype = DTYPE_F32
        elif array.dtype == np.float16:
            dtype = DTYPE_F16
            any_f16 = True
        else:
            raise LefError(f"tensor {name!r} has dtype {array.dtype}; LEF holds f32 or f16")
        if not 1 <= array.ndim <= MAX_DIMS or 0 in array.shape:
            raise LefError(f"tensor {name!r} has shape {array.shape}; need rank 1..8, no zero dim")
        data = np.ascontiguousarray(array, dtype=_NUMPY_DTYPES[dtype]).tobytes()
        index += struct.pack("<H", len(raw_name)) + raw_name
        index += struct.pack("<BB", dtype, array.ndim)
        index += struct.pack(f"<{array.ndim}Q", *array.shape)
        index += struct.pack("<QQI", offset, len(data), zlib.crc32(data) & 0xFFFFFFFF)
        blobs.append(data)
        offset = _align(offset + len(data))

    meta_off = HEADER_BYTES
    index_off = meta_off + len(meta)
    data_off = _align(index_off + len(index))
    image = bytearray(HEADER_BYTES) + meta + index
    image += bytes(data_off - len(image))
    for data in blobs:
        image += data
        image += bytes(_align(len(image)) - len(image))
    struct.pack_into(
        "<8sIIQQQQQII", image, 0, MAGIC, VERSION, 1 if any_f16 else 0, meta_off, len(meta),
        index_off, len(tensors), data_off, 0, 0)
    struct.pack_into("<I", image, 56, _file_crc(image))
    return bytes(image)


def write(path, metadata, tensors):
    """Writes a LEF file atomically (see write_bytes)."""
    write_bytes(path, to_bytes(metadata, tensors))


def write_bytes(path, image):
    """Writes `image` to `path` atomically: a temporary file in the same folder, then a rename.

    On any failure no partial file is left (an existing file at `path` stays
    untouched) and OSError is raised.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".partial-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(image)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)  # mkstemp makes the file 0600; give it the usual mode
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class LefFile:
    """A validated LEF image: `metadata` (dict), `tensors` (name -> numpy array, in file order),
    `dtypes` (name -> 'f32' | 'f16') and `flags`."""

    def __init__(self, metadata, tensors, dtypes, flags):
        self.metadata = metadata
        self.tensors = tensors
        self.dtypes = dtypes
        self.flags = flags


def from_bytes(b, label="LEF image"):
    """Parses and validates an image with the same checks as the C++ LefFile."""
    size = len(b)
    if size < HEADER_BYTES:
        raise LefError(f"{label}: too short for a LEF header ({size} bytes, need 64)")
    (magic, version, flags, meta_off, meta_len, index_off, count, data_off, file_crc,
     reserved) = struct.unpack_from("<8sIIQQQQQII", b, 0)
    if magic != MAGIC:
        raise LefError(f"{label}: not a LEF file (bad magic)")
    if version != VERSION:
        raise LefError(f"{label}: LEF version {version} is not supported")
    if flags & ~1:
        raise LefError(f"{label}: unknown header flags {flags}")
    if reserved != 0:
        raise LefError(f"{label}: reserved header field is not zero")
    if meta_len > MAX_METADATA_BYTES:
        raise LefError(f"{label}: metadata of {meta_len} bytes is absurd")
    if meta_off < HEADER_BYTES or meta_off + meta_len > size:
        raise LefError(f"{label}: metadata lies outside the file (truncated?)")
    if not 1 <= count <= MAX_TENSORS:
        raise LefError(f"{label}: tensor count {count} is out of range")
    if index_off < HEADER_BYTES or index_off >= size:
        raise LefError(f"{label}: tensor index lies outside the file")
    if data_off % ALIGNMENT or data_off > size:
        raise LefError(f"{label}: data section offset is invalid")
    if _file_crc(b) != file_crc:
        raise LefError(f"{label}: file checksum mismatch (corrupt or truncated)")
    try:
        metadata = json.loads(bytes(b[meta_off:meta_off + meta_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise LefError(f"{label}: metadata is not a JSON object") from None
    if not isinstance(metadata, dict):
        raise LefError(f"{label}: metadata is not a JSON object")
    if not isinstance(metadata.get("architecture"), str):
        raise LefError(f"{label}: metadata field 'architecture' is missing or not a string")
    rate = metadata.get("sample_rate")
    if not isinstance(rate, int) or isinstance(rate, bool) or not 8000 <= rate <= 192000:
        raise LefError(f"{label}: metadata field 'sample_rate' is missing or outside 8000-192000")

    pos = index_off

    def take(fmt, what):
        nonlocal pos
        n = struct.calcsize(fmt)
        if pos + n > size:
            raise LefError(f"{label}: the tensor index is truncated (reading {what})")
        values = struct.unpack_from(fmt, b, pos)
        pos += n
        return values

    tensors, dtypes, extents = {}, {}, []
    for i in range(count):
        (name_len,) = take("<H", "a name length")
        if not 1 <= name_len <= MAX_NAME_BYTES:
            raise LefError(f"{label}: tensor {i} has a name of {name_len} bytes")
        if pos + name_len > size:
            raise LefError(f"{label}: the tensor index is truncated (a name)")
        raw = bytes(b[pos:pos + name_len])
        pos += name_len
        if any(c < 0x20 or c == 0x7F for c in raw):
            raise LefError(f"{label}: tensor {i} has an unprintable name")
        name = raw.decode("utf-8", errors="replace")
        dtype, ndim = take("<BB", "a dtype and rank")
        if dtype not in _NUMPY_DTYPES:
            raise LefError(f"{label}: tensor '{name}' has unknown dtype {dtype}")
        if not 1 <= ndim <= MAX_DIMS:
            raise LefError(f"{label}: tensor '{name}' has rank {ndim}")
        shape = take(f"<{ndim}Q", "a shape")
        if 0 in shape:
            raise LefError(f"{label}: tensor '{name}' has an absurd shape")
        offset, nbytes, crc = take("<QQI", "an offset, size and checksum")
        if int(np.prod(shape, dtype=object)) * _NUMPY_DTYPES[dtype].itemsize != nbytes:
            raise LefError(f"{label}: tensor '{name}' size {nbytes} does not match its shape")
        if offset % ALIGNMENT:
            raise LefError(f"{label}: tensor '{name}' is not aligned")
        start, stop = data_off + offset, data_off + offset + nbytes
        if stop > size:
            raise LefError(f"{label}: tensor '{name}' lies outside the file (truncated?)")
        if name in tensors:
            raise LefError(f"{label}: tensor name '{name}' appears twice")
        data = bytes(b[start:stop])
        if zlib.crc32(data) & 0xFFFFFFFF != crc:
            raise LefError(f"{label}: tensor '{name}' checksum mismatch")
        tensors[name] = np.frombuffer(data, dtype=_NUMPY_DTYPES[dtype]).reshape(shape)
        dtypes[name] = "f32" if dtype == DTYPE_F32 else "f16"
        extents.append((start, stop))
    if data_off < pos:
        raise LefError(f"{label}: data section overlaps the tensor index")
    extents.sort()
    for (_, prev_stop), (start, _) in zip(extents, extents[1:]):
        if start < prev_stop:
            raise LefError(f"{label}: two tensors overlap")
    return LefFile(metadata, tensors, dtypes, flags)


def read(path):
    """Reads and validates a LEF file; raises OSError or LefError."""
    with open(path, "rb") as f:
        return from_bytes(f.read(), f"model '{path}'")
