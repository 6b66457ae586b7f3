"""Serving metrics read from a run's token times, under vLLM's Prometheus names.

For each request: the time to first token (TTFT, ``vllm:time_to_first_token_seconds``)
from its arrival to its first token (queueing, the prefill and, disaggregated, the KV
cache's transfer); the gaps between its later tokens (inter-token latency, ITL,
``vllm:inter_token_latency_seconds``); their mean, the time per output token (TPOT,
``vllm:request_time_per_output_token_seconds``: (last − first) / (tokens − 1)); and the
end-to-end latency (``vllm:e2e_request_latency_seconds``).  Throughput is generated
tokens per simulated second, first arrival to last token.

Examples
--------
>>> times = [RequestTimes(0, 0.0, 4, (1.0, 1.5, 2.0)), RequestTimes(1, 0.0, 4, (2.0, 3.0))]
>>> m = serving_metrics(times)
>>> m.ttft.mean, m.tpot.mean, m.itl.max, m.e2e.max, m.tokens_per_second
(1.5, 0.75, 1.0, 3.0, 1.6666666666666667)
"""

from typing import NamedTuple

import numpy as np

from ...errors import ConfigError

__all__ = ["RequestTimes", "Summary", "ServingMetrics", "serving_metrics", "VLLM_NAMES"]

# the field of ServingMetrics -> vLLM's metric of the same meaning (vLLM docs/design/metrics.md)
VLLM_NAMES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}


class RequestTimes(NamedTuple):
    """When one request arrived and when each of its output tokens was known (seconds)."""

    request: int  # its id
    arrival: float  # simulated seconds
    prompt_tokens: int
    token_times: tuple  # simulated seconds of each output token, in order

    @property
    def ttft(self):
        return self.token_times[0] - self.arrival

    @property
    def gaps(self):
        """Inter-token latencies: seconds between consecutive output tokens."""
        return tuple(b - a for a, b in zip(self.token_times, self.token_times[1:], strict=False))

    @property
    def tpot(self):
        """Mean seconds per output token after the first (None for a single token)."""
        n = len(self.token_times)
        return (self.token_times[-1] - self.token_times[0]) / (n - 1) if n > 1 else None


class Summary(NamedTuple):
    """Mean, median, 99th percentile and largest of one metric's samples (seconds)."""

    mean: float
    p50: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, samples):
        if not samples:
            return cls(float("nan"), float("nan"), float("nan"), float("nan"), 0)
        a = np.asarray(samples, dtype=float)
        return cls(
            float(a.mean()),
            float(np.percentile(a, 50)),
            float(np.percentile(a, 99)),
            float(a.max()),
            len(a),
        )


class ServingMetrics(NamedTuple):
    """A run's serving metrics; ``VLLM_NAMES`` gives each field's vLLM name."""

    ttft: Summary  # over requests
    itl: Summary  # over every gap between two tokens of a request
    tpot: Summary  # over requests with at least two tokens
    e2e: Summary  # over requests
    prompt_tokens: int
    generation_tokens: int
    tokens_per_second: float  # generated tokens / (last token - first arrival)

    def as_vllm(self):
        """``{vLLM metric name: value}``: summaries as dicts, totals as ints."""
        out = {}
        for field, name in VLLM_NAMES.items():
            value = getattr(self, field)
            out[name] = value._asdict() if isinstance(value, Summary) else value
        out["tokens_per_second"] = self.tokens_per_second
        return out


def serving_metrics(requests):
    """The :class:`ServingMetrics` of a run's :class:`RequestTimes`."""
    requests = list(requests)
    if not requests or any(not r.token_times for r in requests):
        raise ConfigError("serving metrics need at least one request, each with a token")
    start = min(r.arrival for r in requests)
    end = max(r.token_times[-1] for r in requests)
    generated = sum(len(r.token_times) for r in requests)
    return ServingMetrics(
        Summary.of([r.ttft for r in requests]),
        Summary.of([g for r in requests for g in r.gaps]),
        Summary.of([r.tpot for r in requests if r.tpot is not None]),
        Summary.of([r.token_times[-1] - r.arrival for r in requests]),
        sum(r.prompt_tokens for r in requests),
        generated,
        generated / (end - start) if end > start else float("inf"),
    )
