// How many threads this process has now (/proc/self/task; 0 where there is
// none): what a test counts to find that streams add none, and what
// bench/many_streams.cpp prints beside its figures.
#pragma once

#include <dirent.h>

namespace etude::test {

inline int threads_of_this_process() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/task")) {
        while (const dirent* e = readdir(d))
            if (e->d_name[0] != '.') ++n;
        closedir(d);
    }
    return n;
}

}  // namespace etude::test
