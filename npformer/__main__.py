"""``python -m npformer``: the same as the ``npformer`` command."""

import sys

from .cli import main

sys.exit(main())
