// The C API's option structs (engine/etude.h) read and filled through the
// one table of stream options (engine/stream_options.h): each C field is
// listed once, by the StreamOptions field it carries, and the conversion
// and the defaults follow from the table. Private to the engine (c_api.cpp,
// tests).
#pragma once

#include <cstddef>
#include <span>

#include "engine/etude.h"
#include "engine/stream_options.h"

namespace etude::engine {

// How a C field holds its StreamOptions field's value.
enum class CType : unsigned char {
    String,      // const char*; NULL: the default
    UnsetFloat,  // float; negative: unset (std::optional<float>)
    Double,
    Int,
    Uint64,
    Flag,        // int, nonzero: true
    Scheduling,  // etude_scheduling
};

// One field of a C options struct.
struct CField {
    const char* c_name;  // in engine/etude.h
    const char* option;  // the StreamOptions field it carries
    std::size_t offset;
    CType type;
};

// One C options struct: its fields, and the kind of voice it makes.
struct CStruct {
    std::span<const CField> fields;
    VoiceKind kind;
};

// Every field of each struct after struct_size, in order (c_stream_options.cpp
// checks at compile time that they tile the struct).
CStruct c_piper_options();
CStruct c_mel_options();

// The defaults of a C struct, as far as the caller's struct_size reaches:
// default_options(its kind)'s, with `sample_rate` (the kind's own default in C).
void fill_c_defaults(void* options, std::size_t struct_size, CStruct c, std::size_t full_size,
                     double sample_rate);
// The StreamOptions a C struct says: default_options(its kind), then every
// field the caller's struct_size reaches. Throws etude::Error for a
// scheduling value outside etude_scheduling.
StreamOptions read_c_options(const void* options, std::size_t struct_size, CStruct c);

}  // namespace etude::engine
