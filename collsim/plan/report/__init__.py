"""What the planner prints: the :class:`Report` record, its text and the search table.

=====================  =====================================================================
module                 what it holds
=====================  =====================================================================
:mod:`.record`         :class:`Report`: findings, estimates, suggestions; ``to_dict()`` and
                       ``to_json()`` (schema ``collsim.plan/1``)
:mod:`.text`           :func:`render`, the report as text; how counts and FLOPs are written
:mod:`.table`          :func:`search_table`, the ``collsim plan --search`` table
=====================  =====================================================================
"""

from .record import SCHEMA, Report
from .table import model_name, search_rows, search_table
from .text import format_count, format_flops, render

__all__ = [
    "Report",
    "SCHEMA",
    "render",
    "search_table",
    "search_rows",
    "model_name",
    "format_count",
    "format_flops",
]
