// Stream options are defined once (engine/stream_options.h): the table of
// fields covers StreamOptions and the options of each kind of voice, names
// their members, and the C structs and setting options by name follow from it.
#include "engine/stream_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/c_stream_options.h"
#include "engine/engine.h"
#include "engine/etude.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

struct Place {
    std::size_t offset, size, align;
    std::string name;
};

// The member of `place` in the struct S, or null.
template <class S, class T>
T S::*member_in(const StreamOptionPlace<T>& place) {
    if constexpr (std::is_same_v<S, StreamOptions>)
        return place.common;
    else if constexpr (std::is_same_v<S, BuiltinVoiceOptions>)
        return place.builtin;
    else if constexpr (std::is_same_v<S, PiperVoiceOptions>)
        return place.piper;
    else
        return place.mel;
}

template <class S>
std::size_t offset_in(const S& s, const void* field) {
    return static_cast<std::size_t>(reinterpret_cast<const char*>(field) -
                                    reinterpret_cast<const char*>(&s));
}

// Where the table's fields of S lie in an S, in the order they lie there.
template <class S>
std::vector<Place> places_in() {
    static const S s{};
    std::vector<Place> places;
    for (const auto& f : stream_option_fields())
        std::visit(
            [&](auto place) {
                if (const auto m = member_in<S>(place)) {
                    const auto& field = s.*m;
                    places.push_back({offset_in(s, &field), sizeof field,
                                      alignof(std::remove_cvref_t<decltype(field)>), f.name});
                }
            },
            f.member);
    std::sort(places.begin(), places.end(),
              [](const Place& a, const Place& b) { return a.offset < b.offset; });
    return places;
}

constexpr std::size_t align_up(std::size_t n, std::size_t a) {
    return (n + a - 1) / a * a;
}

// Laid end to end as the compiler placed them, the table's fields of S
// leave no gap from `begin` to the end of S: a field added to S without
// its entry makes one.
template <class S>
void expect_tiled(std::size_t begin, const char* struct_name) {
    std::size_t end = begin;
    for (const Place& p : places_in<S>()) {
        EXPECT_EQ(p.offset, align_up(end, p.align))
            << struct_name << "::" << p.name << " is not the field after the last";
        end = p.offset + p.size;
    }
    EXPECT_EQ(align_up(end, alignof(S)), sizeof(S))
        << struct_name << " has fields after the table's last";
}

template <class S>
std::vector<std::string> table_names() {
    std::vector<std::string> names;
    for (const Place& p : places_in<S>()) names.push_back(p.name);
    return names;
}

// The member names of `struct NAME` as engine/stream_options.h declares them.
std::vector<std::string> declared_members(const std::string& struct_name) {
    std::ifstream in(etude::test::test_data_dir() + "/../../engine/stream_options.h");
    std::stringstream text;
    text << in.rdbuf();
    const std::string all = text.str();
    const auto begin = all.find("struct " + struct_name + " {");
    if (begin == std::string::npos) return {};
    const auto end = all.find("\n};", begin);
    std::vector<std::string> names;
    const std::regex member(R"(^    [A-Za-z0-9_:<>]+ ([a-z_]+)( = [^;]*)?;)");
    std::istringstream lines(all.substr(begin, end - begin));
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, member)) names.push_back(m[1]);
    }
    return names;
}

std::string refusal(StreamOptions& o, const char* name, auto value) {
    try {
        set_option(o, stream_option_field(name), value);
    } catch (const etude::Error& e) {
        return e.what();
    }
    return "";
}

// An option one kind of voice reads is not a member of another's options.
template <class V>
constexpr bool has_seed = requires(V v) {
    v.seed;
};
template <class V>
constexpr bool has_vocoder = requires(V v) {
    v.vocoder;
};
template <class V>
constexpr bool has_length_scale = requires(V v) {
    v.length_scale;
};
static_assert(has_seed<PiperVoiceOptions> && !has_seed<BuiltinVoiceOptions> &&
              !has_seed<MelVoiceOptions> && !has_seed<StreamOptions>);
static_assert(has_vocoder<BuiltinVoiceOptions> && !has_vocoder<PiperVoiceOptions> &&
              !has_vocoder<StreamOptions>);
static_assert(has_length_scale<BuiltinVoiceOptions> && has_length_scale<PiperVoiceOptions> &&
              !has_length_scale<MelVoiceOptions> && !has_length_scale<StreamOptions>);

TEST(PiperScales, one_rule_a_pace_above_0_and_noises_of_0_or_more) {
    using etude::engine::piper_scale_unmet;
    EXPECT_EQ(piper_scale_unmet("length_scale", 1.0), nullptr);
    EXPECT_STREQ(piper_scale_unmet("length_scale", 0.0), "a finite number above 0");
    for (const char* noise : {"noise_scale", "noise_w"}) {
        EXPECT_EQ(piper_scale_unmet(noise, 0.0), nullptr) << noise;
        EXPECT_STREQ(piper_scale_unmet(noise, -0.1), "a finite number of 0 or more") << noise;
    }
    for (const char* field : {"length_scale", "noise_scale", "noise_w"}) {
        EXPECT_NE(piper_scale_unmet(field, std::numeric_limits<double>::infinity()), nullptr);
        EXPECT_NE(piper_scale_unmet(field, std::numeric_limits<double>::quiet_NaN()), nullptr);
    }
}

}  // namespace

TEST(StreamOptionsTable, covers_every_field_of_the_structs) {
    const StreamOptions o;
    // StreamOptions' own fields follow its voice, which the table reaches
    // into rather than lists.
    expect_tiled<StreamOptions>(offset_in(o, &o.voice) + sizeof o.voice, "StreamOptions");
    expect_tiled<BuiltinVoiceOptions>(0, "BuiltinVoiceOptions");
    expect_tiled<PiperVoiceOptions>(0, "PiperVoiceOptions");
    expect_tiled<MelVoiceOptions>(0, "MelVoiceOptions");
}

TEST(StreamOptionsTable, names_each_member_as_the_header_declares_it) {
    std::vector<std::string> common = declared_members("StreamOptions");
    ASSERT_FALSE(common.empty()) << "could not read engine/stream_options.h";
    EXPECT_EQ(common.front(), "voice");
    common.erase(common.begin());
    EXPECT_EQ(table_names<StreamOptions>(), common);
    EXPECT_EQ(table_names<BuiltinVoiceOptions>(), declared_members("BuiltinVoiceOptions"));
    EXPECT_EQ(table_names<PiperVoiceOptions>(), declared_members("PiperVoiceOptions"));
    EXPECT_EQ(table_names<MelVoiceOptions>(), declared_members("MelVoiceOptions"));
}

TEST(StreamOptionsTable, each_kind_is_the_alternative_of_its_voice) {
    EXPECT_EQ(voice_kind(StreamOptions{}), VoiceKind::Builtin);
    EXPECT_EQ(voice_kind(default_options(VoiceKind::Piper)), VoiceKind::Piper);
    EXPECT_EQ(voice_kind(default_options(VoiceKind::Mel)), VoiceKind::Mel);
    EXPECT_EQ(voice_name(StreamOptions{}), "slt");
    EXPECT_EQ(voice_name({.voice = MelVoiceOptions{.model = "m.lef"}}), "m.lef");
    for (const auto& f : stream_option_fields())
        EXPECT_EQ(f.names_the_voice, std::string_view(f.name) == "voice" ||
                                         std::string_view(f.name) == "piper_voice" ||
                                         std::string_view(f.name) == "model")
            << f.name;
}

TEST(StreamOptionsTable, an_unknown_name_is_an_error_listing_the_names) {
    EXPECT_STREQ(stream_option_field("seed").name, "seed");
    try {
        stream_option_field("sead");
        ADD_FAILURE() << "an unknown name was found";
    } catch (const etude::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("unknown stream option 'sead'"), std::string::npos) << message;
        EXPECT_NE(message.find("cpu_model, allow_phase_fallback)"), std::string::npos) << message;
    }
}

TEST(StreamOptionsTable, an_option_set_by_name_on_another_kind_of_voice_is_refused) {
    StreamOptions builtin;
    EXPECT_EQ(refusal(builtin, "seed", std::uint64_t{3}),
              "seed applies to Piper voices; 'slt' is a built-in voice");
    StreamOptions piper{.voice = PiperVoiceOptions{.piper_voice = "v.onnx"}};
    EXPECT_EQ(refusal(piper, "vocoder", std::string("spectral")),
              "vocoder applies to built-in voices; 'v.onnx' is a Piper voice");
    StreamOptions mel{.voice = MelVoiceOptions{.model = "m.lef"}};
    EXPECT_EQ(refusal(mel, "length_scale", std::optional<float>(1.5f)),
              "length_scale applies to built-in and Piper voices; 'm.lef' is a mel stream");
    // Naming the voice of another kind does not change the kind.
    EXPECT_EQ(refusal(piper, "model", std::string("m.lef")),
              "model applies to mel streams; 'v.onnx' is a Piper voice");
    // At its default, an option of another kind is no request.
    EXPECT_EQ(refusal(piper, "vocoder", std::string("mlsa")), "");
    // The options of the kind are set.
    EXPECT_EQ(refusal(piper, "speaker", std::string("0")), "");
    EXPECT_EQ(refusal(piper, "length_scale", std::optional<float>(1.2f)), "");
    EXPECT_EQ(refusal(piper, "scheduling", SchedulingClass::Offline), "");
    const auto& p = std::get<PiperVoiceOptions>(piper.voice);
    EXPECT_EQ(p.speaker, "0");
    EXPECT_EQ(p.length_scale, 1.2f);
    EXPECT_EQ(piper.scheduling, SchedulingClass::Offline);
    EXPECT_EQ(refusal(builtin, "length_scale", std::optional<float>(2.0f)), "");
    EXPECT_EQ(std::get<BuiltinVoiceOptions>(builtin.voice).length_scale, 2.0f);
}

TEST(StreamOptionsTable, create_stream_refuses_a_piper_or_mel_stream_without_its_voice) {
    Engine engine;
    const auto message = [&](const StreamOptions& o) -> std::string {
        try {
            engine.create_stream(o);
        } catch (const etude::Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    EXPECT_EQ(message(default_options(VoiceKind::Piper)),
              "a Piper stream needs its voice (piper_voice)");
    EXPECT_EQ(message(default_options(VoiceKind::Mel)), "a mel stream needs its model");
}

TEST(StreamOptionsTable, a_stream_nobody_hears_live_has_no_realtime_workers) {
    Engine engine;
    StreamOptions o;
    o.scheduling = SchedulingClass::Network;
    EXPECT_FALSE(engine.create_stream(o)->stats().realtime_workers);
}

TEST(CStreamOptions, each_c_field_carries_an_option_of_its_kind_and_type) {
    const auto check = [](CStruct c_struct) {
        for (const CField& c : c_struct.fields) {
            const StreamOptionField& f = stream_option_field(c.option);
            EXPECT_TRUE(f.kinds & static_cast<VoiceKinds>(c_struct.kind)) << c.c_name;
            const bool same_type = std::visit(
                [&](auto place) {
                    using T = typename decltype(place)::type;
                    switch (c.type) {
                        case CType::String:
                            return std::is_same_v<T, std::string>;
                        case CType::UnsetFloat:
                            return std::is_same_v<T, std::optional<float>>;
                        case CType::Double:
                            return std::is_same_v<T, double>;
                        case CType::Int:
                            return std::is_same_v<T, int>;
                        case CType::Uint64:
                            return std::is_same_v<T, std::uint64_t>;
                        case CType::Flag:
                            return std::is_same_v<T, bool>;
                        case CType::Scheduling:
                            return std::is_same_v<T, SchedulingClass>;
                    }
                    return false;
                },
                f.member);
            EXPECT_TRUE(same_type) << c.c_name << " does not hold " << c.option << "'s type";
        }
    };
    check(c_piper_options());
    check(c_mel_options());
    EXPECT_EQ(c_piper_options().kind, VoiceKind::Piper);
    EXPECT_EQ(c_mel_options().kind, VoiceKind::Mel);
}

TEST(CStreamOptions, the_init_functions_give_the_documented_defaults) {
    // As engine/etude.h documents them.
    etude_piper_stream_options p;
    etude_piper_stream_options_init(&p, sizeof p);
    EXPECT_EQ(p.struct_size, sizeof p);
    EXPECT_EQ(p.voice, nullptr);
    EXPECT_EQ(p.speaker, nullptr);
    EXPECT_EQ(p.noise_scale, -1.0f);
    EXPECT_EQ(p.length_scale, -1.0f);
    EXPECT_EQ(p.noise_w, -1.0f);
    EXPECT_EQ(p.seed, 0u);
    EXPECT_STREQ(p.backend, "auto");
    EXPECT_EQ(p.device, -1);
    EXPECT_EQ(p.sample_rate, 0.0);
    EXPECT_EQ(p.latency_ms, 100.0);
    EXPECT_EQ(p.scheduling, ETUDE_SCHEDULING_LIVE);
    etude_mel_stream_options m;
    etude_mel_stream_options_init(&m, sizeof m);
    EXPECT_EQ(m.model_path, nullptr);
    EXPECT_STREQ(m.backend, "auto");
    EXPECT_EQ(m.device, -1);
    EXPECT_EQ(m.cpu_model_path, nullptr);
    EXPECT_EQ(m.allow_phase_fallback, 1);
    EXPECT_EQ(m.sample_rate, 48000.0);
    EXPECT_EQ(m.scheduling, ETUDE_SCHEDULING_LIVE);
}

TEST(CStreamOptions, a_struct_from_before_the_scheduling_field_reads_as_live) {
    etude_piper_stream_options p;
    std::memset(&p, 0x5A, sizeof p);
    const std::size_t older = offsetof(etude_piper_stream_options, scheduling);
    etude_piper_stream_options_init(&p, older);
    EXPECT_EQ(p.struct_size, older);
    int untouched;
    std::memset(&untouched, 0x5A, sizeof untouched);
    EXPECT_EQ(static_cast<int>(p.scheduling), untouched) << "written past the caller's struct";
    p.voice = "v.onnx";
    p.seed = 9;
    const StreamOptions o = read_c_options(&p, p.struct_size, c_piper_options());
    const auto& piper = std::get<PiperVoiceOptions>(o.voice);
    EXPECT_EQ(piper.piper_voice, "v.onnx");
    EXPECT_EQ(piper.seed, 9u);
    EXPECT_EQ(o.scheduling, SchedulingClass::Live);
    EXPECT_FALSE(piper.noise_scale.has_value());
}

TEST(CStreamOptions, a_scheduling_outside_the_enum_is_an_error) {
    etude_mel_stream_options m;
    etude_mel_stream_options_init(&m, sizeof m);
    m.model_path = "m.lef";
    m.scheduling = static_cast<etude_scheduling>(7);
    EXPECT_THROW(read_c_options(&m, sizeof m, c_mel_options()), etude::Error);
    m.scheduling = ETUDE_SCHEDULING_OFFLINE;
    EXPECT_EQ(read_c_options(&m, sizeof m, c_mel_options()).scheduling, SchedulingClass::Offline);
}
