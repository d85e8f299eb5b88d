#include "server/zeroconf_advertiser.h"

#include <avahi-client/client.h>
#include <avahi-client/publish.h>
#include <avahi-common/alternative.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/thread-watch.h>
#include <unistd.h>

#include "engine/error.h"

namespace etude::server {

std::string ZeroconfAdvertiser::default_name() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || !host[0]) return "etude";
    return std::string("etude-") + host;
}

ZeroconfAdvertiser::ZeroconfAdvertiser(std::string name, int port,
                                       std::function<void(const std::string&)> log)
    : name_(std::move(name)), port_(port), log_(std::move(log)) {
    if (name_.empty()) name_ = default_name();
    poll_ = avahi_threaded_poll_new();
    if (!poll_) throw Error("zeroconf: cannot start Avahi's event loop");
    int error = 0;
    // NO_FAIL: without a running avahi-daemon the client waits for one
    // instead of failing, and advertises once it appears.
    client_ = avahi_client_new(
        avahi_threaded_poll_get(poll_), AVAHI_CLIENT_NO_FAIL,
        [](AvahiClient* c, AvahiClientState state, void* self) {
            static_cast<ZeroconfAdvertiser*>(self)->on_client(c, state);
        },
        this, &error);
    if (!client_) {
        avahi_threaded_poll_free(poll_);
        throw Error(std::string("zeroconf: cannot reach Avahi: ") + avahi_strerror(error) +
                    " (--zeroconf needs avahi-daemon on the system D-Bus)");
    }
    if (avahi_threaded_poll_start(poll_) < 0) {
        avahi_client_free(client_);
        avahi_threaded_poll_free(poll_);
        throw Error("zeroconf: cannot start Avahi's event thread");
    }
}

ZeroconfAdvertiser::~ZeroconfAdvertiser() {
    avahi_threaded_poll_stop(poll_);
    if (group_) avahi_entry_group_free(group_);
    avahi_client_free(client_);
    avahi_threaded_poll_free(poll_);
}

void ZeroconfAdvertiser::on_client(AvahiClient* client, int state) {
    switch (state) {
        case AVAHI_CLIENT_S_RUNNING:
            publish(client);
            break;
        case AVAHI_CLIENT_S_COLLISION:
        case AVAHI_CLIENT_S_REGISTERING:
            // The host name changed or collided: withdraw until it settles.
            if (group_) avahi_entry_group_reset(group_);
            break;
        case AVAHI_CLIENT_CONNECTING:
            log_("zeroconf: waiting for avahi-daemon to advertise '" + name_ + "'");
            break;
        case AVAHI_CLIENT_FAILURE:
            log_(std::string("zeroconf: Avahi failed: ") +
                 avahi_strerror(avahi_client_errno(client)) + "; not advertised");
            break;
        default:
            break;
    }
}

void ZeroconfAdvertiser::on_group(AvahiEntryGroup* group, int state) {
    if (state == AVAHI_ENTRY_GROUP_ESTABLISHED) {
        log_("zeroconf: advertised '" + name_ + "' as " + kServiceType + " on port " +
             std::to_string(port_));
    } else if (state == AVAHI_ENTRY_GROUP_COLLISION) {
        char* alt = avahi_alternative_service_name(name_.c_str());
        log_("zeroconf: '" + name_ + "' is taken; trying '" + alt + "'");
        name_ = alt;
        avahi_free(alt);
        publish(avahi_entry_group_get_client(group));
    } else if (state == AVAHI_ENTRY_GROUP_FAILURE) {
        log_(std::string("zeroconf: advertising failed: ") +
             avahi_strerror(avahi_client_errno(avahi_entry_group_get_client(group))));
    }
}

void ZeroconfAdvertiser::publish(AvahiClient* client) {
    if (!group_) {
        group_ = avahi_entry_group_new(
            client,
            [](AvahiEntryGroup* g, AvahiEntryGroupState state, void* self) {
                static_cast<ZeroconfAdvertiser*>(self)->on_group(g, state);
            },
            this);
        if (!group_) {
            log_(std::string("zeroconf: ") + avahi_strerror(avahi_client_errno(client)));
            return;
        }
    }
    avahi_entry_group_reset(group_);
    const int rc = avahi_entry_group_add_service(
        group_, AVAHI_IF_UNSPEC, AVAHI_PROTO_UNSPEC, static_cast<AvahiPublishFlags>(0),
        name_.c_str(), kServiceType, nullptr, nullptr, static_cast<uint16_t>(port_), nullptr);
    if (rc == AVAHI_ERR_COLLISION) {
        on_group(group_, AVAHI_ENTRY_GROUP_COLLISION);
        return;
    }
    if (rc < 0 || avahi_entry_group_commit(group_) < 0)
        log_(std::string("zeroconf: cannot advertise: ") +
             avahi_strerror(rc < 0 ? rc : avahi_client_errno(client)));
}

}  // namespace etude::server
