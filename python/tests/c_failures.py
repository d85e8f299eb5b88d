"""Provokes a few failures through the C API (engine/etude.h) with ctypes and
prints each one's status code and message as JSON; test_errors.py provokes
the same failures through Python. Run in a process of its own, so that the
C library's engine never shares a process with the extension's.
    python c_failures.py LIBETUDE_SO"""

import ctypes
import json
import sys
from ctypes import POINTER, byref, c_char_p, c_double, c_float, c_int, c_ssize_t, c_void_p

lib = ctypes.CDLL(sys.argv[1])
lib.etude_last_error.restype = c_char_p
lib.etude_engine_create.argtypes = [POINTER(c_void_p)]
lib.etude_engine_destroy.argtypes = [c_void_p]
lib.etude_stream_create.argtypes = [c_void_p, c_char_p, c_double, POINTER(c_void_p)]
lib.etude_stream_destroy.argtypes = [c_void_p]
lib.etude_stream_set_prosody.argtypes = [c_void_p, c_float, c_float, c_float, c_float]
lib.etude_stream_push_text.argtypes = [c_void_p, c_char_p, c_ssize_t]
lib.etude_stream_end_input.argtypes = [c_void_p]
for f in (lib.etude_engine_create, lib.etude_stream_create, lib.etude_stream_set_prosody,
          lib.etude_stream_push_text, lib.etude_stream_end_input):
    f.restype = c_int


def failure(status):
    return [status, lib.etude_last_error().decode()]


engine = c_void_p()
assert lib.etude_engine_create(byref(engine)) == 0, lib.etude_last_error()
stream = c_void_p()
out = {"rate": failure(lib.etude_stream_create(engine, b"slt", 1.0, byref(stream)))}
assert lib.etude_stream_create(engine, b"slt", 16000.0, byref(stream)) == 0
out["prosody"] = failure(lib.etude_stream_set_prosody(stream, 100.0, 1.0, 1.0, 1.0))
out["utf8"] = failure(lib.etude_stream_push_text(stream, b"caf\xff. ", 6))
assert lib.etude_stream_push_text(stream, b"Caf\xc3", 4) == 0
out["end_input"] = failure(lib.etude_stream_end_input(stream))
lib.etude_stream_destroy(stream)
lib.etude_engine_destroy(engine)
print(json.dumps(out))
