// What the many-stream programs (many_streams.cpp, stepped_streams.cpp) say
// about the host beside their figures: the CPU's model name, and this
// process's CPU time, from which they give how busy the CPUs were.
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace etude::bench {

// /proc/cpuinfo's first "model name" ("?" where there is none).
inline std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "?";
}

// This process's CPU time so far (all its threads, user and system).
inline double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const auto s = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6;
    };
    return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace etude::bench
