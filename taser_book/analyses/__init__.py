"""The papers' analyses, computed on what the library's models, retrievers and evaluation give: the book's pages
call them; a researcher's own project rarely needs them, so they live here and not in the core (`taser_lib`).

- `baselines`: BM25, dense and hybrid first-stage runs scored as the TASER tables score them.
- `scores`, `diffuseness`, `disagreement`: re-rankers' score distributions, margins and where two disagree
  ("In defense of dual-encoders" §3.3, Figures 2, 5-8, Tables 3, 10, 11).
- `propositions`: Propositions 1 and 3 of "In defense of dual-encoders" checked numerically.
- `routing`: which expert FFN a trained TASER model sends its inputs to (TASER App. A).
- `hypothesis`, `reproducibility`: the tests a claim's words call for, and Breuer et al.'s ER and Delta RI.

Each imports only from taser_lib (tests/test_layers.py checks it).
"""
