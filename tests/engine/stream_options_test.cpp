// Stream options are defined once (engine/stream_options.h): the table of
// fields covers StreamOptions, names its members, and the C structs and the
// kind checks follow from it.
#include "engine/stream_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/c_stream_options.h"
#include "engine/engine.h"
#include "engine/etude.h"

using namespace etude::engine;

namespace {

struct Place {
    std::size_t offset, size, align;
};

Place place_of(const StreamOptions& o, const StreamOptionMember& member) {
    return std::visit(
        [&](auto m) {
            const auto& field = o.*m;
            return Place{static_cast<std::size_t>(reinterpret_cast<const char*>(&field) -
                                                  reinterpret_cast<const char*>(&o)),
                         sizeof field, alignof(std::remove_cvref_t<decltype(field)>)};
        },
        member);
}

constexpr std::size_t align_up(std::size_t n, std::size_t a) {
    return (n + a - 1) / a * a;
}

// The member names of struct StreamOptions as its header declares them.
std::vector<std::string> declared_members() {
    std::ifstream in(std::string(ETUDE_TEST_DATA) + "/../../engine/stream_options.h");
    std::stringstream text;
    text << in.rdbuf();
    const std::string all = text.str();
    const auto begin = all.find("struct StreamOptions {");
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

}  // namespace

TEST(StreamOptionsTable, covers_every_field_of_the_struct_in_order) {
    // Laid end to end as the compiler placed them, the fields leave no
    // gap: a field added to StreamOptions without its entry makes one.
    const StreamOptions o;
    std::size_t end = 0;
    for (const auto& f : stream_option_fields()) {
        const Place p = place_of(o, f.member);
        EXPECT_EQ(p.offset, align_up(end, p.align)) << f.name << " is not the field after the last";
        end = p.offset + p.size;
    }
    EXPECT_EQ(align_up(end, alignof(StreamOptions)), sizeof(StreamOptions))
        << "StreamOptions has fields after the table's last";
}

TEST(StreamOptionsTable, names_each_member_as_the_header_declares_it) {
    std::vector<std::string> table;
    for (const auto& f : stream_option_fields()) table.push_back(f.name);
    const std::vector<std::string> declared = declared_members();
    ASSERT_FALSE(declared.empty()) << "could not read engine/stream_options.h";
    EXPECT_EQ(table, declared);
}

TEST(StreamOptionsTable, an_unknown_name_is_an_error_listing_the_names) {
    EXPECT_STREQ(stream_option_field("seed").name, "seed");
    try {
        stream_option_field("sead");
        ADD_FAILURE() << "an unknown name was found";
    } catch (const etude::Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("unknown stream option 'sead'"), std::string::npos) << message;
        EXPECT_NE(message.find("noise_w, seed)"), std::string::npos) << message;
    }
}

TEST(StreamOptionsTable, an_option_of_another_kind_of_voice_is_refused_by_name) {
    const auto refusal = [](const StreamOptions& o) -> std::string {
        try {
            check_options_apply(o);
        } catch (const etude::Error& e) {
            return e.what();
        }
        return "";
    };
    StreamOptions builtin;
    builtin.seed = 3;
    EXPECT_EQ(refusal(builtin), "seed applies to Piper voices; 'slt' is a built-in voice");
    StreamOptions piper;
    piper.piper_voice = "v.onnx";
    piper.vocoder = "spectral";
    EXPECT_EQ(refusal(piper), "vocoder applies to built-in voices; 'v.onnx' is a Piper voice");
    StreamOptions mel;
    mel.model = "m.lef";
    mel.length_scale = 1.5f;
    EXPECT_EQ(refusal(mel),
              "length_scale applies to built-in and Piper voices; 'm.lef' is a mel "
              "stream");
    // At its default, an option of another kind is no request.
    piper.vocoder = "mlsa";
    piper.speaker = "0";
    piper.length_scale = 1.2f;
    piper.scheduling = SchedulingClass::Offline;
    EXPECT_EQ(refusal(piper), "");
    piper.model = "m.lef";
    EXPECT_NE(refusal(piper).find("not both"), std::string::npos);
}

TEST(StreamOptionsTable, create_stream_refuses_an_option_of_another_kind) {
    Engine engine;
    StreamOptions o;
    o.noise_w = 0.5f;
    EXPECT_THROW(engine.create_stream(o), etude::Error);
}

TEST(StreamOptionsTable, a_stream_nobody_hears_live_has_no_realtime_workers) {
    Engine engine;
    StreamOptions o;
    o.scheduling = SchedulingClass::Network;
    EXPECT_FALSE(engine.create_stream(o)->stats().realtime_workers);
}

TEST(CStreamOptions, each_c_field_carries_an_option_of_its_kind_and_type) {
    const auto check = [](std::span<const CField> fields, VoiceKind kind) {
        for (const CField& c : fields) {
            const StreamOptionField& f = stream_option_field(c.option);
            EXPECT_TRUE(f.kinds & static_cast<VoiceKinds>(kind)) << c.c_name;
            const bool same_type = std::visit(
                [&](auto m) {
                    using T = std::remove_cvref_t<decltype(StreamOptions{}.*m)>;
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
    check(c_fields_of_piper_options(), VoiceKind::Piper);
    check(c_fields_of_mel_options(), VoiceKind::Mel);
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
    const StreamOptions o = read_c_options(&p, p.struct_size, c_fields_of_piper_options());
    EXPECT_EQ(o.piper_voice, "v.onnx");
    EXPECT_EQ(o.seed, 9u);
    EXPECT_EQ(o.scheduling, SchedulingClass::Live);
    EXPECT_FALSE(o.noise_scale.has_value());
}

TEST(CStreamOptions, a_scheduling_outside_the_enum_is_an_error) {
    etude_mel_stream_options m;
    etude_mel_stream_options_init(&m, sizeof m);
    m.model_path = "m.lef";
    m.scheduling = static_cast<etude_scheduling>(7);
    EXPECT_THROW(read_c_options(&m, sizeof m, c_fields_of_mel_options()), etude::Error);
    m.scheduling = ETUDE_SCHEDULING_OFFLINE;
    EXPECT_EQ(read_c_options(&m, sizeof m, c_fields_of_mel_options()).scheduling,
              SchedulingClass::Offline);
}
