"""The notebooks' tables: trained models over seeds evaluated like the baselines (`seeded`, `out_of_domain`), the
hybrid weight sweep (`hybrid_sweep`), re-ranking and train-test tables of the dual-encoder pages (`rerank_tables`,
`train_test`) and the recall cutoff that stands for the paper's on a smaller corpus (`cutoffs`)."""
