// NumPy .npy files of float arrays: reference spectrograms, test fixtures and tensors exchanged
// with Python tooling.
//
// Format (numpy.lib.format): the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), a
// little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), then an ASCII (3.0: UTF-8) Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with spaces and a
// newline, then the raw array data.
//
// Errors: both functions throw etude::Error (a std::runtime_error) with a one-line message that
// names the file and the problem. The reader validates the whole header and the file size before
// it allocates anything, so a hostile or damaged file gives an exception, never a crash or a
// huge allocation. Pure functions; safe from any thread, not real-time safe.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace etude::audio_io {

struct NpyArray {
    std::vector<std::size_t> shape;  // empty for a 0-d array (one value)
    std::vector<float> data;         // row-major (C order), product(shape) values
};

// Reads a little-endian float32 ('<f4') or float64 ('<f8', rounded to float) array in C order.
// Refused: other dtypes (ints, complex, big-endian, structured), Fortran order, unknown format
// versions, malformed headers, data shorter or longer than the shape says.
NpyArray read_npy(const std::string& path);

// Writes a '<f4' C-order array (format 1.0, or 2.0 when the header needs it). The file is
// written beside `path` under a temporary name, flushed to disk and renamed over `path`, so a
// failure leaves any previous file untouched and no partial file behind. Throws if
// product(shape) != data.size().
void write_npy(const std::string& path, const std::vector<std::size_t>& shape,
               std::span<const float> data);

}  // namespace etude::audio_io
