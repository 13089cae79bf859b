#!/usr/bin/python3
"""A stand-in for logind on a private D-Bus bus, for the sleep scenario: owns org.freedesktop.login1
(or, with --impostor, owns nothing) and sends org.freedesktop.login1.Manager.PrepareForSleep(BOOL)
from /org/freedesktop/login1 for each line read on standard input: "sleep" sends true, "wake" false.
Prints "ready" once it holds the name and "sent LINE" after each signal has been flushed to the bus.

  logind_standin.py ADDRESS [--impostor] < commands
"""
import sys

import dbus
import dbus.lowlevel


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    bus = dbus.bus.BusConnection(sys.argv[1])
    if "--impostor" not in sys.argv[2:]:
        reply = bus.request_name("org.freedesktop.login1", dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
        if reply != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
            sys.exit("logind_standin: cannot own org.freedesktop.login1 (reply %d)" % reply)
    print("ready", flush=True)
    for line in sys.stdin:
        word = line.strip()
        if word not in ("sleep", "wake"):
            continue
        message = dbus.lowlevel.SignalMessage("/org/freedesktop/login1", "org.freedesktop.login1.Manager", "PrepareForSleep")
        message.append(word == "sleep", signature="b")
        bus.send_message(message)
        bus.flush()
        print("sent " + word, flush=True)


main()
