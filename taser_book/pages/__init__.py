"""Each page's experiment as Python: what it trains, its tables and its figures, one module per page.

A page module names the page (`PAGE`), resolves its settings (`settings(profile, overrides)`: the profile's
model and sizes, `taser_book.profiles.page_settings`), runs its experiment in one call (`run(settings,
results_dir)`: the runs from the run cache, the tables computed and saved) and returns a typed result whose methods
give the page's figures and tables. A notebook then reads as prose and one call per cell:

    >>> from taser_book.pages import testbed
    >>> page = testbed.run(testbed.settings("cpu"), results_dir=None)   # None: nothing saved, and it says so
    >>> page.gap_figure()          # the figure under the page's second heading
    >>> page.numbers()             # the table under its third

`common` holds what the pages share: the re-ranking parameters every dual-encoder page passes to its runs.
"""
