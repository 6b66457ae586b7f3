"""`viz memory` and `viz scaling` draw the preset a user names, not a default laid over it."""

import pytest

from collsim.cli import main


@pytest.mark.parametrize(
    "kind, module, function",
    [
        ("memory", "collsim.viz.memory", "memory_figure"),
        ("scaling", "collsim.viz.scaling", "scaling_figure"),
    ],
)
def test_a_named_model_is_drawn_with_its_own_shape(kind, module, function, monkeypatch, tmp_path):
    seen = []

    def capture(cfg, **kwargs):
        seen.append(cfg)
        raise SystemExit(0)  # stop before drawing: only the configuration matters here

    monkeypatch.setattr(f"{module}.{function}", capture)
    argv = ["viz", kind, "--model", "llama3-70b", "--global-batch", "512"]
    with pytest.raises(SystemExit):
        main([*argv, "--out", str(tmp_path / "f.png")])
    (cfg,) = seen
    assert (cfg.layers, cfg.hidden, cfg.kv_heads) == (80, 8192, 8)  # Llama 3 70B, not the 7B
