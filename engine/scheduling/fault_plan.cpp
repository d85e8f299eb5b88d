#include "engine/scheduling/fault_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/error.h"

namespace etude::engine {
namespace {

bool parse_slow(const std::string& item, std::size_t skip, FaultPlan& plan) {
    double p = 0, ms = 0;
    unsigned seed = 1;
    char tail = 0;
    const int n = std::sscanf(item.c_str() + skip, "%lf:%lf:%u%c", &p, &ms, &seed, &tail);
    if (n < 2 || n > 3 || !(p > 0 && p <= 1) || !(ms > 0)) return false;
    plan.slow_probability = p;
    plan.slow_ms = ms;
    plan.seed = n == 3 ? seed : 1;
    return true;
}

// A delay of MS, above 0 and at most a minute.
bool parse_ms(const char* text, double& into) {
    double ms = 0;
    char tail = 0;
    if (std::sscanf(text, "%lf%c", &ms, &tail) != 1 || !(ms > 0 && ms <= 60000)) return false;
    into = ms;
    return true;
}

}  // namespace

void parse_faults(std::string_view text, FaultSpec& into, std::string_view source) {
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t end = std::min(text.find(',', at), text.size());
        const std::string item(text.substr(at, end - at));
        at = end + 1;
        if (item.empty()) continue;
        bool ok;
        if (item.rfind("slow:", 0) == 0) {
            ok = parse_slow(item, 5, into.primary);
        } else if (item.rfind("fallback-slow:", 0) == 0) {
            ok = parse_slow(item, 14, into.fallback);
        } else if (item.rfind("slow-analysis:", 0) == 0) {
            ok = parse_ms(item.c_str() + 14, into.slow_analysis_ms);
        } else if (item.rfind("slow-split:", 0) == 0) {
            ok = parse_ms(item.c_str() + 11, into.slow_split_ms);
        } else if (item == "cpu-busy") {
            into.cpu_busy = true;
            ok = true;
        } else if (item == "host-analysis") {
            into.host_analysis = true;
            ok = true;
        } else {
            const auto f = gpu::parse_gpu_fault(item);
            ok = f.has_value();
            if (f) into.device = *f;
        }
        if (!ok)
            throw Error(
                std::string(source) + ": cannot read fault '" + item +
                "' (expected slow:P:MS[:SEED], fallback-slow:P:MS[:SEED], slow-analysis:MS, "
                "slow-split:MS, cpu-busy, host-analysis or kernel|oom|late:COUNT[:MS[:AFTER]])");
    }
}

FaultSpec faults_for_stream(const std::string& option_text) {
    FaultSpec spec;
    parse_faults(option_text, spec, "StreamOptions::faults");
    if (const char* env = std::getenv("ETUDE_FAULT")) parse_faults(env, spec, "ETUDE_FAULT");
    return spec;
}

}  // namespace etude::engine
