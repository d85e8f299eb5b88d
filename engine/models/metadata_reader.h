// A model's JSON metadata, read with checks: every accessor names the field
// (with its path, e.g. "hyperparameters.upsample_rates") and what was
// expected, and throws etude::Error prefixed with the file's label. Used by
// the model loaders of this folder; not a public interface.
#pragma once

#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/models/model_metadata.h"

namespace etude::engine {

class MetadataReader {
  public:
    using Json = nlohmann::json;

    MetadataReader(const std::string& text, std::string label) : label_(std::move(label)) {
        json_ = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!json_.is_object()) fail("metadata", "is not a JSON object");
    }
    const Json& root() const { return json_; }
    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw Error(label_ + ": " + field + " " + what);
    }
    const Json& at(const Json& obj, const char* key, const std::string& path) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(path + key, "is missing from the metadata");
        return *it;
    }
    int integer(const Json& obj, const char* key, int lo, int hi,
                const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_number_integer()) fail(path + key, "must be an integer");
        const auto x = v.get<long long>();
        if (x < lo || x > hi)
            fail(path + key, "is " + std::to_string(x) + ", expected " + std::to_string(lo) + ".." +
                                 std::to_string(hi));
        return static_cast<int>(x);
    }
    double number(const Json& obj, const char* key, const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_number()) fail(path + key, "must be a number");
        const double x = v.get<double>();
        if (!std::isfinite(x)) fail(path + key, "must be finite");
        return x;
    }
    std::string text(const Json& obj, const char* key, std::initializer_list<const char*> allowed,
                     const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_string()) fail(path + key, "must be a string");
        const auto s = v.get<std::string>();
        std::string list;
        for (const char* a : allowed) {
            if (s == a) return s;
            list += (list.empty() ? "" : ", ") + std::string(a);
        }
        fail(path + key, "is '" + s + "', expected one of: " + list);
    }
    std::vector<int> integers(const Json& obj, const char* key, int lo, int hi,
                              const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_array() || v.empty() || v.size() > 16)
            fail(path + key, "must be a list of 1..16 integers");
        std::vector<int> out;
        for (const auto& e : v) {
            if (!e.is_number_integer()) fail(path + key, "must hold integers only");
            const auto x = e.get<long long>();
            if (x < lo || x > hi)
                fail(path + key, "holds " + std::to_string(x) + ", expected " + std::to_string(lo) +
                                     ".." + std::to_string(hi));
            out.push_back(static_cast<int>(x));
        }
        return out;
    }

  private:
    Json json_;
    std::string label_;
};

// The fields every model has (architecture, rate, front end), checked.
ModelAudioParams read_audio_params(const MetadataReader& m);

}  // namespace etude::engine
