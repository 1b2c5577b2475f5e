"""``python -m taskscale.cli``: the ``taskscale`` command."""

import sys

from taskscale.cli import main

sys.exit(main())
