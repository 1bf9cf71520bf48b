"""``python -m envmgr`` runs the CLI."""

import sys

from envmgr.cli import main

sys.exit(main())
