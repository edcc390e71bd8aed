"""`python -m waferline.cli ARGS` runs `waferline ARGS` with this interpreter (how the editor clients start it)."""

import sys

from waferline.cli.main import main

sys.exit(main())
