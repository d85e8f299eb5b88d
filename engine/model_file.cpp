// engine/model_file.h over LefFile (models/lef_file.h).
#include "engine/model_file.h"

#include "engine/models/lef_file.h"

namespace etude::engine {

ModelFileContents read_model_file(const std::string& path) {
    const auto file = LefFile::open(path);
    ModelFileContents contents{file.metadata_json(), {}};
    for (const auto& t : file.tensors())
        contents.tensors.push_back(
            {t.name, t.dtype == LefDtype::F32 ? "f32" : "f16", t.shape, t.elements()});
    return contents;
}

}  // namespace etude::engine
