#include "server/http_request.h"

#include <cctype>

namespace etude::server {

namespace {

// RFC 9110, 5.6.2: the characters of a token (a method, a header name).
bool is_token(std::string_view s) {
    if (s.empty()) return false;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c)) continue;
        if (std::string_view("!#$%&'*+-.^_`|~").find(ch) == std::string_view::npos) return false;
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Whether a comma-separated header value holds `option` (Connection's).
bool lists(const std::string* value, std::string_view option) {
    if (!value) return false;
    std::string_view rest = *value;
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        if (equals_ignoring_case(trim(rest.substr(0, comma)), option)) return true;
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
    }
    return false;
}

}  // namespace

bool equals_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) !=
            std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

const std::string* HttpRequest::header(std::string_view name) const {
    for (const auto& [n, v] : headers)
        if (equals_ignoring_case(n, name)) return &v;
    return nullptr;
}

bool HttpRequest::wants_close() const {
    const std::string* connection = header("Connection");
    return minor_version == 0 ? !lists(connection, "keep-alive") : lists(connection, "close");
}

std::optional<HeadProblem> parse_request_head(std::string_view head, HttpRequest& out) {
    const auto line_end = head.find("\r\n");
    const std::string_view line = head.substr(0, line_end);
    // method SP request-target SP HTTP-version (RFC 9112, 3)
    const auto sp1 = line.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return HeadProblem{400, "the request line is not METHOD TARGET HTTP/1.1"};
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    if (!is_token(method)) return HeadProblem{400, "the request method is not a token"};
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return HeadProblem{version.substr(0, 5) == "HTTP/" ? 505 : 400,
                           "only HTTP/1.0 and HTTP/1.1 are spoken here"};
    if (target.empty() || target.front() != '/')
        return HeadProblem{400, "the request target is not a path"};
    for (const char ch : target)
        if (static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f)
            return HeadProblem{400, "the request target holds a control character"};
    out.method = method;
    const auto question = target.find('?');
    out.path = target.substr(0, question);
    out.query = question == std::string_view::npos ? "" : target.substr(question + 1);
    out.minor_version = version.back() - '0';
    out.headers.clear();
    std::size_t at = line_end == std::string_view::npos ? head.size() : line_end + 2;
    while (at < head.size()) {
        auto end = head.find("\r\n", at);
        if (end == std::string_view::npos) end = head.size();
        const std::string_view field = head.substr(at, end - at);
        at = end + 2;
        // field-name ":" OWS field-value OWS; no white space before the
        // colon, and no obsolete line folding (RFC 9112, 5).
        const auto colon = field.find(':');
        if (colon == std::string_view::npos || !is_token(field.substr(0, colon)))
            return HeadProblem{400, "a header line is not NAME: VALUE"};
        const std::string_view value = trim(field.substr(colon + 1));
        for (const char ch : value)
            if ((static_cast<unsigned char>(ch) < ' ' && ch != '\t') || ch == 0x7f)
                return HeadProblem{400, "a header value holds a control character"};
        out.headers.emplace_back(field.substr(0, colon), value);
    }
    return std::nullopt;
}

}  // namespace etude::server
