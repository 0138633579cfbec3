"""`python -m tarn` is the `tarn` command."""

from tarn.cli import main

raise SystemExit(main())
