"""The CPU cost of one ipRestriction check against a long list: indexed against entry by entry.

A ModuleSet may list tens of thousands of addresses (a cloud's published ranges). Every request
to a route with ipRestriction is checked on the event loop every host shares, so the per-check
cost is what one long list costs everyone. This builds the module with ``--entries`` allowed
addresses (every other address from 10.0.0.0, so none merge) and 100 denied /24s, and times a
check of a client in no list (refused after looking at both lists) and of the last allowed one,
for the module as shipped (an index, one bisection per list) and, in the same run, for the
naive walk over every network (what it did before), so the ratio holds on a loaded machine.

    .venv/bin/python benchmarks/ip_restriction.py [--entries 40000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import os
import statistics
import timeit
from collections.abc import Callable

from interlock.edge.modules.addresses import in_any
from interlock.edge.modules.ip_restriction import IpRestriction
from interlock.model.module_settings import ModuleSettings, module_settings
from interlock.model.moduleset import IpRestrictionModule, Modules


def _median_us(check: Callable[[], object], *, number: int, repeats: int) -> float:
    runs = [timeit.timeit(check, number=number) / number for _ in range(repeats)]
    return statistics.median(runs) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    allow = [str(ipaddress.IPv4Address(0x0A000000 + 2 * i)) for i in range(args.entries)]
    deny = [f"192.168.{i}.0/24" for i in range(100)]
    settings = module_settings(Modules(ipRestriction=IpRestrictionModule(allow=allow, deny=deny)))
    assert isinstance(settings, ModuleSettings) and settings.ip_restriction is not None
    module = IpRestriction(settings.ip_restriction)
    allow_networks = [ipaddress.ip_network(a) for a in allow]
    deny_networks = [ipaddress.ip_network(d) for d in deny]

    def naive(address: ipaddress.IPv4Address) -> bool:
        return not in_any(address, deny_networks) and in_any(address, allow_networks)

    print(
        f"ipRestriction, {args.entries:,} allowed addresses + 100 denied /24s, load "
        f"{os.getloadavg()[0]:.1f}, median of {args.repeats}"
    )
    for name, text in (("a client in no list", "203.0.113.9"), ("the last allowed", allow[-1])):
        address = ipaddress.ip_address(text)
        assert (module.check(address) is None) == naive(address)
        indexed = _median_us(
            functools.partial(module.check, address), number=2000, repeats=args.repeats
        )
        walked = _median_us(functools.partial(naive, address), number=20, repeats=args.repeats)
        print(
            f"  {name}: indexed {indexed:.2f} us, entry by entry {walked:,.0f} us "
            f"({walked / indexed:,.0f}x)"
        )


if __name__ == "__main__":
    main()
