"""The figures' drawing code, shared by notebooks: each function takes results and returns a Figure."""

from .architecture import draw_taser_architecture, expert_names

__all__ = ["draw_taser_architecture", "expert_names"]
