"""`python -m taser_book.cli ...`: the `taser` command where its entry point is not installed (a GPU node that
puts the checkout on PYTHONPATH)."""

from . import main

raise SystemExit(main())
