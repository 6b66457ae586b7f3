"""Inference on the cluster: tensor-, context- and pipeline-parallel greedy decoding with a
KV cache.

==================  ===============================================================
module              contents
==================  ===============================================================
``config``          InferenceSplit: tp, cp, pp, the all-reduce algorithm, their rules
``shard``           RankWeights: what one rank holds, cut from the full Decoder
``context``         attention with the prompt and its KV cache split by tokens over cp
``program``         the rank program: prefill, then one token a step
``run``             generate_on_cluster, InferenceRun and the all-reduces it made
==================  ===============================================================

The oracle is :class:`collsim.nn.Decoder` on one device.
"""

from .config import InferenceSplit
from .program import DecodePass, RankOutput, StageHandoff
from .run import AllReduceCall, InferenceRun, all_reduce_calls, generate_on_cluster
from .shard import RankWeights

__all__ = [
    "InferenceSplit",
    "RankWeights",
    "DecodePass",
    "StageHandoff",
    "RankOutput",
    "AllReduceCall",
    "InferenceRun",
    "generate_on_cluster",
    "all_reduce_calls",
]
