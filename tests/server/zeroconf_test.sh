#!/bin/bash
# etude serve --zeroconf: the server is found as _wyoming._tcp through Avahi,
# as Home Assistant finds it; a second server asking for the same name gets
# Avahi's alternative ("kitchen speaker #2"; avahi-browse writes "#" as
# \035). Runs its own D-Bus and avahi-daemon, on the loopback interface only (no packets leave the machine), reached through
# DBUS_SYSTEM_BUS_ADDRESS; skips (77) without them, without root (the daemon
# writes /run/avahi-daemon/), or when an avahi-daemon already runs here.
# publish-aaaa-on-ipv4=no: by default Avahi also answers with ::1 over IPv4,
# and avahi-browse -r takes whichever of ::1 and 127.0.0.1 answers first; the
# servers listen on 127.0.0.1 only, so only its A record is a true answer.
set -u
etude=$1
for p in dbus-daemon avahi-daemon avahi-browse; do
    command -v $p >/dev/null || { echo "SKIP: $p is not installed (avahi-daemon, avahi-utils, dbus)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: avahi-daemon needs root to run"; exit 77; }
[ -e /run/avahi-daemon/pid ] && { echo "SKIP: an avahi-daemon already runs here; not disturbing it"; exit 77; }

dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
cat > "$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_type="method_call"/>
    <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
printf '[server]\nuse-ipv4=yes\nuse-ipv6=no\nallow-interfaces=lo\nenable-dbus=yes\n[wide-area]\nenable-wide-area=no\n[publish]\npublish-hinfo=no\npublish-workstation=no\npublish-aaaa-on-ipv4=no\n' > "$dir/avahi.conf"
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=$dir/bus
dbus-daemon --config-file="$dir/bus.conf" --nofork >"$dir/dbus.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$dir/bus" ] && break; sleep 0.1; done
avahi-daemon --no-drop-root --no-chroot --no-rlimits -f "$dir/avahi.conf" >"$dir/avahi.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "Server startup complete" "$dir/avahi.log" && break; sleep 0.1; done
grep -q "Server startup complete" "$dir/avahi.log" || { echo "SKIP: avahi-daemon did not start:"; cat "$dir/avahi.log"; exit 77; }

"$etude" serve -q --wyoming tcp://127.0.0.1:0 --zeroconf-name "kitchen speaker" 2>"$dir/a.log" &
pids+=($!)
"$etude" serve -q --wyoming tcp://127.0.0.1:0 --zeroconf-name "kitchen speaker" 2>"$dir/b.log" &
pids+=($!)
fail=0
for _ in $(seq 100); do
    [ "$(grep -c "zeroconf: advertised" "$dir/a.log" "$dir/b.log" | awk -F: '{s+=$2} END {print s}')" = 2 ] && break
    sleep 0.1
done
port_a=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/a.log" | head -1)
port_b=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/b.log" | head -1)
found=$(timeout 10 avahi-browse -rpt _wyoming._tcp 2>/dev/null | grep '^=')
echo "$found"
for port in "$port_a" "$port_b"; do
    if ! echo "$found" | grep -q ";127\.0\.0\.1;$port;"; then
        echo "FAIL: the server on port $port is not found as _wyoming._tcp"; fail=1
    fi
done
if echo "$found" | grep -q 'kitchen\\032speaker;' && echo "$found" | grep -q 'kitchen\\032speaker\\032\\0352;'; then
    echo "PASS: both found; the second under Avahi's alternative name"
else
    echo "FAIL: expected 'kitchen speaker' and 'kitchen speaker #2'"; cat "$dir/a.log" "$dir/b.log"; fail=1
fi
# Withdrawn when the server stops.
kill "${pids[2]}"; wait "${pids[2]}"; rc=$?
[ $rc = 0 ] || { echo "FAIL: server exited $rc on SIGTERM"; fail=1; }
sleep 1
if timeout 10 avahi-browse -rpt _wyoming._tcp 2>/dev/null | grep '^=' | grep -q ";$port_a;"; then
    echo "FAIL: still advertised after the server stopped"; fail=1
else
    echo "PASS: withdrawn when the server stops"
fi
exit $fail
