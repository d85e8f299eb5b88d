// engine/file_vocoder.h: a MelVocoderStream over the model on its device,
// remade on the CPU's copy of the model when the device fails.
#include "engine/file_vocoder.h"

#include "dsp/log_mel.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/model_metadata.h"
#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/fault_plan.h"
#include "gpu/registry.h"

namespace etude::engine {
namespace {

// The model on its device, or on the CPU when the device fails while the
// model is made.
std::shared_ptr<NeuralModel> load_model(const std::string& path, const std::string& backend_kind,
                                        int device, const FileVocoder::DeviceFailure& on_failure,
                                        std::string& where) {
    auto backend = open_model_backend(backend_kind, device, &where);
    const auto cpu = gpu::shared_cpu_backend();
    if (backend == cpu) return NeuralModel::load(path, backend);
    if (const auto fault = faults_for_stream("").device) backend->inject_fault(*fault);
    try {
        return NeuralModel::load(path, backend);
    } catch (const gpu::DeviceError& e) {
        on_failure(e.what(), true);
        where = "the CPU after a device failure";
        return NeuralModel::load(path, cpu);
    }
}

}  // namespace

struct FileVocoder::Impl {
    Impl(const std::string& path, const std::string& backend, int device, DeviceFailure failure)
        : model_path(path),
          on_failure(std::move(failure)),
          model(load_model(path, backend, device, on_failure, where)),
          stream(model),
          on_device(&model->backend() != gpu::shared_cpu_backend().get()),
          facts{model->audio().architecture, model->audio().sample_rate, model->audio().n_mels} {}

    // A step on the device, remade on the CPU's copy of the model if the
    // device fails (MelVocoderStream::set_model keeps the output exact).
    template <typename Step>
    std::vector<float> covered(Step step) {
        if (!on_device) return step();
        try {
            return step();
        } catch (const gpu::DeviceError& e) {
            on_failure(e.what(), false);
            stream.set_model(NeuralModel::load(model_path, gpu::shared_cpu_backend()));
            on_device = false;
            where += ", then the CPU after a device failure";
            return step();
        }
    }

    std::string model_path;
    DeviceFailure on_failure;
    std::string where;
    std::shared_ptr<NeuralModel> model;
    MelVocoderStream stream;
    bool on_device;
    VocoderModelFacts facts;
    std::vector<float> chunk;  // the frames of one push(), reused
};

FileVocoder::FileVocoder(const std::string& model_path, const std::string& backend, int device,
                         DeviceFailure on_failure)
    : impl_(std::make_unique<Impl>(model_path, backend, device, std::move(on_failure))) {}
FileVocoder::~FileVocoder() = default;

const VocoderModelFacts& FileVocoder::model() const {
    return impl_->facts;
}

const std::string& FileVocoder::where() const {
    return impl_->where;
}

std::vector<float> FileVocoder::push(std::span<const float> mel, int frames, int first, int count) {
    copy_mel_frames(mel, impl_->facts.n_mels, frames, first, count, impl_->chunk);
    impl_->stream.append(impl_->chunk, count);
    return impl_->covered([&] { return impl_->stream.drain(false); });
}

std::vector<float> FileVocoder::finish() {
    return impl_->covered([&] { return impl_->stream.finish(); });
}

std::vector<float> FileVocoder::log_mel(std::span<const float> audio, std::size_t& frames) const {
    dsp::LogMelAnalyzer analyzer(log_mel_config(impl_->model->audio()));
    return analyzer.analyze(audio, &frames);
}

}  // namespace etude::engine
