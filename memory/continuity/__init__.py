"""Cross-device continuity: continuation tokens (spec "Cross-Device Continuity Protocol").

A sub-app of `memory` with its own migrations; see docs/decisions/continuity.md.
"""
