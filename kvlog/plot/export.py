"""Writing the memory figure: self-contained HTML, or PNG and SVG rendered by Chromium through Kaleido.

The HTML carries plotly.js inline: an operator opens it on a machine with no network (an air-gapped
cluster) and it draws. PNG and SVG are rendered by Plotly's own renderer in a headless Chrome or
Chromium that Kaleido (1.x) drives: the same drawing as the HTML, not a second one to keep alike.
Kaleido's page would load MathJax from a CDN; the figure has no LaTeX, so it is turned off and the
render needs no network either. The file is replaced in one rename once written, never left half.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kvlog.io.outputs import atomic_output
from kvlog.plot.errors import PlotError

#: the figures ``kvlog plot`` draws: each rank's memory over time, or the ledger's stacked bar per rank
VIEWS = ("timeline", "ledger")
#: output suffixes ``kvlog plot`` writes, and the format of each
FORMATS = {".html": "html", ".png": "png", ".svg": "svg"}
EXTRA_MISSING = "kvlog plot needs the plot extra: pip install 'kvlog[plot]'"


def format_of(output: Path) -> str | None:
    """``html``, ``png`` or ``svg`` as ``output``'s suffix says (None: a suffix kvlog plot does not write)."""
    return FORMATS.get(output.suffix.lower())


def require_extra(fmt: str) -> None:
    """Raise ``PlotError`` unless what drawing ``fmt`` needs is installed: Plotly, and Kaleido for an image."""
    try:
        import plotly  # noqa: F401, PLC0415 - the check is the import

        if fmt != "html":
            import kaleido  # noqa: F401, PLC0415
    except ImportError as exc:
        raise PlotError(f"{EXTRA_MISSING} ({exc.name} is not installed)") from None


def write_figure(figure: Any, output: Path) -> None:
    """Write ``figure`` (a Plotly figure) to ``output`` in the format its suffix names."""
    fmt = format_of(output)
    if fmt == "html":
        data = figure.to_html(include_plotlyjs=True, full_html=True, config={"displaylogo": False}).encode()
    else:
        data = _render(figure, str(fmt), output)
    with atomic_output(output) as stream:
        stream.write(data)


def _render(figure: Any, fmt: str, output: Path) -> bytes:
    import kaleido  # noqa: PLC0415 - the plot extra, imported only to render an image
    from kaleido.errors import ChromeNotFoundError  # noqa: PLC0415

    layout = figure.layout
    options = {"format": fmt, "width": layout.width, "height": layout.height, "scale": 1}
    try:
        with _quiet():
            return bytes(kaleido.calc_fig_sync(figure.to_dict(), opts=options, kopts={"mathjax": False}))
    except ChromeNotFoundError:
        raise PlotError(
            f"{output}: kvlog plot renders {fmt.upper()} with Chrome or Chromium, and none was found: "
            "install chromium (apt-get install chromium) or run kaleido_get_chrome, or set BROWSER_PATH; "
            "or write .html, which needs no browser"
        ) from None
    except Exception as exc:  # noqa: BLE001 - Kaleido and the browser it drives fail in ways of their own
        raise PlotError(f"{output}: cannot render {fmt.upper()}: {type(exc).__name__}: {exc}") from None


@contextmanager
def _quiet() -> Iterator[None]:
    """Kaleido's and choreographer's warnings of their own housekeeping kept off kvlog's console.

    They warn when a browser's temporary profile outlives it or a browser is killed at exit: the image
    is rendered all the same, and ``kvlog plot`` says one line. A render that fails still raises.
    """
    loggers = [logging.getLogger(name) for name in ("kaleido", "choreographer")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)
