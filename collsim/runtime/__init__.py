"""Cluster, ranks and the operations rank programs yield."""

from .cluster import Cluster, RunResult
from .faults import Faults
from .ops import CountOnly, Handle
from .rank import Rank

__all__ = ["Cluster", "RunResult", "Rank", "CountOnly", "Handle", "Faults"]
