"""Parallel training schemes built on the virtual cluster: data, tensor and pipeline parallelism."""
