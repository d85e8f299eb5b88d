// A process forked after an engine was made (rt/fork_generation.h): the
// child has the engine's memory but none of its threads, so a call that
// waits for them would wait for ever. It gets a clear error instead, may
// make an engine of its own, and is refused devices its parent opened (a
// device error, so that the CPU covers the work). Each check runs in a
// forked child that reports through its exit code; an alarm turns a hang
// into a signal rather than a test that never ends.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/etude.h"
#include "engine/scheduling/device_choice.h"
#include "gpu/registry.h"
#include "support/devices_here.h"
#include "support/stream_output.h"

namespace {

using etude::engine::Engine;
using etude::engine::StreamOptions;
namespace gpu = etude::gpu;

constexpr int kChildSeconds = 120;  // a hang ends as SIGALRM, not as a stuck suite

// Runs `check` in a forked child and returns what it returned (0: passed),
// or 100 + the signal that ended the child.
int in_forked_child(const std::function<int()>& check) {
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        ::alarm(kChildSeconds);
        int rc = 99;  // something thrown that the check did not expect
        try {
            rc = check();
        } catch (...) {
        }
        ::_exit(rc);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -2;
    if (WIFSIGNALED(status)) return 100 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

bool refused_as_forked(const std::function<void()>& call) {
    try {
        call();
    } catch (const etude::MadeBeforeFork& e) {
        return std::string(e.what()).find("forked") != std::string::npos;
    }
    return false;
}

std::size_t speak(Engine& engine, const std::string& text) {
    StreamOptions o;
    o.sample_rate = 16000;
    auto s = engine.create_stream(o);
    s->push_text(text);
    s->end_input();
    return etude::test::read_all(*s).size();
}

TEST(ForkedChild, is_refused_the_parents_engine_and_streams_and_may_make_its_own) {
    auto engine = std::make_unique<Engine>();
    ASSERT_GT(speak(*engine, "Before the fork."), 0u);
    StreamOptions o;
    o.sample_rate = 16000;
    auto made_before = engine->create_stream(o);

    const int rc = in_forked_child([&] {
        if (!refused_as_forked([&] { engine->create_stream(o); })) return 1;
        if (!refused_as_forked([&] { made_before->push_text("Hello."); })) return 2;
        if (!refused_as_forked([&] { made_before->end_input(); })) return 3;
        float out[64];
        if (!refused_as_forked([&] { made_before->read(out); })) return 4;
        if (!refused_as_forked([&] { made_before->read_some(out, 10); })) return 5;
        if (!refused_as_forked([&] { engine->measure_first_audio(o, 1); })) return 6;
        // What waits for no thread still works: the audio callback's pull
        // (nothing was pushed: it gives silence); cancel() and busy() have
        // nothing to do; destroying them frees nothing, and returns.
        made_before->pull(out);
        made_before->cancel();
        if (made_before->busy()) return 7;
        made_before.reset();
        engine.reset();
        Engine own;
        return speak(own, "After the fork, an engine of its own.") > 0 ? 0 : 8;
    });
    EXPECT_EQ(rc, 0) << "1-6: a call was not refused as forked (by number); 7: busy; 8: the "
                        "child's own engine spoke nothing; 114: it hung (SIGALRM)";
    // The parent's engine and stream are untouched.
    made_before->push_text("After the fork, in the parent.");
    made_before->end_input();
    EXPECT_GT(etude::test::read_all(*made_before).size(), 0u);
}

TEST(ForkedChild, the_c_api_says_invalid_argument_even_where_text_was_pushed) {
    etude_engine* engine = nullptr;
    ASSERT_EQ(etude_engine_create(&engine), ETUDE_OK) << etude_last_error();
    etude_stream* stream = nullptr;
    ASSERT_EQ(etude_stream_create(engine, "slt", 16000.0, &stream), ETUDE_OK);
    const int rc = in_forked_child([&] {
        // Not ETUDE_ERROR_INVALID_TEXT: the text is not at fault.
        if (etude_stream_push_text(stream, "Hello.", -1) != ETUDE_ERROR_INVALID_ARGUMENT) return 1;
        if (std::string(etude_last_error()).find("forked") == std::string::npos) return 2;
        etude_stream* another = nullptr;
        if (etude_stream_create(engine, "slt", 16000.0, &another) != ETUDE_ERROR_INVALID_ARGUMENT)
            return 3;
        return another == nullptr ? 0 : 4;
    });
    EXPECT_EQ(rc, 0);
    etude_stream_destroy(stream);
    etude_engine_destroy(engine);
}

bool have_opencl() {
    return etude::test::has_device(gpu::BackendKind::OpenCl);
}

TEST(ForkedChild, may_open_a_device_its_parent_had_not_and_not_one_it_had) {
    if (!have_opencl()) GTEST_SKIP() << "no OpenCL device";
    using etude::engine::open_gpu_tier;
    // A parent that has opened no device yet (none has, where this test
    // runs alone in its process, as ctest runs it): the child may open its
    // own.
    if (!etude::engine::devices_were_opened()) {
        EXPECT_EQ(in_forked_child([] { return open_gpu_tier("opencl", -1).backend ? 0 : 1; }), 0);
    }
    ASSERT_TRUE(open_gpu_tier("opencl", -1).backend);
    const int rc = in_forked_child([] {
        try {
            open_gpu_tier("opencl", -1);
        } catch (const gpu::DeviceError& e) {
            return std::string(e.what()).find("forked") != std::string::npos ? 0 : 2;
        }
        return 1;
    });
    EXPECT_EQ(rc, 0) << "1: the parent's device was handed to the child; 114: it hung";
    // The parent keeps its device.
    EXPECT_TRUE(open_gpu_tier("opencl", -1).backend);
}

}  // namespace
