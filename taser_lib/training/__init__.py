"""Training layer: trainers, hard-negative mining, checkpoints, distributed helpers (losses: taser_lib.losses)."""
