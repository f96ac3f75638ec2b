"""``kvlog plot``: device and host memory over time, per server run and rank, drawn from kvlog events.

``timeline`` turns events into the states to draw (pure: no plotting library), ``figure`` draws them
with Plotly and ``export`` writes the figure as self-contained HTML, PNG or SVG. Plotly (the ``plot``
extra) is imported only by ``figure`` and ``export``, so the rest of kvlog never needs it.
"""
