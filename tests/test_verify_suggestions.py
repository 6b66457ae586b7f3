"""What `collsim verify` suggests when it refuses a degree (issue 25, item 15).

``verify dp --dp 3 --batch 64`` listed only the dp values up to 2·dp (1, 2, 4) though 8,
16, 32 and 64 divide 64 within the rank cap.  Every suggestion list now goes through one
helper, :func:`collsim.errors.nearest_first`: every valid value, the nearest first.
"""

import pytest
from fuzzkit import run_cli

from collsim.errors import nearest_first


def test_nearest_first_keeps_every_choice_and_breaks_ties_to_the_smaller():
    assert nearest_first(3, [1, 2, 4, 8, 16, 32, 64]) == [2, 4, 1, 8, 16, 32, 64]
    assert nearest_first(4, [1, 2, 3, 6]) == [3, 2, 6, 1]
    assert nearest_first(100, [1, 2]) == [2, 1] and nearest_first(5, []) == []


@pytest.mark.parametrize(
    "argv, listed",
    [
        # dp: every divisor of the batch that fits the 64-rank cap (dp · tp ranks)
        (["dp", "--dp", "3", "--batch", "64"], "dp values that do: 2, 4, 1, 8, 16, 32, 64)"),
        (
            ["dp", "--dp", "5", "--batch", "48", "--micro-batch", "2"],
            "dp values that do: 4, 6, 3, 2, 8, 1, 12, 16, 24, 48)",
        ),
        (
            ["dp-tp", "--dp", "3", "--tp", "2", "--batch", "64"],
            "dp values that do: 2, 4, 1, 8, 16, 32)",
        ),
        (["nd", "--dp-shard", "3", "--cp", "2", "--batch", "8"], "dp values that do: 2, 4, 1, 8)"),
        # tp: every degree that divides the model's sizes
        (["tp-mlp", "--tp", "3"], "hidden=16 and ffn_hidden=64, nearest first: 2, 4, 1, 8, 16"),
        # cp under all-to-all: every degree that divides the heads
        (
            ["cp", "--cp", "4", "--variant", "all-to-all", "--heads", "6", "--hidden", "12"],
            "heads=6, nearest first: 3, 2, 6, 1",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_refusals_list_every_valid_value_nearest_first(argv, listed):
    outcome = run_cli(["verify", *argv, "--steps", "1"], timeout=30)
    assert outcome.status != 0 and outcome.stdout == "", outcome
    assert listed in outcome.stderr, outcome.stderr
