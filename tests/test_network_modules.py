"""The network package keeps one concept per module, each short enough to read: the
engine, the flow model, the faults on it, the trace and its memory records."""

import pathlib

import collsim
from collsim.network import Network, faults, flows

NETWORK = pathlib.Path(collsim.__file__).parent / "network"


def test_every_network_module_is_under_400_lines():
    long = {
        p.name: n for p in NETWORK.glob("*.py") if (n := len(p.read_text().splitlines())) >= 400
    }
    assert long == {}


def test_the_faults_live_in_their_own_module():
    for name in ("scale_link", "fail_link", "crash_rank"):
        assert getattr(Network, name).__module__ == faults.__name__
    assert flows.Network._begin.__module__ == flows.__name__  # the flow model stays
