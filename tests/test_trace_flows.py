"""Chrome/Perfetto traces: a flow from every send to its receive, and ``--trace`` on the
training commands (pipeline, verify, strategies), the same bytes every run."""

import json

import pytest

import collsim
from collsim.cli import main


def _events(text):
    return json.loads(text)["traceEvents"]


def _check_flows(events):
    """Every flow start has one finish with its id, from the sender's send track to the
    receiver's receive track, each inside a span of its track; returns the flow count."""
    spans = [e for e in events if e["ph"] == "X"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == sum(e["ph"] == "s" for e in events)  # ids are unique
    assert starts.keys() == finishes.keys()
    for flow_id, start in starts.items():
        finish = finishes[flow_id]
        assert (start["tid"], finish["tid"], finish["bp"]) == (1, 2, "e")
        assert start["cat"] == finish["cat"] and start["name"] == finish["name"]
        for end in (start, finish):  # the span it binds to: equal cat, pid, tid and ts
            assert any(
                (s.get("cat"), s["pid"], s["tid"], s["ts"])
                == (end["cat"], end["pid"], end["tid"], end["ts"])
                for s in spans
            ), end
    return len(starts)


def test_every_transfer_of_a_ring_has_a_flow_from_sender_to_receiver():
    result = collsim.Cluster(collsim.topology.ring(4)).all_reduce(count=64, dtype="float32")
    events = _events(result.trace.to_chrome())
    assert _check_flows(events) == result.trace.transfer_count == 24
    pids = {e["id"]: e["pid"] for e in events if e["ph"] in "s"}
    ends = {e["id"]: e["pid"] for e in events if e["ph"] in "f"}
    # the ring: each flow goes from rank r to rank r+1
    assert {(pids[i], ends[i]) for i in pids} == {(r, (r + 1) % 4) for r in range(4)}


@pytest.mark.parametrize(
    "command",
    [
        ["pipeline", "--schedule", "1f1b", "--stages", "4"],
        ["verify", "nd", "--dp-shard", "2", "--tp", "2", "--pp", "2"],  # a 3-D step
    ],
    ids=["pipeline", "verify-nd"],
)
def test_trace_flag_writes_a_valid_trace_with_flows_the_same_bytes_twice(command, tmp_path, capsys):
    texts = []
    for name in ("a.json", "b.json"):
        assert main([*command, "--trace", str(tmp_path / name)]) == 0
        texts.append((tmp_path / name).read_bytes())
    assert texts[0] == texts[1]
    events = _events(texts[0])
    assert _check_flows(events) > 0
    assert any(e["ph"] == "X" and e["tid"] == 0 for e in events)  # compute spans too
    assert "ui.perfetto.dev" in capsys.readouterr().out


def test_strategies_trace_puts_each_strategy_in_processes_of_its_own(tmp_path, capsys):
    path = tmp_path / "s.json"
    assert main(["strategies", "--json", "--trace", str(path)]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout stays JSON: the note goes to stderr
    assert "ui.perfetto.dev" in captured.err
    events = _events(path.read_text())
    assert _check_flows(events) > 0
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"DP: rank 0", "FSDP: rank 7"} <= names


@pytest.mark.parametrize("command", [["pipeline"], ["verify", "dp"], ["strategies"]])
def test_a_trace_path_that_cannot_be_written_is_refused_before_the_run(command, tmp_path, capsys):
    assert main([*command, "--trace", str(tmp_path / "missing" / "t.json")]) == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "missing" in err and "create it first" in err
