// The reason in an nlohmann-json exception, for the one-line errors of the
// Piper JSON readers (voice_config.h, json_input.h): from "parse error" on
// for a parse_error (it says where the text stopped making sense), the text
// after the "[json.exception.out_of_range.406] " prefix for the others (a
// number past a double's range), else the whole message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace etude::piper {

inline std::string json_error_reason(const nlohmann::json::exception& e) {
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) return what.substr(p);
    if (auto q = what.find("] "); what.rfind("[json.exception", 0) == 0 && q != std::string::npos)
        return what.substr(q + 2);
    return what;
}

}  // namespace etude::piper
