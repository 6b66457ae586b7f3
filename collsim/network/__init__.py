"""Event engine, flow-level link model, accounting and trace."""

from .engine import FINISH, START, Engine, SimulationLimitError
from .flows import MODELS, Network

__all__ = ["Engine", "Network", "MODELS", "FINISH", "START", "SimulationLimitError"]
