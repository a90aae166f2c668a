"""The figures' drawing code, shared by notebooks: each function takes results and returns a Figure."""

from .architecture import draw_taser_architecture, expert_names
from .efficiency import plot_cost_bars
from .hybrid import plot_alpha_curves, plot_alpha_panels
from .retrieval import plot_beside_paper, plot_metric_bars
from .propositions import plot_prop3_gradients, plot_truncation_curve
from .routing import plot_expert_usage, plot_routing_entropy
from .style import COLUMN_WIDTH_IN, book_rc, book_style, panel_grid
from .scores import (learning_curve_table, plot_learning_curves, plot_margin_histograms, plot_score_densities,
                     plot_size_sweep)

__all__ = ["draw_taser_architecture", "expert_names", "plot_beside_paper", "plot_expert_usage", "plot_metric_bars",
           "plot_routing_entropy"]
__all__ += ["learning_curve_table", "plot_learning_curves", "plot_margin_histograms", "plot_score_densities",
            "plot_size_sweep"]
__all__ += ["plot_alpha_curves", "plot_alpha_panels", "plot_cost_bars"]
__all__ += ["plot_prop3_gradients", "plot_truncation_curve"]
__all__ += ["COLUMN_WIDTH_IN", "book_rc", "book_style", "panel_grid"]
