// Advertises a Wyoming server on the local network as _wyoming._tcp through
// the Avahi daemon (libavahi-client), so Home Assistant discovers it by
// itself. If the daemon is not running yet, the advertisement waits for it;
// a name taken by another host is replaced by Avahi's alternative ("NAME #2").
#pragma once

#include <functional>
#include <string>

struct AvahiThreadedPoll;
struct AvahiClient;
struct AvahiEntryGroup;

namespace etude::server {

class ZeroconfAdvertiser {
  public:
    // `log` receives one line per state change (advertised, renamed,
    // waiting for the daemon, failed). Throws etude::Error if Avahi's client
    // cannot be set up at all.
    ZeroconfAdvertiser(std::string name, int port, std::function<void(const std::string&)> log);
    ~ZeroconfAdvertiser();  // withdraws the advertisement
    ZeroconfAdvertiser(const ZeroconfAdvertiser&) = delete;
    ZeroconfAdvertiser& operator=(const ZeroconfAdvertiser&) = delete;

    static constexpr const char* kServiceType = "_wyoming._tcp";
    // "etude-HOSTNAME": the default name.
    static std::string default_name();

  private:
    // Avahi's callbacks, on its poll thread.
    void on_client(AvahiClient* client, int state);
    void on_group(AvahiEntryGroup* group, int state);
    void publish(AvahiClient* client);

    std::string name_;
    int port_;
    std::function<void(const std::string&)> log_;
    AvahiThreadedPoll* poll_ = nullptr;
    AvahiClient* client_ = nullptr;
    AvahiEntryGroup* group_ = nullptr;
};

}  // namespace etude::server
