// etude serve: the engine as a network service (Wyoming for Home Assistant).
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/voice_options.h"
#include "engine/devices.h"
#include "engine/piper_files.h"
#include "server/event_loop.h"
#include "server/http_server.h"
#include "server/speech_job.h"
#include "server/wyoming_server.h"
#include "server/zeroconf_advertiser.h"

namespace etude::cli {
namespace {

// The most syntheses admitted at once when the measured capacity is larger
// (a built-in voice measures well over 100 streams): each stream has threads
// of its own, and --max-syntheses raises it. As many as the engine measures
// started together (64), so the first audio promised covers every one.
constexpr std::size_t kMostSynthesesByDefault = engine::Engine::kMostStartedTogether;

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) {
    g_stop.store(true);
}

std::size_t count_option(const CommandLine& args, const std::string& name, std::size_t fallback,
                         double low, double high) {
    const auto v = args.value(name);
    if (!v) return fallback;
    const double x = parse_number(name, *v);
    if (x < low || x > high || x != static_cast<double>(static_cast<std::size_t>(x)))
        throw UsageError(name + " must be a whole number from " + std::to_string(int(low)) +
                         " to " + std::to_string(static_cast<long long>(high)));
    return static_cast<std::size_t>(x);
}

std::chrono::milliseconds seconds_option(const CommandLine& args, const std::string& name,
                                         std::chrono::milliseconds fallback) {
    const auto v = args.value(name);
    if (!v) return fallback;
    const double s = parse_number(name, *v);
    if (!(s > 0 && s <= 86400)) throw UsageError(name + " must be from 0 to 86400 seconds");
    return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

server::ServerLimits read_limits(const CommandLine& args) {
    server::ServerLimits limits;
    limits.max_syntheses = count_option(args, "--max-syntheses", limits.max_syntheses, 1, 1024);
    limits.max_waiting = count_option(args, "--max-waiting", limits.max_waiting, 0, 100000);
    limits.max_connections =
        count_option(args, "--max-connections", limits.max_connections, 1, 100000);
    // From one address, half of all by default: no one host can take every place.
    limits.max_connections_per_address =
        count_option(args, "--max-connections-per-address",
                     std::max<std::size_t>(1, limits.max_connections / 2), 1, 100000);
    limits.max_text_bytes = count_option(args, "--max-text", limits.max_text_bytes, 1, 1e8);
    limits.idle_timeout = seconds_option(args, "--idle-timeout", limits.idle_timeout);
    limits.queue_timeout = seconds_option(args, "--queue-timeout", limits.queue_timeout);
    limits.write_timeout = seconds_option(args, "--write-timeout", limits.write_timeout);
    limits.header_timeout = seconds_option(args, "--header-timeout", limits.header_timeout);
    limits.body_timeout = seconds_option(args, "--body-timeout", limits.body_timeout);
    return limits;
}

std::vector<server::Endpoint> read_wyoming_endpoints(const std::vector<std::string>& wyoming,
                                                     std::size_t listeners) {
    std::vector<server::Endpoint> endpoints;
    for (const auto& uri : wyoming) {
        try {
            endpoints.push_back(server::parse_endpoint(uri));
        } catch (const Error& e) {
            throw UsageError(e.what());
        }
        if (endpoints.back().kind == server::Endpoint::Kind::Stdio && listeners > 1)
            throw UsageError("stdio:// serves one client and cannot be combined with others");
    }
    return endpoints;
}

// Where the Piper voices' decoders run (the built-in voices' MLSA vocoder
// is the CPU's): checked now, so a device that does not exist stops the
// server before it listens.
BackendChoice read_backend(const CommandLine& args) {
    const BackendChoice choice = parse_backend_options(args);
    if (choice.backend != "auto" || choice.device >= 0) {
        try {
            engine::resolve_device(
                engine::with_device_environment({choice.backend, choice.device}));
        } catch (const std::invalid_argument& e) {
            throw Error(e.what());
        }
    }
    return choice;
}

// A scale option of every Piper voice served (wyoming-piper's names) for
// the engine's `field`, or unset; UsageError where the engine's rule for
// that scale (engine::piper_scale_unmet) refuses it.
std::optional<float> piper_scale(const CommandLine& args, const char* name, const char* field) {
    const auto v = args.value(name);
    if (!v) return std::nullopt;
    const double x = parse_number(name, *v);
    if (const char* must_be = engine::piper_scale_unmet(field, x))
        throw UsageError(std::string(name) + " must be " + must_be + ", not '" + *v + "'");
    return static_cast<float>(x);
}

// --data-dir DIR (wyoming-piper's name): voice folders searched before
// those ETUDE_VOICE_PATH names, in the order given. One that does not exist
// is passed over, as wyoming-piper passes it over (Home Assistant's add-on
// names /share/piper whether or not it was made), with a note in `notes`.
// The engine reads the folders from the environment; this runs before any
// thread starts.
// --download-dir DIR (wyoming-piper's folder for the voices it downloads)
// is searched after them, as wyoming-piper looks for voices there too; this
// server downloads nothing.
void add_voice_folders(const CommandLine& args, std::vector<std::string>& notes) {
    VoiceFolders folders;
    for (const auto& f : args.values("--data-dir")) folders.emplace_back("--data-dir", f);
    for (const auto& f : args.values("--download-dir")) folders.emplace_back("--download-dir", f);
    search_voice_folders_first(folders, notes);
}

// wyoming-piper's options of how it speaks: --samples-per-chunk,
// --no-streaming. Its options for what this server does not do are taken
// (a deployment written for it starts) with a note: --update-voices (no
// voice list is downloaded), --debug (every request is logged anyway).
server::WyomingOptions read_wyoming_options(const CommandLine& args,
                                            std::vector<std::string>& notes) {
    server::WyomingOptions o;
    o.samples_per_chunk =
        count_option(args, "--samples-per-chunk", o.samples_per_chunk, 1, 1 << 20);
    o.streaming = !args.flag("--no-streaming");
    if (args.flag("--update-voices"))
        notes.push_back("--update-voices: no voice list to update; voices are never downloaded");
    if (args.flag("--debug"))
        notes.push_back("--debug: each request is logged in any case (-q turns that off)");
    return o;
}

// --auto-punctuation CHARS (default wyoming-piper's).
server::EndPunctuation read_end_punctuation(const CommandLine& args) {
    try {
        return server::EndPunctuation(
            args.value_or("--auto-punctuation", std::string(server::kDefaultEndPunctuation)));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--auto-punctuation: ") + e.what());
    }
}

// --speaker names a speaker of the default voice: by name, or by id. A
// voice of one speaker speaks as itself whatever it says, as it does for a
// request's speaker (Home Assistant's Piper add-on passes 0 to every voice).
void check_default_speaker(const server::VoiceEntry& voice, const std::string& speaker) {
    if (!voice.speakers.empty() && !voice.has_speaker(speaker))
        throw UsageError("--speaker: the default voice '" + voice.name + "' has no speaker '" +
                         speaker + "' (" + std::to_string(voice.speakers.size()) + " speakers)");
}

// The voices served: each --voice (the first is the default), the built-in
// ones, then the Piper voices in the voice folders, each checked by reading
// it. A folder's voice that fails is skipped, not fatal: why is added to
// `notes`, with each --data-dir that does not exist. Every Piper voice takes the scales and the
// sentence silence given here, and the default voice the --speaker, as wyoming-piper's do; a
// request's own speaker comes first.
server::VoiceCatalog gather_voices(const CommandLine& args, const BackendChoice& backend,
                                   std::vector<std::string>& notes) {
    add_voice_folders(args, notes);
    server::VoiceCatalog voices;
    const auto noise_scale = piper_scale(args, "--noise-scale", "noise_scale");
    const auto length_scale = piper_scale(args, "--length-scale", "length_scale");
    const auto noise_w = piper_scale(args, "--noise-w", "noise_w");
    const double sentence_silence_ms = sentence_silence_option(args);
    const auto speaker = args.value("--speaker");
    const auto add_voice = [&](server::VoiceEntry v) {
        v.options.backend = backend.backend;
        v.options.device = backend.device;
        if (auto* p = std::get_if<engine::PiperVoiceOptions>(&v.options.voice)) {
            p->noise_scale = noise_scale;
            p->noise_w = noise_w;
            p->sentence_silence_ms = sentence_silence_ms;
            if (length_scale) {
                p->length_scale = length_scale;
                v.length_scale = *length_scale;  // the pace of HTTP's speed 1.0
            }
            if (speaker && voices.voices().empty()) {
                check_default_speaker(v, *speaker);
                if (!v.speakers.empty()) p->speaker = *speaker;
            }
        }
        voices.add(std::move(v));
    };
    const auto builtin = server::VoiceCatalog::builtin();
    for (const auto& v : args.values("--voice")) {
        if (voices.by_name(v)) continue;
        if (const auto* b = builtin.by_name(v))
            add_voice(*b);
        else
            add_voice(server::VoiceCatalog::piper_voice(v));
    }
    for (const auto& v : builtin.voices())
        if (!voices.by_name(v.name)) add_voice(v);
    for (const auto& files : engine::summarize_piper_voices()) {
        if (voices.by_name(files.name) || !files.model_present) continue;
        try {
            engine::Engine::describe_voice(files.model_path);
            add_voice(server::VoiceCatalog::piper_voice(files.model_path));
        } catch (const std::exception& e) {
            notes.push_back("skipping a voice in the voice folders: " + std::string(e.what()));
        }
    }
    return voices;
}

// What the server says of its admission at start: the capacity line and
// the first audio promised.
struct AdmissionLines {
    std::string capacity, promise;
};

// The capacity line: what was measured and what is admitted. On a device:
// its fitted batch cost and what it carries, beside what the host's text
// analysis carries; the smaller is admitted.
std::string capacity_line(const engine::EngineCapacity& c, const std::string& voice,
                          const server::ServerLimits& limits, bool asked) {
    const char* why = asked                              ? " (--max-syntheses)"
                      : c.streams > limits.max_syntheses ? " (the most by default)"
                                                         : "";
    char line[640];
    if (!c.device.empty()) {
        char timed[96];
        if (c.largest_batch_timed > 1)
            std::snprintf(timed, sizeof timed,
                          "fitted from batches of 1-%d streams' %d-frame chunks and flow pushes",
                          c.largest_batch_timed, c.chunk_frames);
        else
            std::snprintf(timed, sizeof timed,
                          "one stream's %d-frame chunk alone, too slow to "
                          "time more",
                          c.chunk_frames);
        std::snprintf(line, sizeof line,
                      "capacity %zu real-time streams with %s: the device %s carries %zu (%.3f ms "
                      "a launch + %.0f ns a frame, %s; batches of %d planned), the host's text "
                      "analysis %zu (%.1fx real time, %d threads at once); the smaller, a fifth "
                      "kept free, at least 1: %zu syntheses at once%s, %zu more may wait",
                      c.streams, voice.c_str(), c.device.c_str(), c.device_streams,
                      static_cast<double>(c.launch_ns) * 1e-6, c.frame_ns, timed, c.batch_streams,
                      c.host_streams, c.host_speed, c.streams_measured, limits.max_syntheses, why,
                      limits.max_waiting);
        return line;
    }
    // A device that failed is said last: scripts read the line's start.
    std::snprintf(line, sizeof line,
                  "capacity %zu real-time streams with %s (it speaks %.1fx real time on this "
                  "machine, %d streams at once; a fifth kept free): %zu syntheses at once%s, %zu "
                  "more may wait%s%s",
                  c.streams, voice.c_str(), c.speed, c.streams_measured, limits.max_syntheses, why,
                  limits.max_waiting,
                  c.device_error.empty() ? ""
                                         : "; the device failed its measurement, the CPU's "
                                           "figure is used: ",
                  c.device_error.c_str());
    return line;
}

// How many real-time streams this machine holds with the default voice:
// that many run at once unless --max-syntheses says otherwise (`limits` is
// set). Then the promise: how soon each of that many is heard when all
// start together.
AdmissionLines measure_admission(const CommandLine& args, engine::Engine& engine,
                                 const server::VoiceCatalog& voices, server::ServerLimits& limits) {
    AdmissionLines lines;
    try {
        const auto& voice = voices.default_voice();
        const engine::StreamOptions options = server::network_stream_options(voice.options);
        const engine::EngineCapacity c = engine.measure_capacity(options);
        if (!args.value("--max-syntheses"))
            limits.max_syntheses = std::min(c.streams, kMostSynthesesByDefault);
        lines.capacity =
            capacity_line(c, voice.name, limits, args.value("--max-syntheses").has_value());
        char line[256];
        const int together = static_cast<int>(
            std::min<std::size_t>(limits.max_syntheses, engine::Engine::kMostStartedTogether));
        const engine::FirstAudioMeasure f = engine.measure_first_audio(options, together);
        std::snprintf(line, sizeof line,
                      "first audio within %.0f ms when %d syntheses start together (median %.0f "
                      "ms, measured with %s)%s",
                      f.last_ms, f.streams, f.median_ms, voice.name.c_str(),
                      static_cast<std::size_t>(together) < limits.max_syntheses
                          ? "; more at once were not measured"
                          : "");
        lines.promise = line;
    } catch (const std::exception& e) {
        if (lines.capacity.empty())
            lines.capacity = "capacity not measured (" + std::string(e.what()) +
                             "): " + std::to_string(limits.max_syntheses) + " syntheses at once";
        else
            lines.promise = "first audio not measured (" + std::string(e.what()) + ")";
    }
    return lines;
}

// A file, never the key itself: a command line and an environment are
// readable by other users of the machine through /proc.
std::string read_api_key_option(const CommandLine& args, bool serves_http) {
    std::string api_key;
    const char* key_env = std::getenv("ETUDE_API_KEY_FILE");
    if (auto path = args.value("--api-key-file"))
        api_key = server::read_api_key(*path);
    else if (key_env && *key_env)
        api_key = server::read_api_key(key_env);
    if (args.value("--api-key-file") && !serves_http)
        throw UsageError("--api-key-file guards --http; give an --http address");
    return api_key;
}

std::vector<std::unique_ptr<server::HttpServer>> start_http(const server::ServerContext& context,
                                                            const std::vector<std::string>& http,
                                                            const std::string& api_key) {
    std::vector<std::unique_ptr<server::HttpServer>> http_servers;
    for (const auto& hp : http) {
        try {
            http_servers.push_back(std::make_unique<server::HttpServer>(context, hp, api_key));
        } catch (const Error& e) {
            if (std::string(e.what()).find("not HOST:PORT") != std::string::npos)
                throw UsageError(e.what());
            throw;
        }
    }
    return http_servers;
}

// --zeroconf: advertises the first tcp:// Wyoming listener's bound port
// (also for port 0); nullptr when not asked for.
std::unique_ptr<server::ZeroconfAdvertiser> start_zeroconf(
    const CommandLine& args, const std::vector<server::Endpoint>& endpoints,
    const std::vector<std::unique_ptr<server::WyomingServer>>& servers) {
    if (!args.flag("--zeroconf") && !args.value("--zeroconf-name")) return nullptr;
    int port = -1;
    for (std::size_t i = 0; i < endpoints.size() && port < 0; ++i)
        if (endpoints[i].kind == server::Endpoint::Kind::Tcp) {
            const auto address = servers[i]->address();
            port = std::stoi(address.substr(address.rfind(':') + 1));
        }
    if (port < 0) throw UsageError("--zeroconf advertises a --wyoming tcp:// address; give one");
    // Not the request log: discovery problems are said even with --quiet.
    return std::make_unique<server::ZeroconfAdvertiser>(
        args.value_or("--zeroconf-name", ""), port,
        [](const std::string& line) { std::fprintf(stderr, "etude serve: %s\n", line.c_str()); });
}

engine::Engine::Options engine_options_for(const server::VoiceCatalog& voices,
                                           const BackendChoice& backend) {
    engine::Engine::Options options;
    options.preload_backend = backend.backend;
    options.preload_device = backend.device;
    options.preload_voices.clear();
    for (const auto& v : voices.voices())
        options.preload_voices.push_back(engine::voice_name(v.options));
    return options;
}

int run_serve(const CommandLine& args) {
    // One malloc arena, unless MALLOC_ARENA_MAX says otherwise, set before
    // any thread starts: glibc's default of one per thread that allocates
    // (up to 8 per core) spread a burst's freed memory over heaps that
    // malloc_trim does not fully shrink (docs/benchmarks.md, "Memory").
    if (!std::getenv("MALLOC_ARENA_MAX")) ::mallopt(M_ARENA_MAX, 1);
    const auto wyoming = args.values("--wyoming");
    const auto http = args.values("--http");
    if (wyoming.empty() && http.empty())
        throw UsageError("nothing to serve: give --wyoming URI and/or --http HOST:PORT");
    server::ServerLimits limits = read_limits(args);
    // Each connection is a descriptor; the usual soft limit (1024) would
    // stop a server short of a thousand clients. Said after the listening
    // lines, which scripts read first.
    const std::string file_limit =
        server::raise_open_file_limit(limits.max_connections * (wyoming.size() + http.size()));
    const auto endpoints = read_wyoming_endpoints(wyoming, wyoming.size() + http.size());
    const BackendChoice backend = read_backend(args);
    const server::EndPunctuation end_punctuation = read_end_punctuation(args);
    // Skipped voices are said after the listening lines, which scripts read first.
    std::vector<std::string> notes;
    const server::VoiceCatalog voices = gather_voices(args, backend, notes);
    engine::Engine::Options engine_options = engine_options_for(voices, backend);
    engine_options.device_precision = parse_precision_option(args);
    engine::Engine engine(engine_options);
    const AdmissionLines admission = measure_admission(args, engine, voices, limits);

    server::SynthesisSlots slots(limits.max_syntheses, limits.max_waiting);
    server::RequestLog log(!args.flag("-q") && !args.flag("--quiet"));
    const server::ServerContext context{
        engine, voices, slots, limits, log, end_punctuation, read_wyoming_options(args, notes)};
    std::vector<std::unique_ptr<server::WyomingServer>> servers;
    for (const auto& e : endpoints)
        servers.push_back(std::make_unique<server::WyomingServer>(context, e));
    const std::string api_key = read_api_key_option(args, !http.empty());
    const auto http_servers = start_http(context, http, api_key);
    const auto zeroconf = start_zeroconf(args, endpoints, servers);

    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGPIPE, SIG_IGN);
    for (const auto& s : servers)
        std::fprintf(stderr, "etude serve: wyoming on %s (%zu voices, %zu syntheses at once)\n",
                     s->address().c_str(), voices.voices().size(), limits.max_syntheses);
    for (const auto& s : http_servers)
        std::fprintf(stderr,
                     "etude serve: http on %s (POST /v1/audio/speech, GET /v1/models, GET "
                     "/v1/audio/voices%s)\n",
                     s->address().c_str(), api_key.empty() ? "" : "; API key required");
    std::fprintf(stderr, "etude serve: %s\n", admission.capacity.c_str());
    if (!admission.promise.empty())
        std::fprintf(stderr, "etude serve: %s\n", admission.promise.c_str());
    if (!file_limit.empty()) std::fprintf(stderr, "etude serve: %s\n", file_limit.c_str());
    for (const auto& note : notes) std::fprintf(stderr, "etude serve: %s\n", note.c_str());
    std::fflush(stderr);

    std::vector<std::thread> threads;
    for (auto& s : servers) threads.emplace_back([&s] { s->run(g_stop); });
    for (auto& s : http_servers) threads.emplace_back([&s] { s->run(g_stop); });
    for (auto& t : threads) t.join();
    return 0;
}

}  // namespace

int serve_command(int argc, char** argv) {
    return run_command("serve", [&] {
        CommandLine args(
            "etude serve [--wyoming URI] [--http HOST:PORT] [options]",
            "Serves speech to voice assistants: the Wyoming protocol (Home Assistant's) and\n"
            "an OpenAI-style HTTP endpoint. One process, one shared engine, each request its\n"
            "own stream. Audio goes out as it is made, also inside a sentence: Wyoming's as\n"
            "16-bit mono PCM at the voice's rate; HTTP's as mp3 (the default), opus, aac or\n"
            "pcm at 24 kHz, or wav or flac at the voice's rate. Streamed text\n"
            "(synthesize-start/-chunk/-stop) is spoken sentence by sentence as each is\n"
            "complete. Runs until SIGINT or SIGTERM; docs/server.md tells more.");
        args.group("where to listen (repeatable)")
            .option("--wyoming,--uri", "URI",
                    "tcp://HOST:PORT (port 0: any free port, printed at start), unix://PATH or "
                    "stdio:// (one client on standard input and output); --uri is "
                    "wyoming-piper's name")
            .option(
                "--http", "HOST:PORT",
                "POST /v1/audio/speech (OpenAI style: mp3, opus, aac, wav, flac or pcm, streamed "
                "as made), GET /v1/models and GET /v1/audio/voices (port 0: any free port, "
                "printed at start)")
            .option("--api-key-file", "PATH",
                    "--http asks every request for Authorization: Bearer KEY, KEY the one word "
                    "in PATH (default: the file named by ETUDE_API_KEY_FILE; neither: no key)");
        args.group("voices")
            .option("--voice", "VOICE",
                    "a voice to serve: a Piper voice, PATH/VOICE.onnx (VOICE.onnx.json beside "
                    "it) or a name from 'etude voices', or a built-in one; repeatable, the first "
                    "is the default (default: slt). The built-in voices and every voice in the "
                    "voice folders are served too")
            .option("--data-dir", "DIR",
                    "a voice folder searched first, before ETUDE_VOICE_PATH's (wyoming-piper's "
                    "option; repeatable): --voice may name its voices, and all are served; one "
                    "that does not exist is passed over with a note")
            .option("--download-dir", "DIR",
                    "wyoming-piper's folder of downloaded voices: searched after the --data-dir "
                    "folders (this server downloads nothing)")
            .option("--speaker", "NAME|ID",
                    "the default voice's speaker, for requests that name none (a name or an id; "
                    "a voice of one speaker ignores it; default: the voice's own)")
            .option("--noise-scale", "X",
                    "every Piper voice's prior noise, 0 or more (default: each voice's, often "
                    "0.667)")
            .option("--length-scale", "X",
                    "every Piper voice's pace, above 0; larger is slower (default: each "
                    "voice's, often 1); HTTP's speed divides it")
            .option("--noise-w,--noise-w-scale", "X",
                    "every Piper voice's duration noise, 0 or more (default: each voice's, "
                    "often 0.8)")
            .option("--sentence-silence", "SECONDS",
                    "silence between the sentences of a request, Piper voices, 0 to 60 "
                    "(default 0)")
            .option("--auto-punctuation", "CHARS",
                    "Wyoming: text that ends in none of CHARS gets the first of them, as "
                    "wyoming-piper adds it (default: \".?!。？！．؟\"; \"\": off)")
            .option("--samples-per-chunk", "N",
                    "Wyoming: samples per audio-chunk, a request's last one shorter (default "
                    "1024, as wyoming-piper)")
            .flag("--no-streaming",
                  "Wyoming: no streamed text; synthesize-start, -chunk and -stop are ignored "
                  "and the client is told so in describe's info (as wyoming-piper's option)")
            .flag("--update-voices", "taken for wyoming-piper's sake; nothing to update")
            .flag("--debug", "taken for wyoming-piper's sake; requests are logged anyway");
        args.group("compute")
            .option("--backend", "NAME",
                    "where the Piper voices' decoders run: auto (default: a GPU if there is "
                    "one), cpu, cuda, vulkan, opencl; the device is opened at start")
            .option("--gpu-device", "N",
                    "index of the device within that backend (default: the best; see 'etude "
                    "devices')")
            .option("--precision", "MODE", kPrecisionOptionHelp);
        args.group("discovery")
            .flag("--zeroconf",
                  "advertise the first --wyoming tcp:// address as _wyoming._tcp through "
                  "avahi-daemon, so Home Assistant finds it (waits for the daemon if it is not "
                  "running)")
            .option("--zeroconf-name", "NAME",
                    "the advertised name (default: etude-HOSTNAME); implies --zeroconf");
        args.group("limits")
            .option("--max-syntheses", "N",
                    "syntheses running at once, all clients (default: the capacity measured "
                    "at start, at most 64)")
            .option("--max-waiting", "N",
                    "requests waiting for a turn (default 32); past that a request gets a "
                    "'busy' error at once")
            .option("--queue-timeout", "S",
                    "longest wait for a turn, in seconds (default 30), then a 'busy' error")
            .option("--max-connections", "N", "open connections, per listener (default 256)")
            .option("--max-connections-per-address", "N",
                    "open connections from one client address, per listener (default: half "
                    "of --max-connections); behind a proxy, make it --max-connections")
            .option("--max-text", "BYTES",
                    "text per request, a stream's chunks together (default 100000)")
            .option("--idle-timeout", "S",
                    "close a Wyoming connection that sends nothing for S seconds between "
                    "requests (an open stream waits for its text as long as it takes; default "
                    "60; HTTP: 5 s between requests)")
            .option("--header-timeout", "S",
                    "a request's head (HTTP: request line and headers, from the connection "
                    "or its first byte; Wyoming: a frame's header line) must arrive whole "
                    "within S seconds (default 10), however slowly it trickles")
            .option("--body-timeout", "S",
                    "then its body (HTTP; Wyoming: the frame's data and payload) within S "
                    "seconds (default 30)")
            .option("--write-timeout", "S",
                    "drop a client that takes no audio for S seconds (default 10)");
        args.group("options").flag("-q,--quiet", "no log line per request on standard error");
        args.footer(
            "On standard error, at start: where it listens, the capacity it measured (the\n"
            "real-time streams this machine holds with the default voice) and the first\n"
            "audio it promises: how soon each of that many syntheses, started together, was\n"
            "heard. Then one line per request: client, voice, characters, time to first\n"
            "audio, real-time factor (wall time / audio time).\n"
            "\n"
            "exit status: 0 after SIGINT/SIGTERM (stdio: after the client closes),\n"
            "1 runtime error (address in use), 2 usage error.\n"
            "\n"
            "examples:\n"
            "  etude serve --wyoming tcp://0.0.0.0:10200\n"
            "  etude serve --wyoming unix:///run/etude.sock --max-syntheses 4\n"
            "  etude serve --http 127.0.0.1:8000\n");
        if (!args.parse(argc, argv)) return 0;
        return run_serve(args);
    });
}

}  // namespace etude::cli
