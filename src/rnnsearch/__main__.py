import sys

from rnnsearch.cli import main

sys.exit(main())
