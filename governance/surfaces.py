"""The assistant's product surfaces: the apps that hold API clients.

The kernel owns this list because a surface client (a token bound to one tenant and one
surface) is a governance object; consent's consumers include these names and the operator
consoles.
"""

from __future__ import annotations

SURFACES: tuple[str, ...] = (
    "assistant",
    "tara",
    "arete",
    "veritas",
    "nyx",
    "nisaba",
    "metis",
    "studio",
)
