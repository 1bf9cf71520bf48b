"""The rich console behind the reports that are tables (``envmgr report``, ``envmgr verify``).

Text reports do not use rich (``envmgr.report.printer``): it is imported only here, when a
table is drawn.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def rich_console(stderr: bool = False) -> Console:
    """Piped output (CI logs, files) is not wrapped at 80 columns; no emoji (':link:' is text)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(highlight=False, emoji=False, stderr=stderr, width=None if stream.isatty() else 160)
