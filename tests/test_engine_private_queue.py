"""The event engine's queue is its own: the network schedules through ``Engine.schedule``
(the unchecked ``Engine.at``), never by writing into the engine's private fields."""

import ast
import pathlib

import collsim
from collsim.network.engine import FINISH, START, Engine

PACKAGE = pathlib.Path(collsim.__file__).parent
PRIVATE = {"_at", "_times", "_stopped_at"}  # Engine's private state


def test_no_module_but_the_engine_reads_its_private_queue():
    touching = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "network" / "engine.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
                touching.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.attr}")
    assert touching == []


def test_schedule_orders_events_as_at_does():
    by_at, by_schedule = Engine(), Engine()
    seen = {id(by_at): [], id(by_schedule): []}
    for time, priority, name in ((2.0, START, "c"), (1.0, START, "b"), (1.0, FINISH, "a")):
        by_at.at(time, priority, seen[id(by_at)].append, name)
        by_schedule.schedule(time, priority, seen[id(by_schedule)].append, name)
    by_at.run()
    by_schedule.run()
    assert seen[id(by_at)] == seen[id(by_schedule)] == ["a", "b", "c"]
    assert by_schedule.now == 2.0
