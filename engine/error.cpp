#include "engine/error.h"

namespace etude {

etude_status status_of(const std::exception_ptr& thrown, etude_status caller_fault,
                       std::string& message) noexcept {
    etude_status status = ETUDE_ERROR_INTERNAL;
    const char* what = "unknown error";
    try {
        std::rethrow_exception(thrown);
    } catch (const MadeBeforeFork& e) {
        status = ETUDE_ERROR_INVALID_ARGUMENT;
        what = e.what();
    } catch (const Error& e) {
        status = caller_fault;
        what = e.what();
    } catch (const std::exception& e) {
        what = e.what();
    } catch (...) {
    }
    try {
        message = what;
    } catch (...) {  // no memory for the copy: the status alone
        message.clear();
    }
    return status;
}

}  // namespace etude
