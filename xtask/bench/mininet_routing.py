#!/usr/bin/env python3
"""Reference benchmark: Mininet on netdojo's routing topology.

The same topology as netdojo's routing application (crates/netdojo-linux/src/routing/layout.rs)
at its largest, 4 subnets of 4 hosts, built with Mininet's Python API:

- router `r0`, a Node with `net.ipv4.ip_forward=1` (as in Mininet's examples/linuxrouter.py),
  interface `r0-eth{i}` = 192.168.i.1/24 facing subnet i;
- one Linux bridge per subnet, `s{i}` (mininet.nodelib.LinuxBridge, no controller, no STP),
  port `s{i}-eth1` to the router, `s{i}-eth2`... to the hosts;
- hosts `h1`..`h16`, numbered across subnets, `h{n}-eth0` = 192.168.i.(100+j)/24, default route
  via 192.168.i.1.

21 nodes: 1 router, 4 switches, 16 hosts. pingAll() covers the 16 hosts and the router (17
nodes, 272 pings), hosts first and the router last, as netdojo's pingmesh does.

Each run measures build+start (Mininet(...) construction and net.start(), which builds first),
pingAll (net.pingAll()), stop (net.stop()) and the total; one line of JSON on stdout at the end.

Run as root: python3 xtask/bench/mininet_routing.py --runs 20

Needs Mininet's Python package and its `mnexec` binary (Debian: `apt-get install mininet`),
and `brctl` (Debian: bridge-utils). Safety: this script only ever calls net.stop() on its own
Mininet object. It never runs `mn -c` nor mininet.clean.cleanup(), which kill processes
machine-wide (killall -9 / pkill -9 -f mininet:) and delete /tmp/*.log.

Do not run it alongside anything else that uses the names s1-s4 / s{i}-eth{k} in the root
network namespace: Mininet's LinuxBridge switches and their ports live there.
"""

import argparse
import json
import os
import sys
import time

try:
    import mininet  # noqa: F401
except ImportError:
    # Debian's package installs into the system Python's dist-packages; a python3 from pyenv,
    # a venv, etc. does not see it. Mininet is pure Python over the stdlib (plus mnexec), so
    # borrowing that one directory (appended: it shadows nothing) is enough.
    sys.path.append("/usr/lib/python3/dist-packages")
    import mininet  # noqa: F401

from mininet.log import setLogLevel
from mininet.net import VERSION as MININET_VERSION, Mininet
from mininet.node import Node
from mininet.nodelib import LinuxBridge
from mininet.topo import Topo

SUBNETS = 4
HOSTS_PER_SUBNET = 4


class LinuxRouter(Node):
    """A Node with IP forwarding enabled (Mininet's examples/linuxrouter.py)."""

    def config(self, **params):
        super().config(**params)
        self.cmd("sysctl -q net.ipv4.ip_forward=1")

    def terminate(self):
        self.cmd("sysctl -q net.ipv4.ip_forward=0")
        super().terminate()


class RoutingTopo(Topo):
    """netdojo's routing layout: r0, one bridge per subnet, hosts numbered across subnets."""

    def build(self, subnets=SUBNETS, hosts_per_subnet=HOSTS_PER_SUBNET):
        router = self.addNode("r0", cls=LinuxRouter, ip="192.168.1.1/24")
        switches = []
        # Router links first, so each switch's port 1 (s{i}-eth1) faces the router.
        for i in range(1, subnets + 1):
            switch = self.addSwitch("s%d" % i)
            switches.append(switch)
            self.addLink(
                router,
                switch,
                intfName1="r0-eth%d" % i,
                params1={"ip": "192.168.%d.1/24" % i},
                intfName2="s%d-eth1" % i,
            )
        n = 1
        for i, switch in enumerate(switches, start=1):
            for j in range(hosts_per_subnet):
                host = self.addHost(
                    "h%d" % n,
                    ip="192.168.%d.%d/24" % (i, 100 + j),
                    defaultRoute="via 192.168.%d.1" % i,
                )
                self.addLink(host, switch, intfName1="h%d-eth0" % n, intfName2="s%d-eth%d" % (i, j + 2))
                n += 1


def one_run(topo):
    """Build, start, pingAll, stop. Returns (build_start, pingall, stop, total, drop %)."""
    net = None
    stopped = False
    t0 = time.perf_counter()
    try:
        # build=False, so that a failure while building still leaves us `net` to stop;
        # start() builds first, so the pair times the same as Mininet(...) + start().
        net = Mininet(topo=topo, switch=LinuxBridge, controller=None, build=False)
        net.start()
        t1 = time.perf_counter()
        dropped = net.pingAll()
        t2 = time.perf_counter()
        stopped = True  # whatever happens in stop(), don't call it twice
        net.stop()
        t3 = time.perf_counter()
    finally:
        # Only this run's own network, never mininet.clean.cleanup().
        if net is not None and not stopped:
            try:
                net.stop()
            except Exception as e:  # report the original exception, not this one
                print("mininet_routing: net.stop() after a failure also failed: %r" % (e,), file=sys.stderr)
    return t1 - t0, t2 - t1, t3 - t2, t3 - t0, dropped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="number of runs (default 20)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if os.geteuid() != 0:
        sys.exit("mininet_routing: must run as root")

    # 'warning' also hides pingAll()'s table, which Mininet logs at its 'output' level.
    setLogLevel("warning")
    topo = RoutingTopo()
    assert len(topo.nodes()) == 1 + SUBNETS + SUBNETS * HOSTS_PER_SUBNET

    result = {
        "runs": args.runs,
        "build_start_s": [],
        "pingall_s": [],
        "stop_s": [],
        "total_s": [],
        "dropped_runs": 0,
        "mininet_version": MININET_VERSION,
    }
    for run in range(1, args.runs + 1):
        build_start, pingall, stop, total, dropped = one_run(topo)
        if dropped != 0:
            result["dropped_runs"] += 1
            print("mininet_routing: run %d: pingAll dropped %s%%" % (run, dropped), file=sys.stderr)
        for key, value in (
            ("build_start_s", build_start),
            ("pingall_s", pingall),
            ("stop_s", stop),
            ("total_s", total),
        ):
            result[key].append(round(value, 4))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
