"""The figures' drawing code, shared by notebooks: each function takes results and returns a Figure."""

from .architecture import draw_taser_architecture, expert_names
from .retrieval import plot_metric_bars

__all__ = ["draw_taser_architecture", "expert_names", "plot_metric_bars"]
