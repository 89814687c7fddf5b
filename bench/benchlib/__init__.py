"""The library behind `bench/run`: processes, paths, tools, cells, statistics.

Modules, one concept each:
  core   settings from the environment, child processes (servers and
         clients, pinned, in a network namespace or not), free ports, the
         loopback and veth paths, clean-up on every exit
  tools  the anchors (install from Debian, versions, feature probes) and what
         this linerate build offers (engines, flags, subcommands)
  parse  every tool's output turned into numbers
  cells  what is measured: one cell = one comparison, its variants and goal
         (the cells in cells_*.py, their list in suite.py)
  stats  median/min/max/spread, ratios to the best anchor, the tables
"""
