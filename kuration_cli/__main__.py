"""``python -m kuration_cli``: the ``kuration`` command."""

import sys

from kuration_cli import main

sys.exit(main())
