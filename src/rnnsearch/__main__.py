import sys

from rnnsearch.tools.cli import main

sys.exit(main())
