"""The list of every cell, from the cells_*.py modules.

Kept out of cells.py, which the cells_*.py modules import for what a cell
is: the list imports them, so it sits above them.
"""

from __future__ import annotations

from . import cells_flows, cells_host, cells_rr, cells_stream
from .cells import Cell
from .tools import Linerate, Tool


def all_cells(lr: Linerate, tools: dict[str, Tool]) -> list[Cell]:
    """Every cell, in the order the tables print them."""
    cells = (cells_stream.tcp_cells(lr, tools) + cells_stream.udp_cells(lr, tools)
             + cells_rr.rr_cells(lr, tools) + cells_rr.crr_cells(lr, tools)
             + cells_host.rss_cells(lr, tools) + cells_flows.flows_cells(lr, tools)
             + cells_stream.iperf3_server_cells(lr, tools)
             + cells_stream.iperf3_dropin_cells(lr, tools)
             + cells_host.local_cells(lr, tools))
    return [c.finish() for c in cells]
