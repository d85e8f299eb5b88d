// Invalid UTF-8 of every kind (support/bad_utf8_cases.h) through each way
// text enters a stream: Stream::push_text and push_ssml, and the C API's
// push functions. Each refuses it with the same words, naming what was
// wrong and where; tests/speechd/symbol_table_test.cpp holds the
// speech-dispatcher module to the same cases.
#include <gtest/gtest.h>

#include <string>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/etude.h"
#include "support/bad_utf8_cases.h"

using namespace etude::engine;
using etude::test::BadUtf8Case;
using etude::test::kBadUtf8Cases;

namespace {

std::string expected(std::string_view what, const BadUtf8Case& c) {
    return std::string(what) + " is not valid UTF-8 (" + std::string(c.where_and_what) + ")";
}

}  // namespace

TEST(BadUtf8Input, push_text_refuses_each_kind_with_what_and_where) {
    Engine engine;
    for (const BadUtf8Case& c : kBadUtf8Cases) {
        auto s = engine.create_stream();
        try {
            s->push_text(c.text);
            // A piece may end inside a character: the next may finish it.
            EXPECT_TRUE(c.ends_inside) << c.name << ": accepted";
            s->end_input();
            ADD_FAILURE() << c.name << ": accepted at end_input()";
        } catch (const etude::Error& e) {
            if (c.ends_inside)
                EXPECT_NE(std::string(e.what()).find("the text ends inside a UTF-8 character"),
                          std::string::npos)
                    << c.name << ": " << e.what();
            else
                EXPECT_EQ(e.what(), expected("text", c)) << c.name;
        }
        EXPECT_EQ(s->stats().sentences_queued, 0u) << c.name;
    }
}

TEST(BadUtf8Input, push_ssml_refuses_each_kind_with_what_and_where) {
    Engine engine;
    for (const BadUtf8Case& c : kBadUtf8Cases) {
        auto s = engine.create_stream();
        try {
            s->push_ssml(c.text);
            ADD_FAILURE() << c.name << ": accepted";
        } catch (const etude::Error& e) {
            EXPECT_EQ(e.what(), expected("SSML", c)) << c.name;
        }
    }
}

TEST(BadUtf8Input, the_c_api_refuses_each_kind_with_the_same_words) {
    etude_engine* engine = nullptr;
    ASSERT_EQ(etude_engine_create(&engine), ETUDE_OK) << etude_last_error();
    for (const BadUtf8Case& c : kBadUtf8Cases) {
        etude_stream* s = nullptr;
        ASSERT_EQ(etude_stream_create(engine, "slt", 16000.0, &s), ETUDE_OK);
        const auto length = static_cast<std::ptrdiff_t>(c.text.size());
        if (!c.ends_inside) {
            EXPECT_EQ(etude_stream_push_text(s, c.text.data(), length), ETUDE_ERROR_INVALID_TEXT)
                << c.name;
            EXPECT_EQ(etude_last_error(), expected("text", c)) << c.name;
        }
        EXPECT_EQ(etude_stream_push_ssml(s, c.text.data(), length), ETUDE_ERROR_INVALID_TEXT)
            << c.name;
        EXPECT_EQ(etude_last_error(), expected("SSML", c)) << c.name;
        etude_stream_destroy(s);
    }
    etude_engine_destroy(engine);
}
