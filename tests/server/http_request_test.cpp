// The HTTP front end's one parse of a request head: the request line, the
// headers in order, what makes a head malformed, and when the client asks
// to close. Expected values are written out by hand from RFC 9112.
#include "server/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using etude::server::HttpRequest;
using etude::server::parse_request_head;

TEST(HttpRequestHead, is_parsed_into_method_path_query_version_and_headers) {
    HttpRequest r;
    ASSERT_FALSE(
        parse_request_head("POST /v1/audio/speech?x=1&y HTTP/1.1\r\n"
                           "Host: example\r\n"
                           "content-type:application/json \r\n"
                           "X-Empty:\r\n"
                           "Host: second",
                           r));
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/v1/audio/speech");
    EXPECT_EQ(r.query, "x=1&y");
    EXPECT_EQ(r.minor_version, 1);
    ASSERT_EQ(r.headers.size(), 4u);
    EXPECT_EQ(r.headers[1].first, "content-type");
    EXPECT_EQ(r.headers[1].second, "application/json");  // white space around dropped
    ASSERT_TRUE(r.header("Content-Type"));               // names without case
    EXPECT_EQ(*r.header("HOST"), "example");             // the first of two
    EXPECT_EQ(*r.header("x-empty"), "");
    EXPECT_EQ(r.header("Authorization"), nullptr);
}

TEST(HttpRequestHead, a_malformed_head_gets_400_and_another_version_505) {
    const char* const bad[] = {
        "GET /v1/models",                          // no version
        "GET  /v1/models HTTP/1.1",                // two spaces
        "GET v1/models HTTP/1.1",                  // not a path
        "GET /v1/models HTTP/1.1 extra",           // a fourth part
        "G(T /v1/models HTTP/1.1",                 // a method that is no token
        "GET /v1/models HTTP/1.1\r\nNo colon",     // a header line without ':'
        "GET /v1/models HTTP/1.1\r\nBad name: x",  // white space in the name
        "GET /v1/models HTTP/1.1\r\n folded: x",   // obsolete line folding
        "GET /v1/models HTTP/1.1\r\nX: a\x01",     // a control character
        "GET /v1/mo\x7f HTTP/1.1",                 // one in the target
        "GET /v1/models FTP/1.1",
    };
    for (const char* head : bad) {
        HttpRequest r;
        const auto problem = parse_request_head(head, r);
        ASSERT_TRUE(problem) << head;
        EXPECT_EQ(problem->status, 400) << head;
        EXPECT_FALSE(problem->message.empty());
    }
    HttpRequest r;
    const auto problem = parse_request_head("GET /v1/models HTTP/2.0", r);
    ASSERT_TRUE(problem);
    EXPECT_EQ(problem->status, 505);
}

TEST(HttpRequestHead, the_client_asks_to_close_by_its_version_and_connection_header) {
    const auto closes = [](const std::string& head) {
        HttpRequest r;
        EXPECT_FALSE(parse_request_head(head, r)) << head;
        return r.wants_close();
    };
    EXPECT_FALSE(closes("GET / HTTP/1.1"));
    EXPECT_TRUE(closes("GET / HTTP/1.1\r\nConnection: close"));
    EXPECT_TRUE(closes("GET / HTTP/1.1\r\nConnection: Upgrade, Close"));
    EXPECT_TRUE(closes("GET / HTTP/1.0"));
    EXPECT_FALSE(closes("GET / HTTP/1.0\r\nConnection: keep-alive"));
}

}  // namespace
