#!/usr/bin/python3
"""A stand-in for logind on a private D-Bus bus, for the sleep scenarios: owns org.freedesktop.login1
(or, with --impostor, owns nothing) and sends org.freedesktop.login1.Manager.PrepareForSleep(BOOL)
from /org/freedesktop/login1 for each line read on standard input: "sleep" sends true, "wake" false.
Serves logind's Inhibit(what, who, why, mode) as logind does: the caller gets the write end of a pipe
and holds the lock until it closes it (the read end then hangs up), and ListInhibitors, which
systemd-inhibit --list calls. Prints "ready" once it holds the name, "sent LINE" after each signal
has been flushed to the bus, "inhibited WHAT WHO MODE" and "released WHAT WHO MODE" as locks come and go.

  logind_standin.py ADDRESS [--impostor] < commands
"""
import os
import sys

import dbus
import dbus.lowlevel
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

PATH = "/org/freedesktop/login1"
INTERFACE = "org.freedesktop.login1.Manager"


def say(line):
    print(line, flush=True)


class Manager(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, PATH)
        self.bus = bus
        self.locks = {}  # read end -> (what, who, why, mode, uid, pid)

    @dbus.service.method(INTERFACE, in_signature="ssss", out_signature="h", sender_keyword="sender")
    def Inhibit(self, what, who, why, mode, sender=None):
        if mode not in ("block", "delay"):
            raise dbus.exceptions.DBusException("mode must be block or delay", name="org.freedesktop.DBus.Error.InvalidArgs")
        uid = int(self.bus.get_unix_user(sender)) if sender else 0
        pid = 0
        if sender:
            daemon = self.bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus")
            pid = int(daemon.GetConnectionUnixProcessID(sender, dbus_interface="org.freedesktop.DBus"))
        read_end, write_end = os.pipe()
        self.locks[read_end] = (what, who, why, mode, uid, pid)
        GLib.io_add_watch(read_end, GLib.IO_HUP | GLib.IO_ERR, self.released)
        say("inhibited %s %s %s" % (what, who, mode))
        fd = dbus.types.UnixFd(write_end)
        os.close(write_end)
        return fd

    def released(self, fd, _condition):
        what, who, _why, mode, _uid, _pid = self.locks.pop(fd)
        os.close(fd)
        say("released %s %s %s" % (what, who, mode))
        return False

    @dbus.service.method(INTERFACE, in_signature="", out_signature="a(ssssuu)")
    def ListInhibitors(self):
        return dbus.types.Array([dbus.types.Struct(lock, signature="ssssuu") for lock in self.locks.values()], signature="(ssssuu)")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(sys.argv[1])
    manager = None
    if "--impostor" not in sys.argv[2:]:
        reply = bus.request_name("org.freedesktop.login1", dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
        if reply != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
            sys.exit("logind_standin: cannot own org.freedesktop.login1 (reply %d)" % reply)
        manager = Manager(bus)
    loop = GLib.MainLoop()

    pending = b""

    def command(fd, _condition):
        nonlocal pending
        chunk = os.read(fd, 4096)
        if not chunk:
            loop.quit()
            return False
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            word = line.decode().strip()
            if word in ("sleep", "wake"):
                message = dbus.lowlevel.SignalMessage(PATH, INTERFACE, "PrepareForSleep")
                message.append(word == "sleep", signature="b")
                bus.send_message(message)
                bus.flush()
                say("sent " + word)
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, command)
    say("ready")
    loop.run()
    del manager


main()
