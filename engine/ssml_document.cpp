#include "engine/ssml_document.h"

#include <expat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "engine/utf8.h"

namespace etude::engine {

namespace {

// A <break> longer than this is cut: a typo ("500s") must not silence the
// screen reader for minutes.
constexpr int kLongestBreakMs = 10000;

// Builds the piece list, merging neighbouring text.
class PieceList {
  public:
    void text(std::string_view t, const Prosody& prosody = {}) {
        if (t.empty()) return;
        if (pieces_.empty() || pieces_.back().kind != Piece::Kind::Text ||
            !(pieces_.back().prosody == prosody))
            pieces_.push_back({Piece::Kind::Text, {}, 0, prosody});
        pieces_.back().text += t;
    }
    void silence(int ms) {
        if (ms > 0) pieces_.push_back({Piece::Kind::Silence, {}, ms});
    }
    void mark(std::string name) { pieces_.push_back({Piece::Kind::Mark, std::move(name), 0}); }
    std::vector<Piece> take() { return std::move(pieces_); }

  private:
    std::vector<Piece> pieces_;
};

// SSML's time values: "250ms", "1.5s" (a bare number is milliseconds).
std::optional<int> parse_time(std::string_view value) {
    std::string s(value);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
    const std::string unit(end);
    double ms = v;
    if (unit == "s")
        ms = v * 1000.0;
    else if (unit != "ms" && !unit.empty())
        return std::nullopt;
    return static_cast<int>(std::min(ms, double(kLongestBreakMs)));
}

// The pause SSML's break strengths stand for; medium is also the default of
// a bare <break/>.
int strength_ms(std::string_view strength) {
    if (strength == "none") return 0;
    if (strength == "x-weak") return 100;
    if (strength == "weak") return 250;
    if (strength == "strong") return 750;
    if (strength == "x-strong") return 1000;
    return 500;
}

int break_ms(std::optional<std::string_view> time, std::optional<std::string_view> strength) {
    if (time)
        if (auto ms = parse_time(*time)) return *ms;
    return strength_ms(strength.value_or("medium"));
}

bool spells(std::string_view interpret_as) {
    return interpret_as == "characters" || interpret_as == "spell-out" || interpret_as == "letters";
}

// ---- expat ----------------------------------------------------------------

struct XmlState {
    PieceList out;
    // One entry per open element: whether its text is to be spelt, and the
    // text gathered for it.
    struct Open {
        bool spell = false;
        std::string spelt;
        Prosody prosody;  // in effect inside it
    };
    std::vector<Open> open;
};

std::optional<std::string_view> attribute(const XML_Char** attrs, const char* name) {
    for (int i = 0; attrs[i]; i += 2)
        if (!std::strcmp(attrs[i], name)) return std::string_view(attrs[i + 1]);
    return std::nullopt;
}

void on_start(void* data, const XML_Char* name, const XML_Char** attrs) {
    auto& st = *static_cast<XmlState*>(data);
    const std::string_view element(name);
    XmlState::Open open;
    const Prosody outer = st.open.empty() ? Prosody{} : st.open.back().prosody;
    open.prosody = outer;
    if (element == "prosody") {
        Prosody own;
        if (auto v = attribute(attrs, "rate")) own.rate = prosody_rate(*v).value_or(1.0f);
        if (auto v = attribute(attrs, "pitch")) own.pitch = prosody_pitch(*v).value_or(1.0f);
        if (auto v = attribute(attrs, "range")) own.range = prosody_range(*v).value_or(1.0f);
        if (auto v = attribute(attrs, "volume")) own.volume = prosody_volume(*v).value_or(1.0f);
        open.prosody = own.within(outer);
    } else if (element == "mark") {
        if (auto n = attribute(attrs, "name")) st.out.mark(std::string(*n));
    } else if (element == "break") {
        st.out.silence(break_ms(attribute(attrs, "time"), attribute(attrs, "strength")));
    } else if (element == "say-as") {
        open.spell = spells(attribute(attrs, "interpret-as").value_or(""));
    } else if (element == "p" || element == "s") {
        st.out.text(" ", outer);  // sentence and paragraph ends must not glue words together
    }
    st.open.push_back(std::move(open));
}

void on_end(void* data, const XML_Char*) {
    auto& st = *static_cast<XmlState*>(data);
    if (st.open.empty()) return;
    XmlState::Open closed = std::move(st.open.back());
    st.open.pop_back();
    if (!closed.spell) return;
    // Spaces around: the letters must not join the words beside them.
    std::string spelt(1, ' ');
    spelt += spell_out(closed.spelt);
    spelt += ' ';
    if (!st.open.empty() && st.open.back().spell)
        st.open.back().spelt += spelt;
    else
        st.out.text(spelt, closed.prosody);
}

void on_text(void* data, const XML_Char* s, int len) {
    auto& st = *static_cast<XmlState*>(data);
    const std::string_view text(s, static_cast<std::size_t>(len));
    if (st.open.empty())
        st.out.text(text);
    else if (st.open.back().spell)
        st.open.back().spelt += text;
    else
        st.out.text(text, st.open.back().prosody);
}

std::optional<std::vector<Piece>> parse_xml(std::string_view document) {
    std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(XML_ParserCreate("UTF-8"),
                                                                        &XML_ParserFree);
    if (!parser) return std::nullopt;
    XmlState state;
    XML_SetUserData(parser.get(), &state);
    XML_SetElementHandler(parser.get(), on_start, on_end);
    XML_SetCharacterDataHandler(parser.get(), on_text);
    // Fed in slices: XML_Parse takes an int length.
    constexpr std::size_t kSlice = 1 << 20;
    for (std::size_t at = 0;; at += kSlice) {
        const std::size_t n = std::min(kSlice, document.size() - std::min(at, document.size()));
        const bool last = at + n >= document.size();
        if (XML_Parse(parser.get(), document.data() + at, static_cast<int>(n), last) !=
            XML_STATUS_OK)
            return std::nullopt;
        if (last) break;
    }
    return state.out.take();
}

// ---- the lenient scanner --------------------------------------------------

// Decodes the predefined entities and numeric references; anything else,
// including a lone '&', is kept as written.
std::string decode_entities(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '&') {
            out += s[i];
            continue;
        }
        const std::size_t semi = s.find(';', i);
        if (semi == std::string_view::npos || semi - i > 10) {
            out += '&';
            continue;
        }
        const std::string_view name = s.substr(i + 1, semi - i - 1);
        std::optional<unsigned long> code;
        if (name == "lt")
            code = '<';
        else if (name == "gt")
            code = '>';
        else if (name == "amp")
            code = '&';
        else if (name == "quot")
            code = '"';
        else if (name == "apos")
            code = '\'';
        else if (name.size() > 1 && name[0] == '#') {
            const bool hex = name[1] == 'x' || name[1] == 'X';
            const std::string digits(name.substr(hex ? 2 : 1));
            char* end = nullptr;
            const unsigned long v = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
            // (The bound first: the cast to char32_t would wrap a larger v.)
            if (!digits.empty() && *end == '\0' && v > 0 && v <= 0x10FFFF &&
                utf8::is_scalar_value(static_cast<char32_t>(v)))
                code = v;
        }
        if (!code) {
            out += '&';
            continue;
        }
        utf8::append(out, static_cast<char32_t>(*code));
        i = semi;
    }
    return out;
}

// The value of attribute `name` inside a tag's text, quoted either way.
std::optional<std::string> tag_attribute(std::string_view tag, std::string_view name) {
    for (std::size_t at = tag.find(name); at != std::string_view::npos;
         at = tag.find(name, at + 1)) {
        // A whole attribute name: preceded by white space.
        if (at == 0 || !std::isspace(static_cast<unsigned char>(tag[at - 1]))) continue;
        std::size_t i = at + name.size();
        while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
        if (i >= tag.size() || tag[i] != '=') continue;
        ++i;
        while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
        if (i >= tag.size() || (tag[i] != '"' && tag[i] != '\'')) continue;
        const char quote = tag[i];
        const std::size_t end = tag.find(quote, i + 1);
        if (end == std::string_view::npos) return std::nullopt;
        return decode_entities(tag.substr(i + 1, end - i - 1));
    }
    return std::nullopt;
}

bool tag_is(std::string_view tag, std::string_view element) {
    return tag.substr(0, element.size()) == element &&
           (tag.size() == element.size() ||
            std::isspace(static_cast<unsigned char>(tag[element.size()])) ||
            tag[element.size()] == '/');
}

std::vector<Piece> scan_leniently(std::string_view s) {
    PieceList out;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t lt = s.find('<', i);
        out.text(decode_entities(s.substr(i, lt == std::string_view::npos ? lt : lt - i)));
        if (lt == std::string_view::npos) break;
        const std::size_t gt = s.find('>', lt);
        if (gt == std::string_view::npos) break;  // a tag cut off at the end: dropped
        const std::string_view tag = s.substr(lt + 1, gt - lt - 1);
        if (tag_is(tag, "mark")) {
            if (auto name = tag_attribute(tag, "name")) out.mark(*name);
        } else if (tag_is(tag, "break")) {
            const auto time = tag_attribute(tag, "time");
            const auto strength = tag_attribute(tag, "strength");
            out.silence(
                break_ms(time ? std::optional<std::string_view>(*time) : std::nullopt,
                         strength ? std::optional<std::string_view>(*strength) : std::nullopt));
        } else {
            out.text(" ");  // a dropped tag still separates words
        }
        i = gt + 1;
    }
    return out.take();
}

}  // namespace

std::vector<Piece> parse_message(std::string_view message) {
    if (auto pieces = parse_xml(message)) return std::move(*pieces);
    // A fragment (resumed text, SSML mode without a root) is often well
    // formed once it has one.
    std::string wrapped = "<speak>";
    wrapped += message;
    wrapped += "</speak>";
    if (auto pieces = parse_xml(wrapped)) return std::move(*pieces);
    return scan_leniently(message);
}

std::string spell_out(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        const auto lead = static_cast<unsigned char>(text[i]);
        const std::size_t len = utf8::decode_at(text, i).bytes;
        if (!std::isspace(lead)) {
            if (!out.empty()) out += ' ';
            out += text.substr(i, len);
        }
        i += len;
    }
    return out;
}

}  // namespace etude::engine
